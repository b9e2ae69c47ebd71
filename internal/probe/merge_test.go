package probe

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// emitOneByOne is the merger's order stated plainly: every record, the
// oldest head of all rings (the lowest ring first among equal ones), and
// nothing while a ring with nothing queued has a mark below it, unless all.
func emitOneByOne(m *merger, all bool) error {
	for {
		best := -1
		var bestKey uint64
		for i := range m.queues {
			if h := m.head(i); h != nil {
				if k := h.end; best < 0 || k < bestKey {
					best, bestKey = i, k
				}
			}
		}
		if best < 0 {
			return nil
		}
		if !all {
			for i := range m.queues {
				if i != best && len(m.queues[i]) == 0 && m.marks[i] < bestKey {
					return nil
				}
			}
		}
		b, r := m.queues[best][0], m.head(best)
		if err := decode(b.buf[r.off:r.off+r.len], &m.ev, &m.comms, m.stacks); err != nil {
			return err
		}
		if err := m.emit(&m.ev); err != nil {
			return err
		}
		m.pop(best)
	}
}

// The merger emits runs of one ring at a time, and in exactly the order
// of one record at a time: random rings of out-of-order batches, with
// ties across rings and marks that hold records back.
func TestMergerRunsKeepOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 200 {
		rings := 1 + rng.IntN(4)
		type step struct {
			ring int
			evs  []event.Event
			mark uint64
		}
		var steps []step
		clock := make([]uint64, rings)
		for range 3 + rng.IntN(20) {
			r := rng.IntN(rings)
			var evs []event.Event
			for range rng.IntN(30) {
				clock[r] += uint64(rng.IntN(4)) * 10
				evs = append(evs, event.Event{Kind: event.KindSyscall, CPU: uint32(r), TID: uint32(len(evs)),
					Time: clock[r] + uint64(rng.IntN(3))*10, Syscall: event.Syscall{Nr: 39, Latency: uint64(rng.IntN(3)) * 5}})
			}
			steps = append(steps, step{r, evs, clock[r] - min(clock[r], uint64(rng.IntN(40)))})
		}
		run := func(emitAll func(m *merger, all bool) error) []string {
			var got []string
			m := newMerger(rings, func(e *event.Event) error {
				got = append(got, fmt.Sprintf("%d/%d@%d", e.CPU, e.TID, e.End()))
				return nil
			}, nil)
			for _, s := range steps {
				b := newBatch(s.ring)
				for i := range s.evs {
					b.add(record(t, &s.evs[i]), false)
				}
				b.sort()
				b.mark = s.mark
				if b.mark > m.marks[b.ring] {
					m.marks[b.ring] = b.mark
				}
				if len(b.recs) > 0 {
					m.queues[b.ring] = append(m.queues[b.ring], b)
				}
				if err := emitAll(m, false); err != nil {
					t.Fatal(err)
				}
				got = append(got, "|")
			}
			if err := emitAll(m, true); err != nil {
				t.Fatal(err)
			}
			return got
		}
		want := run(emitOneByOne)
		got := run(func(m *merger, all bool) error { return m.emitReady(all) })
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: runs emitted\n%v\none by one\n%v", round, got, want)
		}
	}
}
