package checkup

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/audit"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/probe"
	"github.com/sysray/sysray/internal/symbol"
)

func TestFilling(t *testing.T) {
	for _, tc := range []struct {
		st   *audit.Status
		want bool
	}{
		{nil, false},
		{&audit.Status{Enabled: 0, BacklogLimit: 64, Backlog: 64}, false}, // audit off
		{&audit.Status{Enabled: 1, BacklogLimit: 0, Backlog: 64}, false},  // no limit: nothing waits
		{&audit.Status{Enabled: 1, BacklogLimit: 64, Backlog: 31}, false},
		{&audit.Status{Enabled: 1, BacklogLimit: 64, Backlog: 32}, true},
		{&audit.Status{Enabled: 1, BacklogLimit: 64, Backlog: 80}, true},
	} {
		if got := filling(tc.st); got != tc.want {
			t.Errorf("filling(%+v) = %v, want %v", tc.st, got, tc.want)
		}
	}
}

func TestAuditGuardFullAtStart(t *testing.T) {
	var w bytes.Buffer
	g := &auditGuard{first: &audit.Status{Enabled: 1, BacklogLimit: 64, Backlog: 64, Lost: 3, BacklogWaitTime: 6000, PID: 812},
		hz: 250, warn: &w}
	if !g.frugal() || !g.begin() || !g.sick.Load() {
		t.Fatalf("a full backlog at the start: frugal %v, sick %v", g.frugal(), g.sick.Load())
	}
	want := "sysray: CRITICAL [audit-backlog-stall] the audit backlog is full: backlog 64, limit 64, lost 3, " +
		"backlog_wait_time 6000 jiffies (24s); the registered audit daemon, pid 812, is not draining it."
	if !strings.HasPrefix(w.String(), want) {
		t.Errorf("warning\n%q\nwant it to start\n%q", w.String(), want)
	}
	// Said once: a later read that finds it sick again says nothing.
	n := w.Len()
	g.check(&audit.Status{Enabled: 1, BacklogLimit: 64, Backlog: 64, Lost: 9})
	if w.Len() != n {
		t.Errorf("warned twice: %q", w.String()[n:])
	}
}

// A later read decides from what the backlog caused, not its level then.
func TestAuditGuardLater(t *testing.T) {
	first := audit.Status{Enabled: 1, BacklogLimit: 8192, Backlog: 10, Lost: 2, BacklogWaitTimeActual: 1000}
	for _, tc := range []struct {
		name   string
		now    audit.Status
		sick   bool
		saying string
	}{
		{"drained", audit.Status{Enabled: 1, BacklogLimit: 8192, Backlog: 0, Lost: 2, BacklogWaitTimeActual: 1000}, false, ""},
		{"tasks waited", audit.Status{Enabled: 1, BacklogLimit: 8192, Backlog: 3, Lost: 2, BacklogWaitTimeActual: 1500}, true,
			"the audit backlog is filling up, tasks waited 2s for room in it while sysray started: backlog 3"},
		{"records lost", audit.Status{Enabled: 1, BacklogLimit: 8192, Backlog: 0, Lost: 5, BacklogWaitTimeActual: 1000}, true,
			"the audit backlog is filling up: backlog 0, limit 8192, lost 5, backlog_wait_time 0 jiffies (0s); no audit daemon is registered."},
		{"filling", audit.Status{Enabled: 1, BacklogLimit: 8192, Backlog: 8192, Lost: 2, BacklogWaitTimeActual: 1000}, true,
			"the audit backlog is full: backlog 8192"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w bytes.Buffer
			f := first
			g := &auditGuard{first: &f, hz: 250, warn: &w}
			if g.begin() {
				t.Fatal("sick at a first read with an empty backlog")
			}
			g.check(&tc.now)
			if g.sick.Load() != tc.sick {
				t.Errorf("sick %v, want %v", g.sick.Load(), tc.sick)
			}
			if !strings.Contains(w.String(), tc.saying) || (tc.saying == "") != (w.Len() == 0) {
				t.Errorf("warning %q, want one saying %q", w.String(), tc.saying)
			}
		})
	}
}

func TestAuditGuardWithoutAudit(t *testing.T) {
	var w bytes.Buffer
	g := &auditGuard{warn: &w, hz: 100}
	if g.frugal() || g.begin() {
		t.Error("frugal or sick without an audit status")
	}
	g.check(&audit.Status{Enabled: 1, BacklogLimit: 1, Backlog: 1})
	if g.sick.Load() || w.Len() != 0 {
		t.Errorf("sick without a first read to compare with: %q", w.String())
	}
	off := &auditGuard{first: &audit.Status{Enabled: 0, BacklogLimit: 64}, warn: &w}
	if off.frugal() {
		t.Error("frugal with audit off")
	}
	if got := waitText(100, 0); got != "" {
		t.Errorf("waitText without HZ: %q", got)
	}
}

func TestKernelSamplesNames(t *testing.T) {
	names := map[uint64]string{0xffff1: "schedule", 0xffff2: "do_sys_openat2"}
	got := kernelSamples([]probe.Sample{
		{PID: 3, Syscall: 257, Count: 9, Kernel: []uint64{0xffff1, 0xffffdead, 0xffff2}},
		{PID: 4, Syscall: -1, Count: 1},
	}, func(a uint64) string { return names[a] })
	if len(got) != 2 {
		t.Fatalf("%d samples", len(got))
	}
	if g := got[0]; g.PID != 3 || g.Syscall != 257 || g.Count != 9 ||
		strings.Join(g.Kernel, ",") != "schedule,0xffffdead,do_sys_openat2" {
		t.Errorf("first sample %+v", g)
	}
	if g := got[1]; g.PID != 4 || g.Syscall != -1 || len(g.Kernel) != 0 {
		t.Errorf("a sample in user space %+v", g)
	}
}

func TestSleepersIn(t *testing.T) {
	frames := map[uint64]symbol.Frame{
		1: {Func: "schedule_timeout", Offset: 0x10, Kernel: true},
		2: {Func: "audit_log_start", Offset: 0x4c, Kernel: true},
		3: {Func: "__x64_sys_openat", Kernel: true},
		4: {Func: "io_schedule", Kernel: true},
	}
	arch := event.HostArch()
	openat, _ := event.SyscallByName(arch, "openat")
	got := sleepersIn([]probe.Blocked{
		{PID: 10, TID: 11, Comm: "app", Syscall: int32(openat), Kernel: []uint64{1, 2, 99, 3}},
		{PID: 12, TID: 12, Comm: "dd", Syscall: 1, Kernel: []uint64{4}},
		{PID: 13, TID: 13, Comm: "kworker", Syscall: -1, Kernel: []uint64{2}},
	}, arch, func(a uint64) symbol.Frame { f := frames[a]; f.Addr = a; return f })
	if len(got) != 2 {
		t.Fatalf("sleepers %+v, want the two in audit_log_start", got)
	}
	if g := got[0]; g.PID != 10 || g.TID != 11 || g.Comm != "app" || g.Syscall != "openat" ||
		strings.Join(g.Stack, ",") != "schedule_timeout+0x10,audit_log_start+0x4c,0x63,__x64_sys_openat" {
		t.Errorf("first sleeper %+v", g)
	}
	if g := got[1]; g.PID != 13 || g.Syscall != "" {
		t.Errorf("a kernel thread %+v", g)
	}
}
