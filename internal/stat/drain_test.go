package stat

import (
	"errors"
	"testing"
	"time"
)

// fakeTable is a kernel table: cells by key, deleted when forgotten.
type fakeTable struct {
	cells map[Key]Cell
	reads int
}

func (f *fakeTable) Stats() ([]Cell, Lost, error) {
	f.reads++
	out := make([]Cell, 0, len(f.cells))
	for _, c := range f.cells {
		out = append(out, c)
	}
	return out, Lost{}, nil
}

func (f *fakeTable) ForgetCells(cells []Cell) ([]Cell, error) {
	var gone []Cell
	for _, c := range cells {
		if _, ok := f.cells[c.Key]; ok {
			delete(f.cells, c.Key)
			gone = append(gone, c)
		}
	}
	return gone, nil
}

func (f *fakeTable) add(c Cell) {
	if f.cells == nil {
		f.cells = map[Key]Cell{}
	}
	if old, ok := f.cells[c.Key]; ok {
		c.Merge(&old)
	}
	f.cells[c.Key] = c
}

func sum(cells []Cell) (n uint64) {
	for _, c := range cells {
		n += c.Count
	}
	return n
}

// An ended process's cells leave the kernel once a read began the settle
// time after its end; kept, the run's totals still hold them, and a call
// under the same key afterwards adds to them.
func TestDrainKeeps(t *testing.T) {
	var now uint64 = 1000
	tab := &fakeTable{}
	tab.add(pcell(5, 0, 10, nil))
	tab.add(pcell(6, 0, 4, nil))
	d := NewDrain(settle, true, func() uint64 { return now })
	d.End(6, now)
	r, err := d.Read(tab)
	if err != nil || len(r.Gone) != 0 || len(tab.cells) != 2 || r.At != now {
		t.Fatalf("read before the end settled: gone %v, %d cells left, at %d, err %v", r.Gone, len(tab.cells), r.At, err)
	}
	now += settle
	r, _ = d.Read(tab)
	if len(r.Gone) != 1 || r.Gone[0].PID != 6 || len(r.Cells) != 2 || len(tab.cells) != 1 {
		t.Fatalf("gone %v, read %d cells, %d left; want pid 6's cell gone after being read", r.Gone, len(r.Cells), len(tab.cells))
	}
	tab.add(pcell(6, 0, 1, nil)) // the key used again
	last, whole, err := d.Last(tab)
	if err != nil || sum(last.Cells) != 11 || sum(whole) != 15 || len(whole) != 2 {
		t.Fatalf("last read %d calls, whole %d calls in %d cells, err %v; want 11 in the kernel, 15 in 2 cells", sum(last.Cells), sum(whole), len(whole), err)
	}
	if len(tab.cells) != 2 {
		t.Errorf("the last read let cells go: %d left", len(tab.cells))
	}
}

// Without keep (top, the agent), cells that went are not kept: the totals
// are the kernel's.
func TestDrainDrops(t *testing.T) {
	now := uint64(1)
	tab := &fakeTable{}
	tab.add(pcell(6, 0, 4, nil))
	d := NewDrain(settle, false, func() uint64 { return now })
	d.End(6, now)
	now += settle
	if r, _ := d.Read(tab); len(r.Gone) != 1 || len(tab.cells) != 0 {
		t.Fatalf("gone %v, %d left", r.Gone, len(tab.cells))
	}
	if _, whole, _ := d.Last(tab); len(whole) != 0 {
		t.Errorf("whole %v, want nothing kept", whole)
	}
}

// Run reads at once, then every tick, and not after stop.
func TestDrainRun(t *testing.T) {
	tab := &fakeTable{}
	d := NewDrain(settle, true, func() uint64 { return 0 })
	stop, done := make(chan struct{}), make(chan struct{})
	reads := make(chan Read, 100)
	go d.Run(tab, time.Hour, stop, done, func(r Read) { reads <- r })
	select {
	case <-reads:
	case <-time.After(5 * time.Second):
		t.Fatal("no read at once")
	}
	close(stop)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after stop")
	}
	if tab.reads != 1 {
		t.Errorf("%d reads in an hour's first tick, want 1", tab.reads)
	}
}

// partTable fails part way through a delete, as a batch delete can.
type partTable struct {
	fakeTable
	asked []Cell
}

func (p *partTable) ForgetCells(due []Cell) ([]Cell, error) {
	p.asked = due
	delete(p.cells, due[0].Key)
	return due[:1], errors.New("one cell stayed")
}

// A drain keeps what the kernel says went, even when a delete fails part
// way, and nothing else; the process is no longer ended.
func TestDrainKeepsWhatWent(t *testing.T) {
	tab := &partTable{}
	tab.add(pcell(5, 0, 10, nil))
	tab.add(pcell(6, 0, 4, nil))
	tab.add(pcell(6, 1, 2, nil))
	now := uint64(1000)
	d := NewDrain(settle, true, func() uint64 { return now })
	d.End(6, now)
	now += settle
	r, err := d.Read(tab)
	if err != nil || len(tab.asked) != 2 || len(r.Gone) != 1 || !r.Ended[6] || len(r.Ended) != 1 {
		t.Fatalf("asked to forget %v, gone %v, ended %v, err %v: want pid 6's two cells asked, one gone", tab.asked, r.Gone, r.Ended, err)
	}
	_, whole, _ := d.Last(tab)
	if sum(whole) != 16 {
		t.Errorf("whole %d calls, want the 16 made: what stayed in the kernel and what went, once each", sum(whole))
	}
	tab.asked = nil
	if r, _ := d.Read(tab); r.Gone != nil || tab.asked != nil || len(r.Ended) != 0 {
		t.Errorf("nothing due, yet asked %v, gone %v", tab.asked, r.Gone)
	}
}

// A pid that runs again before its end came due keeps its cells.
func TestDrainAlive(t *testing.T) {
	tab := &fakeTable{}
	tab.add(pcell(6, 0, 4, nil))
	now := uint64(1)
	d := NewDrain(settle, false, func() uint64 { return now })
	d.End(6, now)
	d.Alive(6)
	now += 2 * settle
	if r, _ := d.Read(tab); len(r.Gone) != 0 || len(tab.cells) != 1 {
		t.Errorf("a living pid's cells went: %v", r.Gone)
	}
}
