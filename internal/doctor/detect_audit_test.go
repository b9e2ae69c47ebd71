package doctor

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/audit"
	"github.com/sysray/sysray/internal/event"
)

const nrAccept4 = 288

func auditHost(win *audit.Window) Host {
	h := host
	h.Live = true
	h.Audit = func() *AuditWindow { return win }
	return h
}

func auditReport(h Host, evs []event.Event) []Finding {
	d := New(h, nil)
	for i := range evs {
		d.Observe(&evs[i])
	}
	return checked(d.Report()).Findings
}

// A full backlog seen only in the kernel's counters: no traced call waited
// (the command made no audited call), yet the host stalled.
func TestAuditStallFromCounters(t *testing.T) {
	full := audit.Status{Enabled: 1, PID: 4242, BacklogLimit: 8, Backlog: 9, BacklogWaitTime: 250}
	start, end := full, full
	start.Lost, start.BacklogWaitTimeActual = 100, 1000
	end.Lost, end.BacklogWaitTimeActual = 130, 1250 // +1 s at HZ=250
	win := &audit.Window{HZ: 250, Looks: 8, Every: 250e6,
		Start: &audit.Sample{Status: start}, End: &audit.Sample{Status: end},
		Samples: []audit.Sample{{Status: start}, {Status: end}},
		Daemon:  &audit.Daemon{PID: 4242, Comm: "agent", Queued: 200000},
		Sleepers: []audit.Sleeper{
			{PID: 7, TID: 7, Comm: "server", Syscall: "openat", Seen: 6, Stack: []string{"__schedule+0x1", "schedule_timeout+0x2", "audit_log_start+0x3"}},
			{PID: 7, TID: 8, Comm: "server", Syscall: "openat", Seen: 2},
		}}
	evs := []event.Event{sys(9, 1e9, 39, 9, 1000)} // getpid: not audited
	f := byID(auditReport(auditHost(win), evs), "audit-backlog-stall")
	if f == nil {
		t.Fatal("no audit-backlog-stall from the counters")
	}
	if f.Severity != Critical {
		t.Errorf("severity %v: tasks waited a second in all", f.Severity)
	}
	for _, k := range []string{"waited_ns", "lost_records", "audit_status_start", "audit_status_end", "backlog_full_reads",
		"asleep_in_audit_log_start", "stack", "audit_daemon"} {
		if _, ok := f.Evidence[k]; !ok {
			t.Errorf("evidence lacks %s: %v", k, f.Evidence)
		}
	}
	if f.Evidence["waited_ns"] != uint64(1e9) || f.Evidence["lost_records"] != uint32(30) {
		t.Errorf("waited %v, lost %v; want 1s and 30", f.Evidence["waited_ns"], f.Evidence["lost_records"])
	}
	for _, w := range []string{"already full when the doctor started", "server[7] in openat, 2 threads", "agent[4242]", "None of the traced calls waited"} {
		if !strings.Contains(f.Summary, w) {
			t.Errorf("summary lacks %q: %s", w, f.Summary)
		}
	}
}

// Traced calls asleep in audit_log_start make the finding without counters
// (a capture), critical from one 100 ms stall.
func TestAuditStallFromEvents(t *testing.T) {
	e := sys(5, 1e9, nrAccept4, -11, 600e6, 3, 0, 0, 0x800)
	e.Syscall.Sleeps = []event.Sleep{{Duration: 600e6, Stack: []event.Frame{{Name: "__schedule+0x1"}, {Name: "schedule_timeout+0x2"},
		{Name: "audit_log_start+0x3"}, {Name: "audit_log_exit+0x4"}}}}
	f := byID(auditReport(host, []event.Event{e}), "audit-backlog-stall")
	if f == nil || f.Severity != Critical {
		t.Fatalf("finding %+v, want a critical audit-backlog-stall", f)
	}
	if _, ok := f.Evidence["waited_ns"]; ok {
		t.Errorf("counters in evidence without a window: %v", f.Evidence)
	}
	if byID(auditReport(host, []event.Event{e}), "slow-syscall") != nil {
		t.Error("the audit stall is also reported as a slow syscall")
	}
}

// Audit on and healthy over the run: nothing to say.
func TestAuditQuiet(t *testing.T) {
	ok := audit.Status{Enabled: 1, PID: 4242, BacklogLimit: 8192, Backlog: 0, Lost: 5, BacklogWaitTimeActual: 10}
	win := &audit.Window{HZ: 250, Looks: 8, Start: &audit.Sample{Status: ok}, End: &audit.Sample{Status: ok},
		Samples: []audit.Sample{{Status: ok}, {Status: ok}, {Status: ok}}}
	if f := byID(auditReport(auditHost(win), nil), "audit-backlog-stall"); f != nil {
		t.Errorf("finding on a healthy audit host: %s", f.Summary)
	}
}

// Without the counters (the status unreadable: no CAP_AUDIT_CONTROL) the
// tasks found asleep are all there is: one found in looks a second apart
// waited a stall's length, which is critical; one found once is a warning.
func TestAuditStallFromSleepersOnly(t *testing.T) {
	for _, c := range []struct {
		first, last uint64
		seen        int
		want        Severity
	}{
		{1e9, 2e9, 5, Critical},
		{1e9, 1e9, 1, Warning},
	} {
		win := &audit.Window{HZ: 250, Looks: 5, Every: 1e9, Err: "operation not permitted",
			Sleepers: []audit.Sleeper{{PID: 7, TID: 7, Comm: "server", Syscall: "accept4", Seen: c.seen, First: c.first, Last: c.last}}}
		f := byID(auditReport(auditHost(win), nil), "audit-backlog-stall")
		if f == nil {
			t.Fatalf("seen %d: no finding from the sleepers", c.seen)
		}
		if f.Severity != c.want {
			t.Errorf("seen %d over %d ns: %v, want %v", c.seen, c.last-c.first, f.Severity, c.want)
		}
		if span, _ := f.Evidence["asleep_seen_over_ns"].(uint64); span != c.last-c.first {
			t.Errorf("asleep_seen_over_ns %v, want %d", f.Evidence["asleep_seen_over_ns"], c.last-c.first)
		}
	}
}
