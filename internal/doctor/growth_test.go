package doctor

import (
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// Untimed calls are no points of a growth fit: their 0 would halve the
// means of the bins where the calls came too fast for the budget.
func TestGrowthIgnoresUntimedCalls(t *testing.T) {
	evs := poolClones(400, func(i int) uint64 { return uint64(20000 + 1000*i) })
	for i := 201; i < 400; i += 2 {
		c := &evs[2*i+1].Syscall
		c.Latency, c.Approx = 0, true
	}
	f := byID(findings(evs), "latency-grows-with-count")
	if f == nil {
		t.Fatal("no latency-grows-with-count finding")
	}
	if s := f.Evidence["slope_ns_per_unit"].(float64); s < 950 || s > 1050 {
		t.Errorf("slope %.0f ns per thread, want 1000", s)
	}
	if n := f.Evidence["calls_timed_in_ticks"]; n != uint64(0) {
		t.Errorf("calls timed in ticks %v, want 0 (untimed calls are not tick-timed)", n)
	}
}

// A go build spawns its compilers with clone(CLONE_VM|CLONE_VFORK), which
// returns when the child execs: the child's time, which rose with the
// build's open files as the build got busier (R² 0.81 over 32 calls, a
// warning on ordinary work in CI). A spawn's wait is no kernel walk.
func TestGrowthSkipsVforkSpawns(t *testing.T) {
	const vfork = 0x100 | 0x4000 | 17 // CLONE_VM|CLONE_VFORK|SIGCHLD
	var evs []event.Event
	tm := uint64(1e9)
	for i := range 40 {
		for j := range 10 {
			tm += 1000
			evs = append(evs, sys(3, tm, nrOpenat, int64(10+10*i+j), 2000, ^uint64(99), 0x1000, 0))
		}
		tm += 100_000
		evs = append(evs, sys(3, tm, nrClone, int64(1000+i), uint64(100_000+100_000*i), vfork))
	}
	if f := byID(findings(evs), "latency-grows-with-count"); f != nil {
		t.Errorf("a vfork spawn's wait reported as growth: %s", f.Summary)
	}
	// The same latencies without CLONE_VFORK are a fork that grows.
	for i := range evs {
		if evs[i].Syscall.Nr == nrClone {
			evs[i].Syscall.Args[0] = 17
		}
	}
	if f := byID(findings(evs), "latency-grows-with-count"); f == nil {
		t.Error("no growth for the same forks without CLONE_VFORK")
	}
}

// Live, the doctor sees a fraction of the opens and closes (the failed,
// slow and sampled ones): their difference only climbs with time. Events
// that carry the kernel's mapping count come from that mode, and there an
// open-files dimension would turn any latency that rises over the run
// into "grows with open files".
func TestGrowthNoFdsWhenLive(t *testing.T) {
	build := func(live bool) []event.Event {
		var evs []event.Event
		tm := uint64(1e9)
		for i := range 400 {
			tm += 100_000
			o := sys(3, tm, nrOpenat, int64(10+i), uint64(20_000+2_000*i), ^uint64(99), 0x1000, 0)
			if live {
				o.Syscall.Maps = 40
			}
			evs = append(evs, o)
		}
		return evs
	}
	if f := byID(findings(build(true)), "latency-grows-with-count"); f != nil {
		t.Errorf("live: grows with %v: %s", f.Evidence["grows_with"], f.Title)
	}
	f := byID(findings(build(false)), "latency-grows-with-count")
	if f == nil || f.Evidence["grows_with"] != "open file descriptors" {
		t.Errorf("a capture's every open seen: %+v", f)
	}
}
