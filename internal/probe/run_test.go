package probe

import (
	"cmp"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// mergeAll runs evs (in end order, as one ring hands them over) and a drop
// report through a merger with the given cut, and returns what it emits.
func mergeAll(t *testing.T, cut uint64, evs []event.Event) []event.Event {
	t.Helper()
	var got []event.Event
	m := newMerger(1, func(e *event.Event) error {
		got = append(got, *e)
		return nil
	})
	m.cut.Store(cut)
	m.inject(event.Event{Kind: event.KindDrop, Time: 5000, Drop: event.Drop{Count: 2}})
	b := newBatch(0)
	b.evs = append(b.evs, evs...)
	b.mark, b.done = math.MaxUint64, true
	if err := m.add(b); err != nil {
		t.Fatal(err)
	}
	if err := m.flush(); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestCutAtStop(t *testing.T) {
	call := func(entry, latency uint64, ret int64) event.Event {
		return event.Event{Kind: event.KindSyscall, Time: entry, TID: 7, Syscall: event.Syscall{
			Nr: 230, Args: [6]uint64{1, 2, 3}, Ret: ret, Latency: latency, Maps: 9,
			Data:   [6][]byte{2: []byte("x")},
			Sleeps: []event.Sleep{{Duration: latency / 2, Count: 1}},
		}}
	}
	before := call(100, 200, 0)                                                   // ends at 300
	straddling := call(900, 150, -4)                                              // ends at 1050: in flight at the cut
	after := call(1052, 8, 0)                                                     // begins after the cut
	fault := event.Event{Kind: event.KindPageFault, Time: 1100, TID: 7}           // after the cut
	inFlight := call(950, 4000, 0)                                                // the iterator's record, emitted at 4950
	inFlight.Syscall = event.Syscall{Nr: 35, Latency: 4000, Unfinished: true}     // as the kernel sends it
	lateInFlight := call(1200, 3000, 0)                                           // began after the cut
	lateInFlight.Syscall = event.Syscall{Nr: 35, Latency: 3000, Unfinished: true} // likewise
	evs := []event.Event{before, straddling, after, fault, lateInFlight, inFlight}

	got := mergeAll(t, 1000, evs)
	want := []event.Event{
		{Kind: event.KindDrop, Time: 5000, Drop: event.Drop{Count: 2}}, // losses are reported whenever they happened
		before,
		{Kind: event.KindSyscall, Time: 900, TID: 7, Syscall: event.Syscall{Nr: 230, Args: [6]uint64{1, 2, 3}, Latency: 100, Unfinished: true}},
		{Kind: event.KindSyscall, Time: 950, TID: 7, Syscall: event.Syscall{Nr: 35, Latency: 50, Unfinished: true}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with the cut at 1000:\n got %+v\nwant %+v", got, want)
	}

	// Until the cut is taken, everything passes untouched.
	evs = []event.Event{call(100, 200, 0), call(900, 150, -4), call(1052, 8, 0)}
	got = mergeAll(t, 0, evs)
	if len(got) != 4 || !reflect.DeepEqual(got[1:], evs) {
		t.Errorf("without a cut:\n got %+v\nwant the drop and %+v", got, evs)
	}
}

// sortByEnd orders a ring's events by end, equal ends in ring order, and
// leaves each event whole; twice on one batch, as the pool reuses it.
func TestSortByEnd(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// Rounds 0 and 1 are shuffled (past the insertion sort's budget);
	// rounds 2 and 3 are nearly in order, with ties, as a ring's batch is.
	for round := 0; round < 4; round++ {
		b := newBatch(0)
		for i := range 3000 {
			e := event.Event{Kind: event.KindSyscall, TID: uint32(i), Time: uint64(rng.IntN(500)) * 10}
			if round >= 2 {
				e.Time = uint64(i/3+rng.IntN(20)) * 10
			}
			e.Syscall.Latency = uint64(rng.IntN(3)) * 5
			if i%7 == 0 {
				e.Kind, e.Syscall = event.KindExit, event.Syscall{}
			}
			b.evs = append(b.evs, e)
		}
		want := slices.Clone(b.evs)
		slices.SortStableFunc(want, func(x, y event.Event) int { return cmp.Compare(x.End(), y.End()) })
		b.sortByEnd()
		got := make([]event.Event, len(b.evs))
		for j := range got {
			got[j] = *b.at(j)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: sortByEnd differs from a stable sort by end", round)
		}
		batchPool.Put(b)
	}
}

// A ring's batch as record sees it under redis: direct records in end
// order, interleaved with staged runs of 16 flushed late, whose ends fall
// a few dozen records back.
func BenchmarkSortByEnd(b *testing.B) {
	bt := newBatch(0)
	var t uint64
	for len(bt.evs) < batchLen {
		if len(bt.evs)%64 == 48 {
			start := t - 40*1000
			for k := range 16 {
				bt.evs = append(bt.evs, event.Event{Kind: event.KindSyscall, Time: start + uint64(k)*2000})
			}
			continue
		}
		t += 1000
		bt.evs = append(bt.evs, event.Event{Kind: event.KindSyscall, Time: t})
	}
	bt.evs = bt.evs[:batchLen]
	for b.Loop() {
		bt.sortByEnd()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/batchLen, "ns/event")
}
