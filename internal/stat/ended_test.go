package stat

import (
	"testing"
)

const settle = 250e6

func pcell(pid, nr uint32, count uint64, errnos map[int]uint64) Cell {
	c := Cell{Key: Key{PID: pid, Nr: nr, Cgroup: 1}, Count: count, Total: 100 * count, Timed: count, Errnos: errnos}
	c.Hist.Add(100)
	for _, n := range errnos {
		c.Errors += n
	}
	return c
}

// Only the cells of processes that ended settle before the read are
// due, once each; the living keep theirs.
func TestEndedDue(t *testing.T) {
	pr := NewEnded(settle)
	pr.End(6, 1000)
	cells := []Cell{pcell(5, 0, 10, nil), pcell(6, 0, 4, nil), pcell(6, 1, 2, nil)}
	if due, _ := pr.Due(cells, 1000+settle-1); len(due) != 0 {
		t.Fatalf("due before the end settled: %v", due)
	}
	due, pids := pr.Due(cells, 1000+settle)
	if len(due) != 2 || due[0].PID != 6 || due[1].PID != 6 || len(pids) != 1 || !pids[6] {
		t.Fatalf("due = %v of %v, want pid 6's two cells", due, pids)
	}
	if again, _ := pr.Due(cells, 1000+2*settle); len(again) != 0 {
		t.Fatalf("due twice: %v", again)
	}
	var none *Ended
	if due, _ := none.Due(cells, 1<<40); due != nil {
		t.Fatalf("a nil pruner let cells go: %v", due)
	}
}

// The totals are the kernel's cells plus those that went, a key made
// anew after its cell went adding to it.
func TestEndedMerge(t *testing.T) {
	pr := NewEnded(settle)
	pr.Keep([]Cell{pcell(6, 0, 4, map[int]uint64{9: 1}), pcell(7, 3, 5, nil)})
	pr.Keep([]Cell{pcell(6, 0, 1, map[int]uint64{9: 1, 2: 1})}) // the key went twice
	now := []Cell{pcell(5, 0, 10, nil), pcell(6, 0, 2, nil)}
	got := map[Key]Cell{}
	for _, c := range pr.Merge(now) {
		if _, dup := got[c.Key]; dup {
			t.Fatalf("key %v twice", c.Key)
		}
		got[c.Key] = c
	}
	if len(got) != 3 {
		t.Fatalf("%d cells, want 3: %v", len(got), got)
	}
	six := got[Key{PID: 6, Nr: 0, Cgroup: 1}]
	if six.Count != 7 || six.Timed != 7 || six.Total != 700 || six.Errors != 3 || six.Errnos[9] != 2 || six.Errnos[2] != 1 {
		t.Errorf("pid 6: %+v, want 7 calls, 3 errors (errno 9 twice, 2 once)", six)
	}
	if n := six.Hist.Quantile(0.5, six.Max); n == 0 || sumHist(&six.Hist) != 3 {
		t.Errorf("pid 6's histogram holds %d, want the 3 of its parts", sumHist(&six.Hist))
	}
	if got[Key{PID: 7, Nr: 3, Cgroup: 1}].Count != 5 || got[Key{PID: 5, Nr: 0, Cgroup: 1}].Count != 10 {
		t.Errorf("cells lost in the merge: %v", got)
	}
	if now[1].Count != 2 || now[1].Errnos != nil {
		t.Errorf("merge changed the kernel's cells: %+v", now[1])
	}
}

func sumHist(h *Hist) uint64 {
	var n uint64
	for _, v := range h {
		n += v
	}
	return n
}

// Past KeptMax cells, an ended process's counts join its syscall's and
// cgroup's under pid 0: totals whole, memory bounded.
func TestEndedKeepsBounded(t *testing.T) {
	pr := NewEnded(settle)
	var cells []Cell
	for pid := uint32(1); pid <= KeptMax+10; pid++ {
		cells = append(cells, pcell(pid, 7, 2, nil))
	}
	pr.Keep(cells)
	pr.Keep([]Cell{pcell(1, 7, 1, nil)}) // a key held apart stays apart
	if len(pr.gone) != KeptMax+1 {
		t.Fatalf("%d cells kept, want %d apart and one sum", len(pr.gone), KeptMax)
	}
	var total, folded uint64
	for _, c := range pr.Merge(nil) {
		total += c.Count
		if c.PID == 0 {
			folded = c.Count
		}
	}
	if total != 2*(KeptMax+10)+1 || folded != 20 || pr.gone[Key{PID: 1, Nr: 7, Cgroup: 1}].Count != 3 {
		t.Errorf("total %d, %d under pid 0: want %d and 20", total, folded, 2*(KeptMax+10)+1)
	}
}
