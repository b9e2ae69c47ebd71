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
