package doctor

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

const lockAddr = 0x4c3440

// ftRead is one thread's futex sums on one address over one 250 ms read.
type ftRead struct {
	tid                          uint32
	addr                         uint64
	slept, timeouts, wakes, woke uint64
	wokeOne                      uint64
	waitNS                       uint64
}

// futexRun makes reads events for process pid over reads intervals of
// 250 ms: each interval, every ftRead in per. A sampled syscall of each
// thread at the start and end spans the threads' lives.
func futexRun(pid uint32, reads int, per []ftRead) []event.Event {
	const tick = 250_000_000
	t0 := uint64(1e9)
	var evs []event.Event
	tids := map[uint32]bool{}
	for _, r := range per {
		if !tids[r.tid] {
			tids[r.tid] = true
			evs = append(evs, event.Event{Kind: event.KindSyscall, Time: t0, PID: pid, TID: r.tid, Comm: "app",
				Syscall: event.Syscall{Nr: 202, Latency: 1000}})
		}
	}
	for i := 1; i <= reads; i++ {
		for _, r := range per {
			e := event.Event{Kind: event.KindFutex, Time: t0 + uint64(i)*tick, PID: pid, TID: r.tid, Comm: "app",
				Futex: event.Futex{Addr: r.addr, Waits: r.slept, Slept: r.slept, Woken: r.slept - r.timeouts, Timeouts: r.timeouts,
					ByProc: r.slept - r.timeouts, WaitNS: r.waitNS, MaxNS: r.waitNS / max(r.slept, 1) * 2,
					Wakes: r.wakes, Woke: r.woke, WokeOne: r.wokeOne}}
			if i == 1 {
				e.Futex.WaitStack = []event.Frame{{Addr: 1, Name: "__lll_lock_wait+0x2d (app)"}, {Addr: 2, Name: "worker+0x40 (app)"}}
				e.Futex.WakeStack = []event.Frame{{Addr: 3, Name: "__lll_lock_wake+0x1a (app)"}, {Addr: 4, Name: "worker+0x61 (app)"}}
			}
			evs = append(evs, e)
		}
	}
	return evs
}

// convoy: n threads, each asleep waitMS of every 250 ms on lockAddr, 30
// times, each waking the next 30 times.
func convoy(n int, waitMS uint64) []ftRead {
	var per []ftRead
	for i := range n {
		per = append(per, ftRead{tid: uint32(101 + i), addr: lockAddr, slept: 30, wakes: 30, woke: 30, wokeOne: 30, waitNS: waitMS * ms})
	}
	return per
}

func TestLockConvoy(t *testing.T) {
	idlePool := func() []ftRead {
		// 8 workers parked on a condition variable, each woken once a
		// read by the main thread (tid 100), which never waits there.
		per := []ftRead{{tid: 100, addr: 0x5000, wakes: 8, woke: 8, wokeOne: 8}}
		for i := range 8 {
			per = append(per, ftRead{tid: uint32(101 + i), addr: 0x5000, slept: 1, waitNS: 245 * ms})
		}
		return per
	}
	tests := []struct {
		name  string
		evs   []event.Event
		sev   Severity
		words []string // nil: no finding
	}{
		{"8 threads handing a mutex on", futexRun(7, 8, convoy(8, 170)), Warning,
			[]string{"8 threads of", "0x4c3440", "68% of their time", "__lll_lock_wait (app) ← worker (app)", "__lll_lock_wake (app)"}},
		{"2 threads taking turns", futexRun(7, 8, convoy(2, 120)), Warning, []string{"2 threads of"}},
		{"a convoy at 15% of the threads' time is info", futexRun(7, 8, convoy(8, 37)), Info, []string{"15% of their time"}},
		{"a convoy at 4% is not reported", futexRun(7, 8, convoy(8, 10)), 0, nil},
		{"an idle pool on a condition variable", futexRun(7, 8, idlePool()), 0, nil},
		{"one thread parked per address (a Go runtime's Ms)", futexRun(7, 8, []ftRead{
			{tid: 101, addr: 0x1000, slept: 2, waitNS: 240 * ms}, {tid: 102, addr: 0x2000, slept: 2, waitNS: 240 * ms, wakes: 2, woke: 2, wokeOne: 2},
			{tid: 103, addr: 0x3000, slept: 2, waitNS: 240 * ms, wakes: 2, woke: 2, wokeOne: 2}}), 0, nil},
		{"timed waits that time out (a JVM's parked timers)", futexRun(7, 8, []ftRead{
			{tid: 101, addr: lockAddr, slept: 25, timeouts: 24, waitNS: 240 * ms, wakes: 1, woke: 1, wokeOne: 1},
			{tid: 102, addr: lockAddr, slept: 25, timeouts: 24, waitNS: 240 * ms, wakes: 1, woke: 1, wokeOne: 1}}), 0, nil},
		{"a barrier: every wake wakes all", futexRun(7, 8, []ftRead{
			{tid: 101, addr: lockAddr, slept: 30, waitNS: 200 * ms, wakes: 10, woke: 30},
			{tid: 102, addr: lockAddr, slept: 30, waitNS: 200 * ms, wakes: 10, woke: 30},
			{tid: 103, addr: lockAddr, slept: 30, waitNS: 200 * ms, wakes: 10, woke: 30}}), 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := findings(tc.evs)
			f := byID(fs, LockConvoy)
			if tc.words == nil {
				if f != nil {
					t.Fatalf("want no lock-convoy, got %s: %s", f.Title, f.Summary)
				}
				return
			}
			if f == nil {
				t.Fatalf("want a lock-convoy finding, got %v", fs)
			}
			if f.Severity != tc.sev {
				t.Errorf("severity %v, want %v", f.Severity, tc.sev)
			}
			text := f.Title + " " + f.Summary
			for _, w := range tc.words {
				if !strings.Contains(text, w) {
					t.Errorf("missing %q in %s", w, text)
				}
			}
		})
	}
}

