package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

// audit-backlog-stall: the audit backlog full, so every audited syscall
// waits in audit_log_start. The demo audits accept4 for 4 s under a daemon
// that never reads, with sysray started first.
var auditVariants = []Variant{
	{Name: "audit-backlog-stall/throttled-daemon", Differs: "the seed story's cause: a daemon that reads, but from a CPU-throttled cgroup",
		Mode: Cmd, Argv: []string{"audit", "run", "-mode", "throttle", "-quota", "5ms", "-work", "2ms", "-d", "3s"},
		Expect: auditStall(doctor.Warning)},
	{Name: "audit-backlog-stall/openat", Differs: "another syscall (openat) reaching the same path, from filler processes",
		Mode: Cmd, Argv: []string{"audit", "sick", "-rule", "openat", "-d", "3s"}, Expect: auditStall(doctor.Warning)},
	{Name: "audit-backlog-stall/ppoll", Differs: "a wait by design (ppoll, no descriptors, a zero timeout) reaching the same path: its sleep in audit_log_start is the backlog's, not a wait it asked for",
		Mode: Cmd, Argv: []string{"audit", "sick", "-rule", "ppoll", "-d", "3s"}, Expect: auditStall(doctor.Warning)},
	{Name: "audit-backlog-stall/sick-host", Differs: "the backlog already full when sysray starts; the whole host for 2 s",
		Mode: Host, Argv: []string{"audit", "sick", "-d", "10s"},
		Lead: 3 * time.Second, For: 2 * time.Second, Expect: auditStall(doctor.Warning)},
	{Name: "audit-backlog-stall/sick-host-no-audit-control", Differs: "the sick host, with sysray lacking CAP_AUDIT_CONTROL: the audit status unreadable, only the tasks asleep in audit_log_start tell",
		Mode: Host, Argv: []string{"audit", "sick", "-d", "10s"}, Without: []string{"audit_control"},
		Lead: 3 * time.Second, For: 2 * time.Second,
		Expect: Expect{IDs: []doctor.ID{doctor.AuditBacklogStall}, Severity: doctor.Warning, Words: []string{"audit_log_start", "could not be read"}}},
	{Name: "audit-backlog-stall/pid", Differs: "already stalling when sysray attaches with -p to the orchestrator, whose acceptor it does not trace",
		Mode: PID, Argv: []string{"audit", "run", "-d", "8s"},
		Lead: 2 * time.Second, For: 2 * time.Second, Expect: auditStall(doctor.Warning)},
}

func auditStall(sev doctor.Severity) Expect {
	return Expect{IDs: []doctor.ID{doctor.AuditBacklogStall}, Severity: sev, Words: []string{"audit"}}
}
