package doctor

import (
	"testing"

	"github.com/sysray/sysray/internal/stat"
)

func pcell(pid, nr uint32, count uint64, errnos map[int]uint64) stat.Cell {
	c := stat.Cell{Key: stat.Key{PID: pid, Nr: nr, Cgroup: 1}, Count: count, Total: 100 * count, Timed: count, Errnos: errnos}
	c.Hist.Add(100)
	for _, n := range errnos {
		c.Errors += n
	}
	return c
}

// Only the cells of processes that ended settleNS before the read are
// due, once each; the living keep theirs.
func TestPrunerDue(t *testing.T) {
	pr := newPruner()
	pr.end(6, 1000)
	cells := []stat.Cell{pcell(5, 0, 10, nil), pcell(6, 0, 4, nil), pcell(6, 1, 2, nil)}
	if due := pr.due(cells, 1000+settleNS-1); len(due) != 0 {
		t.Fatalf("due before the end settled: %v", due)
	}
	due := pr.due(cells, 1000+settleNS)
	if len(due) != 2 || due[0].PID != 6 || due[1].PID != 6 {
		t.Fatalf("due = %v, want pid 6's two cells", due)
	}
	if again := pr.due(cells, 1000+2*settleNS); len(again) != 0 {
		t.Fatalf("due twice: %v", again)
	}
	var none *pruner
	if due := none.due(cells, 1<<40); due != nil {
		t.Fatalf("a nil pruner let cells go: %v", due)
	}
}

// The totals are the kernel's cells plus those that went, a key made
// anew after its cell went adding to it.
func TestPrunerMerge(t *testing.T) {
	pr := newPruner()
	pr.keep([]stat.Cell{pcell(6, 0, 4, map[int]uint64{9: 1}), pcell(7, 3, 5, nil)})
	pr.keep([]stat.Cell{pcell(6, 0, 1, map[int]uint64{9: 1, 2: 1})}) // the key went twice
	now := []stat.Cell{pcell(5, 0, 10, nil), pcell(6, 0, 2, nil)}
	got := map[stat.Key]stat.Cell{}
	for _, c := range pr.merge(now) {
		if _, dup := got[c.Key]; dup {
			t.Fatalf("key %v twice", c.Key)
		}
		got[c.Key] = c
	}
	if len(got) != 3 {
		t.Fatalf("%d cells, want 3: %v", len(got), got)
	}
	six := got[stat.Key{PID: 6, Nr: 0, Cgroup: 1}]
	if six.Count != 7 || six.Timed != 7 || six.Total != 700 || six.Errors != 3 || six.Errnos[9] != 2 || six.Errnos[2] != 1 {
		t.Errorf("pid 6: %+v, want 7 calls, 3 errors (errno 9 twice, 2 once)", six)
	}
	if n := six.Hist.Quantile(0.5, six.Max); n == 0 || sumHist(&six.Hist) != 3 {
		t.Errorf("pid 6's histogram holds %d, want the 3 of its parts", sumHist(&six.Hist))
	}
	if got[stat.Key{PID: 7, Nr: 3, Cgroup: 1}].Count != 5 || got[stat.Key{PID: 5, Nr: 0, Cgroup: 1}].Count != 10 {
		t.Errorf("cells lost in the merge: %v", got)
	}
	if now[1].Count != 2 || now[1].Errnos != nil {
		t.Errorf("merge changed the kernel's cells: %+v", now[1])
	}
}

func sumHist(h *stat.Hist) uint64 {
	var n uint64
	for _, v := range h {
		n += v
	}
	return n
}

// A key whose cell went counts from zero in the next window, not from
// its old total.
func TestSeriesRestart(t *testing.T) {
	s := NewSeries()
	s.Add(0, []stat.Cell{pcell(6, 0, 10, nil)})
	gone := []stat.Cell{pcell(6, 0, 12, nil)}
	s.Add(1e6, gone)
	s.restart(gone)
	s.Add(2e6, []stat.Cell{pcell(6, 0, 3, nil)})
	if len(s.windows) != 2 {
		t.Fatalf("%d windows, want 2", len(s.windows))
	}
	for i, want := range []uint64{2, 3} {
		if got := s.windows[i].byNr[0][6]; got == nil || got.calls != want {
			t.Errorf("window %d: %+v, want %d calls", i, got, want)
		}
	}
}