// The counts the finding states are the sums of the events, exactly.
func TestLockConvoyEvidence(t *testing.T) {
	f := byID(findings(futexRun(7, 8, convoy(8, 170))), LockConvoy)
	if f == nil {
		t.Fatal("no finding")
	}
	ev := f.Evidence
	want := map[string]any{"threads_waiting": 8, "waits_slept": uint64(8 * 8 * 30), "waits_woken": uint64(8 * 8 * 30),
		"hand_offs": uint64(8 * 8 * 30), "wait_ns": uint64(8 * 8 * 170 * ms), "address": "0x4c3440", "threads_handing_on": 8}
	for k, v := range want {
		if ev[k] != v {
			t.Errorf("%s = %v (%T), want %v", k, ev[k], ev[k], v)
		}
	}
	if f.Key != "lock-convoy:app|__lll_lock_wait (app);worker (app)" {
		t.Errorf("key %q", f.Key)
	}
}

// Two processes, each with its own convoy on the same address (a static
// binary's lock at the same place): two findings, one per process.
func TestLockConvoyPerProcess(t *testing.T) {
	evs := append(futexRun(7, 8, convoy(4, 170)), futexRun(8, 8, convoy(4, 170))...)
	for i := range evs[len(evs)/2:] {
		e := &evs[len(evs)/2+i]
		e.TID += 100
	}
	n := 0
	for _, f := range findings(evs) {
		if f.ID == LockConvoy {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d lock-convoy findings, want 2", n)
	}
}

// Under the share, a lock handed on is the near miss, with its measure.
func TestLockConvoyNear(t *testing.T) {
	r := report(futexRun(7, 8, convoy(8, 23)))
	n := nearByID(r, LockConvoy)
	if n == nil {
		t.Fatalf("no near miss: %+v", r.Near)
	}
	if !strings.Contains(n.Short, "asleep 9.2%") || n.Closeness < 0.9 {
		t.Errorf("near %+v", n)
	}
}

// A forgotten process takes its threads' births and exits and its name
// with it: an exec storm must not grow the detector (TestExecStormForgetsEndedProcesses).
func TestLockConvoyForgets(t *testing.T) {
	c := newLockConvoy()
	for _, e := range []event.Event{
		{Kind: event.KindFork, Time: 1, PID: 10, TID: 10, Proc: event.Proc{Thread: true, ChildTID: 11}},
		sys(10, 2, nrOpenat, 3, 1000),
		{Kind: event.KindExit, Time: 3, PID: 10, TID: 11},
		{Kind: event.KindExit, Time: 4, PID: 10, TID: 10, Proc: event.Proc{GroupDead: true}},
	} {
		c.Observe(&e)
	}
	if len(c.born) != 1 || len(c.ended) != 2 || len(c.comms) != 1 {
		t.Fatalf("before: %d births, %d exits, %d names; want 1, 2, 1", len(c.born), len(c.ended), len(c.comms))
	}
	c.forget(map[uint32]bool{10: true}, nil)
	if len(c.born) != 0 || len(c.ended) != 0 || len(c.comms) != 0 {
		t.Errorf("after forgetting pid 10: %d births, %d exits, %d names kept", len(c.born), len(c.ended), len(c.comms))
	}
}
