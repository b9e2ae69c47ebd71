package doctor

import (
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// What a thread's exit spent is not carried to the next window: a thread
// that handled its SIGSEGV (a runtime's nil check) and later exited leaves
// nothing behind, while one still alive after its fault hands it on.
func TestCarrySpentAtExit(t *testing.T) {
	d := New(Host{Arch: event.ArchAMD64}, nil)
	for _, tid := range []uint32{9, 10} {
		for _, e := range []event.Event{
			{Kind: event.KindPageFault, Time: 200, PID: 9, TID: tid, Fault: event.Fault{Addr: 0x10, IP: 0x401000, Error: 6}},
			{Kind: event.KindSignalGenerate, Time: 210, PID: 9, TID: tid, Signal: event.Signal{Sig: 11, Code: 1, Addr: 0x10, SenderPID: 9, TargetPID: 9, TargetTID: tid}},
		} {
			d.Observe(&e)
		}
	}
	exit := event.Event{Kind: event.KindExit, Time: 300, PID: 9, TID: 10, Proc: event.Proc{ExitCode: 0}}
	d.Observe(&exit)
	next := New(Host{Arch: event.ArchAMD64}, nil)
	d.Carry(next)
	for _, det := range next.detectors {
		if f, ok := det.(*fatal); ok {
			if _, ok := f.faults[9]; !ok || len(f.faults) != 1 || len(f.signals) != 1 {
				t.Errorf("carried faults %v, signals %v; want thread 9's alone", f.faults, f.signals)
			}
			return
		}
	}
	t.Fatal("no fatal detector")
}

// An OOM victim whose exit comes in the window after the kill is still an
// OOM kill: the kernel counted the kill, and sent its SIGKILL, in the
// window before, so the next window's own count does not show it.
func TestCarryOOMKill(t *testing.T) {
	kills := uint64(3)
	host := Host{Arch: event.ArchAMD64, OOMKills: func() uint64 { return kills }}
	// And a kernel SIGKILL in a window that counted no OOM kill stays a
	// plain kill.
	for _, c := range []struct {
		name   string
		oom    bool // the kernel counts an OOM kill in the first window
		wantID ID
	}{
		{"oom", true, OOMKill},
		{"kernel kill without an oom kill", false, FatalSignal},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := New(host, nil)
			if c.oom {
				kills++
			}
			sig := event.Event{Kind: event.KindSignalGenerate, Time: 100, PID: 7, TID: 7, Comm: "hog",
				Signal: event.Signal{Sig: 9, Code: siKernel, TargetPID: 7, TargetTID: 7}}
			d.Observe(&sig)
			next := New(host, nil) // made after the kill: its count starts past it
			d.Carry(next)
			exit := event.Event{Kind: event.KindExit, Time: 200, PID: 7, TID: 7, Comm: "hog",
				Proc: event.Proc{ExitCode: 9, GroupDead: true}}
			next.Observe(&exit)
			var got []Finding
			for _, f := range next.Report().Findings {
				if f.ID == OOMKill || f.ID == FatalSignal {
					got = append(got, f)
				}
			}
			if len(got) != 1 || got[0].ID != c.wantID {
				t.Fatalf("findings %+v, want one %s", got, c.wantID)
			}
			if c.oom && (got[0].Severity != Critical || got[0].Evidence["oom_kills"] != uint64(1)) {
				t.Errorf("%s, evidence %v; want critical with oom_kills 1", got[0].Severity, got[0].Evidence)
			}
		})
	}
}
