package doctor

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

const (
	nrClone3      = 435
	nrFaccessat2  = 439
	nrFaccessat   = 269
	nrPtrace      = 101
	nrSeccomp     = 317
	enosys, eperm = -38, -1
)

func refusedCall(tid uint32, t uint64, nr uint32, ret int64) event.Event {
	e := sys(tid, t, nr, ret, 0)
	e.Syscall.Refused = true
	return e
}

func withPath(e event.Event, arg int, path string) event.Event {
	e.Syscall.Data[arg] = []byte(path)
	return e
}

// The four answers a refused call can get, as the kernel shows them.
func TestRefused(t *testing.T) {
	tests := []struct {
		name  string
		evs   []event.Event
		sev   Severity
		words []string // nil: no finding
	}{
		{"eperm without fallback", []event.Event{
			sys(7, 10, nrSeccomp, 0, 1000, 1, 0, 0x7ffc0000),
			refusedCall(7, 1000, nrClone3, eperm),
			sys(7, 1100, 14, 0, 500), // rt_sigprocmask: glibc restores the mask and gives up
			refusedCall(7, 2000, nrFaccessat2, eperm),
			sys(7, 2100, 1, 40, 500), // write: the error message
		}, Warning, []string{"clone3, faccessat2", "EPERM", "did not fall back", "installed by prog[7]"}},
		{"enosys with fallback", []event.Event{
			refusedCall(7, 1000, nrClone3, enosys),
			sys(7, 1003, nrClone, 8, 20000),
			withPath(refusedCall(7, 2000, nrFaccessat2, enosys), 1, "/bin/sh"),
			withPath(sys(7, 2002, nrFaccessat, 0, 900), 1, "/bin/sh"),
		}, Info, []string{"fell back to", "clone", "faccessat", "ENOSYS"}},
		{"a call on another path is no fallback", []event.Event{
			withPath(refusedCall(7, 2000, nrFaccessat2, eperm), 1, "/bin/sh"),
			withPath(sys(7, 2002, 262, 0, 900), 1, ""), // newfstatat(1, "", AT_EMPTY_PATH): printf's
		}, Warning, []string{"did not fall back"}},
		{"eperm but a fallback anyway", []event.Event{
			refusedCall(7, 1000, nrClone3, eperm),
			sys(7, 1003, nrClone, 8, 20000),
		}, Info, []string{"fell back to clone 1 time(s)"}},
		{"the fallback must come next, and soon", []event.Event{
			refusedCall(7, 1000, nrClone3, eperm),
			sys(7, 1000+fallbackWithin+1, nrClone, 8, 20000), // 10 ms later: another call's
		}, Warning, []string{"did not fall back"}},
		{"a call with no newer-call story", []event.Event{
			refusedCall(7, 1000, nrPtrace, eperm),
		}, Info, []string{"denied ptrace"}},
		{"kernel ENOSYS with fallback", []event.Event{
			sys(7, 1000, nrFaccessat2, enosys, 300),
			sys(7, 1400, nrFaccessat, 0, 900),
		}, Info, []string{"this kernel does not implement faccessat2"}},
		{"kernel ENOSYS, no fallback", []event.Event{
			sys(7, 1000, nrFaccessat2, enosys, 300),
		}, 0, nil},
		{"an ordinary EPERM", []event.Event{
			sys(7, 1000, nrClone3, eperm, 300), // the kernel ran it: a capability check
		}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := byID(findings(tt.evs), "syscall-refused")
			if tt.words == nil {
				if f != nil {
					t.Fatalf("unexpected finding: %s", f.Title)
				}
				return
			}
			if f == nil {
				t.Fatal("no syscall-refused finding")
			}
			if f.Severity != tt.sev {
				t.Errorf("severity %s, want %s: %s", f.Severity, tt.sev, f.Title)
			}
			for _, w := range tt.words {
				if !strings.Contains(f.Title+" "+f.Summary, w) {
					t.Errorf("%q missing from:\n%s\n%s", w, f.Title, f.Summary)
				}
			}
		})
	}
}

// A refused call is not also an error-storm or a retry.
func TestRefusedOnlyOnce(t *testing.T) {
	var evs []event.Event
	for i := range uint64(20000) {
		evs = append(evs, refusedCall(7, 1000+i*1000, nrClone3, eperm))
	}
	for _, f := range findings(evs) {
		if f.ID != "syscall-refused" {
			t.Errorf("also reported as %s: %s", f.ID, f.Title)
		}
	}
}

// Killed by its filter: SIGSYS with SYS_SECCOMP names the call.
func TestSeccompKill(t *testing.T) {
	evs := []event.Event{
		sys(7, 100, 14, 0, 500),
		{Kind: event.KindSignalGenerate, Time: 200, PID: 7, TID: 7, Comm: "prog",
			Signal: event.Signal{Sig: event.SIGSYS, Code: event.SysSeccomp, TargetPID: 7, TargetTID: 7, Addr: 0x473ff9,
				Syscall: nrClone3, Arch: 0xc000003e}},
		{Kind: event.KindExit, Time: 300, PID: 7, TID: 7, Comm: "prog", Proc: event.Proc{ExitCode: 31, GroupDead: true}},
	}
	fs := findings(evs)
	f := byID(fs, "syscall-refused")
	if f == nil || f.Severity != Critical {
		t.Fatalf("want a critical syscall-refused, got %+v", fs)
	}
	for _, w := range []string{"killed by its seccomp filter for calling clone3", "0x473ff9"} {
		if !strings.Contains(f.Title+" "+f.Summary, w) {
			t.Errorf("%q missing from:\n%s\n%s", w, f.Title, f.Summary)
		}
	}
	if byID(fs, "fatal-signal") != nil {
		t.Error("also reported as fatal-signal")
	}
}

// A program that falls back from a refused faccessat2 to access 5,000
// times is said to have done so 5,000 times: the count is of every
// refusal, not of the first few a thread's were kept of.
func TestRefusedFallbackCountExact(t *testing.T) {
	const nrAccess, times = 21, 5000
	var evs []event.Event
	tm := uint64(1000)
	for range times {
		evs = append(evs, withPath(refusedCall(7, tm, nrFaccessat2, eperm), 1, "/bin/sh"))
		evs = append(evs, withPath(sys(7, tm+2, nrAccess, 0, 900), 0, "/bin/sh"))
		tm += 100_000
	}
	f := byID(findings(evs), SyscallRefused)
	if f == nil {
		t.Fatal("no syscall-refused finding")
	}
	if want := "fell back to access 5000 time(s)"; !strings.Contains(f.Title+f.Summary, want) {
		t.Errorf("want %q in %q / %q", want, f.Title, f.Summary)
	}
}
