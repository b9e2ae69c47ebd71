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

// mergeAll runs evs (as one ring hands them over, as the kernel's records)
// and a drop report through a merger with the given cut,
// and returns what it emits.
func mergeAll(t *testing.T, cut uint64, evs []event.Event) []event.Event {
	t.Helper()
	var got []event.Event
	m := newMerger(1, func(e *event.Event) error {
		got = append(got, *e)
		return nil
	}, nil)
	m.cut.Store(cut)
	m.inject(event.Event{Kind: event.KindDrop, Time: 5000, Drop: event.Drop{Count: 2}})
	b := newBatch(0)
	for i := range evs {
		// As readRing reads a sample that fits: into the spare room.
		r := record(t, &evs[i])
		n := len(b.buf)
		if cap(b.buf)-n < len(r) {
			t.Fatal("no room in the batch")
		}
		b.add(b.buf[n:n+copy(b.buf[n:n+len(r)], r)], true)
	}
	b.sort()
	b.mark, b.done = math.MaxUint64, true
	if err := m.add(b); err != nil {
		t.Fatal(err)
	}
	if err := m.flush(); err != nil {
		t.Fatal(err)
	}
	if m.decodeErr != nil {
		t.Fatal(m.decodeErr)
	}
	return got
}

// record lays e out as the BPF programs write it (bpf/sysray.h), for the
// kinds and fields these tests use: syscalls with captured data and sleeps
// without stacks, and page faults.
func record(t testing.TB, e *event.Event) []byte {
	t.Helper()
	var b []byte
	switch e.Kind {
	case event.KindSyscall:
		b = make([]byte, sysSize)
		s := &e.Syscall
		le.PutUint64(b[48:], s.Latency)
		le.PutUint64(b[56:], uint64(s.Ret))
		for i, a := range s.Args {
			le.PutUint64(b[64+8*i:], a)
		}
		le.PutUint32(b[112:], s.Nr)
		le.PutUint32(b[124:], s.Maps)
		if s.Unfinished {
			b[1] |= fUnfinished
		}
		if s.Sleeps != nil {
			b[1] |= fSleeps
			sl := make([]byte, sleepsSize)
			le.PutUint32(sl[0:], math.MaxUint32) // no user stack
			le.PutUint32(sl[4:], uint32(len(s.Sleeps)))
			for i, z := range s.Sleeps {
				r := sl[8+i*sleepSize:]
				le.PutUint64(r[0:], z.Duration)
				le.PutUint32(r[8:], z.Count)
				le.PutUint32(r[12:], math.MaxUint32)
				le.PutUint32(r[24:], math.MaxUint32)
			}
			b = append(b, sl...)
		}
		slot := 0
		for arg, d := range s.Data {
			if d == nil {
				continue
			}
			if slot == 2 {
				t.Fatal("a record carries two captured arguments at most")
			}
			le.PutUint16(b[116+2*slot:], uint16(len(d)))
			b[120+slot] = byte(arg)
			b[123] |= 1 << slot
			b = append(b, d...)
			slot++
		}
	case event.KindPageFault:
		b = make([]byte, faultSize)
		le.PutUint64(b[48:], e.Fault.Addr)
		le.PutUint64(b[56:], e.Fault.IP)
		le.PutUint64(b[64:], e.Fault.Error)
		le.PutUint64(b[72:], e.Fault.SP)
	default:
		t.Fatalf("no record layout here for %s", e.Kind)
	}
	b[0] = byte(e.Kind)
	le.PutUint16(b[2:], uint16(len(b)))
	le.PutUint32(b[4:], e.CPU)
	le.PutUint32(b[8:], e.PID)
	le.PutUint32(b[12:], e.TID)
	le.PutUint64(b[16:], e.Time)
	le.PutUint64(b[24:], e.Cgroup)
	copy(b[32:48], e.Comm)
	return b
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

// sortByEnd orders a ring's records by end, equal ends in ring order;
// twice on one batch, as the pool reuses it.
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
				e.Kind, e.Syscall = event.KindPageFault, event.Syscall{}
			}
			b.add(record(t, &e), false)
		}
		want := slices.Clone(b.recs)
		slices.SortStableFunc(want, func(x, y rec) int { return cmp.Compare(x.end, y.end) })
		b.sortByEnd()
		got := make([]rec, len(b.recs))
		for j := range got {
			got[j] = *b.at(j)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: sortByEnd differs from a stable sort by end", round)
		}
		batchPool.Put(b)
	}
}

// A batch's records reach the consumer decoded, in the order of their ends,
// whatever the order the ring held them in.
func TestBatchDecodesInEndOrder(t *testing.T) {
	evs := []event.Event{
		{Kind: event.KindSyscall, Time: 100, CPU: 1, PID: 7, TID: 8, Cgroup: 3, Comm: "redis-server",
			Syscall: event.Syscall{Nr: 0, Args: [6]uint64{5, 0x7f00, 16}, Ret: 16, Latency: 900, Data: [6][]byte{1: []byte("GET k")}}},
		{Kind: event.KindPageFault, Time: 300, PID: 7, TID: 9, Comm: "io", Fault: event.Fault{Addr: 0x1000, IP: 0x4000, Error: 6}},
		{Kind: event.KindSyscall, Time: 200, PID: 7, TID: 9, Comm: "io", Syscall: event.Syscall{Nr: 1, Ret: -11, Latency: 50}},
	}
	got := mergeAll(t, 0, evs)
	want := []event.Event{got[0], evs[2], evs[1], evs[0]} // ends 250, 300, 1000
	if got[0].Kind != event.KindDrop || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

// A ring's batch as record sees it under redis: direct records in end
// order, interleaved with staged runs of 16 flushed late, whose ends fall
// a few dozen records back.
func BenchmarkSortByEnd(b *testing.B) {
	bt := newBatch(0)
	var t uint64
	for len(bt.recs) < batchLen {
		if len(bt.recs)%64 == 48 {
			start := t - 40*1000
			for k := range 16 {
				bt.recs = append(bt.recs, rec{end: start + uint64(k)*2000})
			}
			continue
		}
		t += 1000
		bt.recs = append(bt.recs, rec{end: t})
	}
	bt.recs = bt.recs[:batchLen]
	for b.Loop() {
		bt.sortByEnd()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/batchLen, "ns/event")
}
