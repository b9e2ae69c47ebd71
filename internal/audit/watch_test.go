package audit

import (
	"slices"
	"testing"
	"time"
)

func TestFull(t *testing.T) {
	for _, c := range []struct {
		st   Status
		want bool
	}{
		{Status{Enabled: 1, BacklogLimit: 8, Backlog: 9}, true},
		{Status{Enabled: 1, BacklogLimit: 8, Backlog: 8}, true},
		{Status{Enabled: 1, BacklogLimit: 8, Backlog: 7}, false},
		{Status{Enabled: 0, BacklogLimit: 8, Backlog: 9}, false}, // off: nothing waits
		{Status{Enabled: 1, BacklogLimit: 0, Backlog: 9}, false}, // no limit: nothing waits
	} {
		if got := c.st.Full(); got != c.want {
			t.Errorf("%+v: Full %v, want %v", c.st, got, c.want)
		}
	}
	var none *Status
	if none.Full() {
		t.Error("a status that could not be read is not full")
	}
}

func TestWindowCounters(t *testing.T) {
	w := &Window{Samples: []Sample{
		{At: 1, Status: Status{Enabled: 1, BacklogLimit: 8, Backlog: 3, Lost: 100, BacklogWaitTimeActual: 1000}},
		{At: 2, Status: Status{Enabled: 1, BacklogLimit: 8, Backlog: 9, Lost: 120, BacklogWaitTimeActual: 1400}},
		{At: 3, Status: Status{Enabled: 1, BacklogLimit: 8, Backlog: 8, Lost: 130, BacklogWaitTimeActual: 1500}},
	}}
	if got := w.Waited(); got != 500 {
		t.Errorf("waited %d jiffies, want 500", got)
	}
	if got := w.Lost(); got != 30 {
		t.Errorf("lost %d, want 30", got)
	}
	full, of, maxBacklog := w.FullSamples()
	if full != 2 || of != 3 || maxBacklog != 9 {
		t.Errorf("full %d of %d, max backlog %d; want 2 of 3, 9", full, of, maxBacklog)
	}
	// One read says nothing about growth.
	one := &Window{Samples: w.Samples[:1]}
	if one.Waited() != 0 || one.Lost() != 0 {
		t.Errorf("one read: waited %d, lost %d", one.Waited(), one.Lost())
	}
	var none *Window
	if none.Waited() != 0 || none.Lost() != 0 {
		t.Error("no window: no waits")
	}
}

func TestWatcherSleepers(t *testing.T) {
	now := uint64(0)
	w := NewWatcher(&Status{Enabled: 1, BacklogLimit: 8, Backlog: 9}, func() uint64 { now++; return now }, nil)
	w.look([]Sleeper{{PID: 1, TID: 1, Comm: "a", Syscall: "openat"}, {PID: 2, TID: 3, Comm: "b"}})
	w.look([]Sleeper{{PID: 1, TID: 1, Comm: "a", Syscall: "openat"}})
	w.Record(&Status{Enabled: 1, BacklogLimit: 8, Backlog: 9, BacklogWaitTimeActual: 5})
	w.status = func() (*Status, error) {
		return &Status{Enabled: 1, BacklogLimit: 8, Backlog: 2, BacklogWaitTimeActual: 7, Lost: 4}, nil
	}
	win := w.Stop(time.Second) // not running: no loop to wait for
	if win.End == nil || win.End.Status.Backlog != 2 {
		t.Fatalf("end %+v, want the last read", win.End)
	}
	if win.Looks != 2 || len(win.Sleepers) != 2 {
		t.Fatalf("looks %d, sleepers %+v", win.Looks, win.Sleepers)
	}
	if s := win.Sleepers[0]; s.TID != 1 || s.Seen != 2 || s.Syscall != "openat" {
		t.Errorf("first sleeper %+v, want tid 1 seen twice in openat", s)
	}
	if win.Waited() != 7 || win.Lost() != 4 {
		t.Errorf("waited %d, lost %d; want 7 and 4 from the first read to the last", win.Waited(), win.Lost())
	}
}

// An agent's rolling windows: each cut covers the counters' growth from
// the last read of the window before, and its own sleepers only.
func TestWatcherCut(t *testing.T) {
	now := uint64(0)
	w := NewWatcher(&Status{Enabled: 1, BacklogLimit: 8, BacklogWaitTimeActual: 10, Lost: 1}, func() uint64 { now++; return now }, nil)
	w.look([]Sleeper{{PID: 1, TID: 1, Comm: "a", Syscall: "accept4"}})
	w.Record(&Status{Enabled: 1, BacklogLimit: 8, Backlog: 8, BacklogWaitTimeActual: 60, Lost: 3})
	first := w.Cut(250)
	if first.Waited() != 50 || first.Lost() != 2 || len(first.Sleepers) != 1 || first.HZ != 250 || first.End == nil {
		t.Fatalf("first window: waited %d lost %d sleepers %+v hz %d end %v", first.Waited(), first.Lost(), first.Sleepers, first.HZ, first.End)
	}
	// Nothing read since: no growth, no sleeper carried over.
	idle := w.Cut(250)
	if idle.Waited() != 0 || idle.Lost() != 0 || len(idle.Sleepers) != 0 || idle.Looks != 0 {
		t.Fatalf("idle window: %+v", idle)
	}
	// The full read was the first window's, not this one's.
	if full, of, _ := idle.FullSamples(); full != 0 || of != 0 {
		t.Errorf("idle window: %d full reads of %d, want none", full, of)
	}
	w.Record(&Status{Enabled: 1, BacklogLimit: 8, BacklogWaitTimeActual: 65, Lost: 3})
	if next := w.Cut(250); next.Waited() != 5 || next.Start == nil || next.Start.Status.BacklogWaitTimeActual != 60 {
		t.Errorf("third window: waited %d from %+v, want 5 from the last read of the first", next.Waited(), next.Start)
	}
	// A counter reset between reads counts from zero.
	w.Record(&Status{Enabled: 1, BacklogLimit: 8, BacklogWaitTimeActual: 4, Lost: 3})
	if reset := w.Cut(250); reset.Waited() != 4 {
		t.Errorf("after a reset: waited %d, want 4", reset.Waited())
	}
}

// The ticks at which a watcher wakes, from the first, over two seconds:
// every tick but a lazy one's that finds nothing, which wakes only to read
// the status (every second here) or, blind, to look (every second too).
func TestSleepTicks(t *testing.T) {
	wakes := func(statusEvery int, lazy, blind, stalling bool) []int {
		var at []int
		for tick := 1; tick <= 2*blindEvery; tick += sleepTicks(tick, statusEvery, lazy, blind, stalling) {
			at = append(at, tick)
		}
		return at
	}
	every := []int{1, 2, 3, 4, 5, 6, 7, 8}
	for _, c := range []struct {
		name                  string
		statusEvery           int
		lazy, blind, stalling bool
		want                  []int
	}{
		{"the doctor's", 4, false, false, false, every},
		{"lazy, stalling", 4, true, false, true, every},
		{"lazy, nothing stalls", 4, true, false, false, []int{1, 4, 8}},
		{"lazy, status every tick", 1, true, false, false, every},
		{"lazy, blind", 4, true, true, false, []int{1, 4, 8}},
		{"lazy, blind, status every other tick", 2, true, true, true, []int{1, 2, 4, 6, 8}},
	} {
		if got := wakes(c.statusEvery, c.lazy, c.blind, c.stalling); !slices.Equal(got, c.want) {
			t.Errorf("%s: wakes at ticks %v, want %v", c.name, got, c.want)
		}
	}
}
