package agent

import (
	"testing"
	"time"

	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
)

func newWindows() *Windows {
	return &Windows{
		New:   func() *doctor.Doctor { return doctor.New(doctor.Host{Arch: event.ArchAMD64}, nil) },
		Store: NewFindings(FindingsOptions{ActiveFor: time.Minute, Name: testNamer, MaxContainers: 10}),
	}
}

func crash(pid uint32, t uint64) []event.Event {
	return []event.Event{
		{Kind: event.KindSignalDeliver, Time: t, PID: pid, TID: pid, Comm: "crash",
			Signal: event.Signal{Sig: 11, Code: 1, Addr: 0x10, TargetPID: pid, TargetTID: pid}},
		{Kind: event.KindExit, Time: t + 1, PID: pid, TID: pid, Comm: "crash", Proc: event.Proc{ExitCode: 11, GroupDead: true}},
	}
}

// A crash in each of three windows is one finding seen three times, news
// only the first time; a window without one reports nothing new.
func TestWindowsCarryFindings(t *testing.T) {
	w := newWindows()
	t0 := time.Unix(1_700_000_000, 0)
	var all [][]Finding
	for i, pid := range []uint32{7, 0, 9, 11} {
		if pid != 0 {
			for _, e := range crash(pid, uint64(i+1)*1e9) {
				w.Observe(&e)
			}
		}
		_, news := w.Close(t0.Add(time.Duration(i)*10*time.Second), nil, nil, [2]uint64{})
		all = append(all, news)
	}
	if len(all[0]) != 1 || all[0][0].ID != "fatal-signal" || len(all[1])+len(all[2])+len(all[3]) != 0 {
		t.Fatalf("news by window: %+v", all)
	}
	l := w.Store.List(t0.Add(30 * time.Second))
	if len(l) != 1 || l[0].Occurrences != 3 || !l[0].FirstSeen.Equal(t0) || !l[0].LastSeen.Equal(t0.Add(30*time.Second)) {
		t.Errorf("kept: %+v", l)
	}
}

// A window is handed what the kernel counted during it, not since the
// probe was loaded; a reloaded probe's counts start again.
func TestWindowsCountDeltas(t *testing.T) {
	w := newWindows()
	k := stat.Key{PID: 5, Nr: 39}
	cell := func(count, errs uint64, enoent uint64) stat.Cell {
		c := stat.Cell{Key: k, Count: count, Errors: errs, Total: count * 100, Errnos: map[int]uint64{2: enoent}}
		c.Hist[3] = count
		return c
	}
	if got := w.cellsDelta([]stat.Cell{cell(100, 10, 10)}); len(got) != 1 || got[0].Count != 100 {
		t.Fatalf("first read: %+v", got)
	}
	got := w.cellsDelta([]stat.Cell{cell(250, 40, 40)})
	if len(got) != 1 || got[0].Count != 150 || got[0].Errors != 30 || got[0].Total != 15000 || got[0].Hist[3] != 150 || got[0].Errnos[2] != 30 {
		t.Errorf("second read: %+v", got)
	}
	if got := w.cellsDelta([]stat.Cell{cell(250, 40, 40)}); len(got) != 0 {
		t.Errorf("an idle cell: %+v", got)
	}
	if got := w.cellsDelta([]stat.Cell{cell(20, 0, 0)}); len(got) != 1 || got[0].Count != 20 {
		t.Errorf("after a reload: %+v", got)
	}

	s := func(n uint64) doctor.CPUSample {
		return doctor.CPUSample{PID: 5, Syscall: 221, Kernel: []string{"generic_fadvise", "ksys_fadvise64_64"}, Count: n}
	}
	w.samplesDelta([]doctor.CPUSample{s(10), s(5)})
	d := w.samplesDelta([]doctor.CPUSample{s(30), s(5)})
	if len(d) != 1 || d[0].Count != 20 {
		t.Errorf("samples: %+v", d)
	}
}
