package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var refusedVariants = []Variant{
	// syscall-refused: the demo is one current-glibc process under a filter
	// that answers EPERM for clone3 and faccessat2. The kernel marks the
	// refusal itself (sys_exit with no sys_enter), so the rule does not
	// depend on which call, how often, or which program.
	{Name: "syscall-refused/enosys-fallback", Differs: "the filter answers ENOSYS, as fixed runtimes do: glibc falls back to clone and faccessat",
		Mode: Cmd, Argv: []string{"seccomp-run", "-a", "enosys", "--", "newlibc"},
		Expect: Expect{IDs: []doctor.ID{doctor.SyscallRefused}, Severity: doctor.Info, Words: []string{"ENOSYS", "fell back", "clone"}}},
	{Name: "syscall-refused/seccomp-kill", Differs: "the filter kills (SECCOMP_RET_KILL_PROCESS): SIGSYS at the first clone3",
		Mode: Cmd, Argv: []string{"seccomp-run", "-a", "kill", "--", "newlibc"},
		Expect: Expect{IDs: []doctor.ID{doctor.SyscallRefused}, Severity: doctor.Critical, Words: []string{"killed", "clone3"}}},
	{Name: "syscall-refused/bash-test", Differs: "a real program and another call: bash's [ -x /bin/sh ] under a filter refusing faccessat2",
		Mode: Cmd, Argv: []string{"seccomp-run", "-s", "faccessat2", "--", "bash", "-c", "[ -x /bin/sh ]"},
		Expect: refusedWarns("faccessat2")},
	{Name: "syscall-refused/coreutils-statx", Differs: "statx refused: coreutils' stat and ls fail (\"cannot statx\")",
		Mode: Cmd, Argv: []string{"seccomp-run", "-s", "statx", "--", "bash", "-c", "stat / >/dev/null; ls -l / >/dev/null; true"},
		Expect: refusedWarns("statx")},
	{Name: "syscall-refused/8-procs", Differs: "8 processes at once, one thread and one access check each",
		Mode: Cmd, Argv: []string{"seccomp-run", "--", "newlibc", "-n", "8", "-t", "1", "-a", "1"},
		Expect: refusedWarns("clone3")},
	{Name: "syscall-refused/pid", Differs: "a service already refused before sysray starts, retrying every 100 ms; -p for 1.5 s",
		Mode: PID, Argv: []string{"seccomp-run", "--", "newlibc", "-d", "8", "-i", "100", "-t", "1", "-a", "1"},
		Lead: 500 * time.Millisecond, For: 1500 * time.Millisecond, Expect: refusedWarns("faccessat2")},
	{Name: "syscall-refused/host", Differs: "the same service; the whole host for 1.5 s",
		Mode: Host, Argv: []string{"seccomp-run", "--", "newlibc", "-d", "8", "-i", "100", "-t", "1", "-a", "1"},
		Lead: 500 * time.Millisecond, For: 1500 * time.Millisecond, Expect: refusedWarns("clone3")},
	{Name: "syscall-refused/container", Differs: "a service refused by its own filter inside a container (containerd, runc, under the runtime's default seccomp profile too), retrying every 100 ms before sysray starts; --container for 1.5 s",
		Mode: InContainer, Container: &Container{}, Argv: []string{"seccomp-run", "--", "{bin}/newlibc", "-d", "30", "-i", "100", "-t", "1", "-a", "1"},
		Lead: 1500 * time.Millisecond, For: 1500 * time.Millisecond, Expect: refusedWarns("faccessat2")},
}

func refusedWarns(call string) Expect {
	return Expect{IDs: []doctor.ID{doctor.SyscallRefused}, Severity: doctor.Warning, Words: []string{call, "EPERM", "did not fall back"}}
}
