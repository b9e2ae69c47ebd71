package doctor

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// Budgeted timing leaves most of a busy thread's calls untimed (latency 0,
// approx). The MAP_32BIT retries of map32 were 481 failing mmaps of ~3 µs
// each; summing the untimed ones as 0 said they took 50 µs in all.
func TestRetryTimeCountsUntimedCalls(t *testing.T) {
	var evs []event.Event
	tm := uint64(1e9)
	for i := range 100 {
		failed := sys(7, tm, nrMmap, enomem, 3000, 0, 1<<20, protRW, mapPrivAnon|map32bit, ^uint64(0), 0)
		retry := sys(7, tm+10000, nrMmap, 0x7f0000000000+int64(i)<<20, 2000, 0, 1<<20, protRW, mapPrivAnon, ^uint64(0), 0)
		if i%10 != 0 { // one call in ten read the clock
			failed.Syscall.Latency, failed.Syscall.Approx = 0, true
			retry.Syscall.Latency, retry.Syscall.Approx = 0, true
		}
		evs = append(evs, failed, retry)
		tm += 20000
	}
	f := byID(findings(evs), "failed-syscall-retry")
	if f == nil {
		t.Fatal("no failed-syscall-retry finding")
	}
	if got := f.Evidence["failed_ns"]; got != uint64(300_000) {
		t.Errorf("failed_ns %v, want 300000 (100 calls of 3 µs, 10 timed)", got)
	}
	if got := f.Evidence["retry_ns"]; got != uint64(200_000) {
		t.Errorf("retry_ns %v, want 200000", got)
	}
	if !strings.Contains(f.Summary, "about 300.0µs (10 of 100 timed by the clock)") {
		t.Errorf("summary: %s", f.Summary)
	}
}

// Untimed calls are no points of a growth fit: their 0 would halve the
// means of the bins where the calls came too fast for the budget.
func TestGrowthIgnoresUntimedCalls(t *testing.T) {
	var evs []event.Event
	tm := uint64(1e9)
	for i := range 400 {
		tm += 100000
		evs = append(evs, event.Event{Kind: event.KindFork, Time: tm, PID: 3, TID: 3, Comm: "pool",
			Proc: event.Proc{ChildPID: 3, ChildTID: uint32(100 + i), Thread: true}})
		c := sys(3, tm+1000, nrClone, int64(100+i), uint64(20000+1000*i))
		if i >= 200 && i%2 == 1 {
			c.Syscall.Latency, c.Syscall.Approx = 0, true
		}
		evs = append(evs, c)
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
