package doctor

import (
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// Forty forks over forty windows, each after 1,600 more mappings: no
// window's doctor has enough calls to see a growth, the long doctor,
// handed all of them window after window, does; once the process exits
// and the window is reported, the long doctor forgets it.
func TestLongDoctorGrowthAcrossWindows(t *testing.T) {
	long := NewLong(host, nil)
	tm := uint64(1e9)
	var found *Finding
	for w := range 40 {
		win := New(host, nil)
		maps := 1600 * (w + 1)
		e := sys(5, tm, nrClone, int64(1000+w), uint64(maps)*1700)
		e.Syscall.Maps = uint32(maps)
		win.Observe(&e)
		long.Observe(&e)
		tm += 10_000_000_000 // a window of 10 s
		if f := byID(checked(win.Report()).Findings, "latency-grows-with-count"); f != nil {
			t.Fatalf("window %d alone found %s", w, f.Title)
		}
		if f := byID(checked(long.Report()).Findings, "latency-grows-with-count"); f != nil && found == nil {
			found = f
			if w < growthMinCalls-1 {
				t.Errorf("found after %d calls, fewer than growthMinCalls", w+1)
			}
		}
		long.Forget()
	}
	if found == nil {
		t.Fatal("the long doctor did not find the growth across 40 windows")
	}
	exit := event.Event{Kind: event.KindExit, Time: tm, PID: 5, TID: 5, Comm: "prog", Proc: event.Proc{GroupDead: true}}
	long.Observe(&exit)
	if f := byID(checked(long.Report()).Findings, "latency-grows-with-count"); f == nil {
		t.Error("the exit's window lost the finding before it was reported")
	}
	long.Forget()
	g := long.detectors[0].(*growth)
	if len(g.procs) != 0 || len(long.env.threads) != 0 || len(long.env.cgroups) != 0 {
		t.Errorf("after Forget: %d processes, %d threads, %d cgroups kept", len(g.procs), len(long.env.threads), len(long.env.cgroups))
	}
}

// A process calling for hours: its points stay under maxSamples and still
// span the whole run, first call to last.
func TestGrowthPointsSpanLongRuns(t *testing.T) {
	g := newGrowth(event.ArchAMD64)
	n := 5*maxSamples + 123
	for i := range n {
		e := sys(5, uint64(i), nrClone, 1, 1000)
		e.Syscall.Maps = uint32(i + 1)
		g.Observe(&e)
	}
	sm := g.procs[5].samples[nrClone]
	if len(sm.maps) > maxSamples || len(sm.maps) < maxSamples/2 {
		t.Fatalf("%d points for %d calls", len(sm.maps), n)
	}
	if first, last := sm.maps[0].x, sm.maps[len(sm.maps)-1].x; first != 1 || last < float64(n)-float64(sm.stride) {
		t.Errorf("points span %v to %v of 1 to %d (stride %d)", first, last, n, sm.stride)
	}
}
