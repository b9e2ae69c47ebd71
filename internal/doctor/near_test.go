package doctor

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

func report(evs []event.Event) *Report {
	d := New(host, nil)
	for i := range evs {
		d.Observe(&evs[i])
	}
	return checked(d.Report())
}

func nearByID(r *Report, id ID) *Near {
	for i := range r.Near {
		if r.Near[i].ID == id {
			return &r.Near[i]
		}
	}
	return nil
}

// Ten forks that grow as the thread count does are too few for the growth
// rule (12), and 3 ms each too little (50 ms in all): the near miss says
// it saw the growth and which floor it stopped at.
func TestNearGrowthTooSmall(t *testing.T) {
	var evs []event.Event
	tm := uint64(1e9)
	for i := range 10 {
		// Five threads between calls: the state spans the 32 units a
		// fit needs.
		for j := range 5 {
			tm += 1000
			evs = append(evs, event.Event{Kind: event.KindFork, Time: tm, PID: 3, TID: 3, Comm: "pool",
				Proc: event.Proc{ChildPID: 3, ChildTID: uint32(100 + 5*i + j), Thread: true}})
		}
		tm += 100_000
		evs = append(evs, sys(3, tm, nrClone, int64(1000+i), uint64(300_000*(i+1))))
	}
	r := report(evs)
	if f := byID(r.Findings, "latency-grows-with-count"); f != nil {
		t.Fatalf("a finding from 10 calls: %s", f.Title)
	}
	n := nearByID(r, "latency-grows-with-count")
	if n == nil {
		t.Fatalf("no near miss; near: %+v", r.Near)
	}
	// 16.5 ms in all of the 50 the rule needs; 10 calls of 12.
	if n.Closeness != 0.33 {
		t.Errorf("closeness %v, want 0.33 (16.5 ms of 50)", n.Closeness)
	}
	for _, w := range []string{"threads", "10 calls", "12 calls", "16.50ms"} {
		if !strings.Contains(n.Short+n.Subject, w) {
			t.Errorf("near miss does not say %q: %s / %s", w, n.Subject, n.Short)
		}
	}
}

// Forty forks in no order with the state: no line, and the near miss
// gives the R² the bins reached and the R² they needed.
func TestNearGrowthNoLine(t *testing.T) {
	order := []uint64{7, 3, 9, 1, 8, 2, 10, 4, 6, 5}
	r := report(poolClones(40, func(i int) uint64 { return order[i%10] * 2_000_000 }))
	if f := byID(r.Findings, "latency-grows-with-count"); f != nil {
		t.Fatalf("growth from calls in no order: %s", f.Title)
	}
	n := nearByID(r, "latency-grows-with-count")
	if n == nil {
		t.Fatal("no near miss")
	}
	if !strings.Contains(n.Short, "20 bins need 0.70") || n.Closeness >= 1 {
		t.Errorf("near miss %.3f: %s", n.Closeness, n.Short)
	}
}

// A 4 ms openat is 40% of the way to slow-syscall; a 40 ms futex wait
// (a wait by design) is no near miss at all.
func TestNearSlow(t *testing.T) {
	nrFutex, _ := event.SyscallByName(event.ArchAMD64, "futex")
	r := report([]event.Event{sys(5, 1e9, nrOpenat, 3, 4_000_000), sys(5, 2e9, nrFutex, 0, 40_000_000), sys(5, 3e9, nrOpenat, 3, 1_000_000)})
	n := nearByID(r, "slow-syscall")
	if n == nil {
		t.Fatalf("no near miss; near: %+v", r.Near)
	}
	if n.Closeness != 0.4 || !strings.Contains(n.Subject, "openat") || !strings.Contains(n.Short, "4.00ms") {
		t.Errorf("near miss %v: %s / %s", n.Closeness, n.Subject, n.Short)
	}
}

// 2,500 ENOENT failures, all of one process's calls of the syscall, are a
// quarter of an error storm.
func TestNearErrorStorm(t *testing.T) {
	var evs []event.Event
	for i := range 2500 {
		evs = append(evs, sys(7, uint64(1e9+i*1000), nrOpenat, -2, 1000))
	}
	r := report(evs)
	n := nearByID(r, "error-storm")
	if n == nil || n.Closeness != 0.25 || !strings.Contains(n.Subject, "ENOENT") {
		t.Fatalf("near miss %+v", n)
	}
}

// A detector that reported something has no near miss: the question is
// only asked of the silent ones.
func TestNearOnlyWhenSilent(t *testing.T) {
	var evs []event.Event
	for i := range 12000 {
		evs = append(evs, sys(7, uint64(1e9+i*1000), nrOpenat, -2, 1000))
	}
	evs = append(evs, sys(8, 2e9, nrOpenat, -13, 1000)) // one EACCES: far from a storm
	r := report(evs)
	if byID(r.Findings, "error-storm") == nil {
		t.Fatal("no error-storm from 12,000 failures")
	}
	if n := nearByID(r, "error-storm"); n != nil {
		t.Errorf("a near miss beside a finding: %+v", n)
	}
}

// Five MAP_32BIT stacks that fail and are asked for again without the
// flag are a quarter of the retries the rule wants (20).
func TestNearRetry(t *testing.T) {
	var evs []event.Event
	tm := uint64(1e9)
	for i := range 5 {
		tm += 10000
		evs = append(evs, sys(7, tm, nrMmap, enomem, 3000, 0, 1<<20, protRW, mapPrivAnon|map32bit, ^uint64(0), 0))
		tm += 10000
		evs = append(evs, sys(7, tm, nrMmap, 0x7f0000000000+int64(i)<<20, 2000, 0, 1<<20, protRW, mapPrivAnon, ^uint64(0), 0))
	}
	r := report(evs)
	n := nearByID(r, "failed-syscall-retry")
	if n == nil || n.Closeness != 0.25 || !strings.Contains(n.Subject, "without MAP_32BIT") || !strings.Contains(n.Short, "5 such retries") {
		t.Fatalf("near miss %+v", n)
	}
}
