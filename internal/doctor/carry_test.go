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
