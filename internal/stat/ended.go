package stat

import (
	"sync"
	"time"
)

// The kernel keeps exact counts in a table of 32,768 cells, one per
// process, cgroup and syscall (bpf/maps.h), and a cell stays until the
// probe goes. On a host whose processes come and go that fills: go build
// -a made 4,000, 10,381 and 14,912 cells at 5, 10 and 15 s, and
// a longer build runs out, its later processes' calls uncounted; every
// read of the table also grows with the dead. So a reader that reads
// again and again (the live doctor, top) lets the cells of a process that
// ended leave the kernel once a read has taken their last counts, and
// keeps those counts if it needs the run's totals.

// Settle is how long after a process's end its cells may go (NewEnded).
// The race it waits out lasts microseconds; a quarter second is ample, and
// short enough that a table refilled by a fast churn of processes holds
// only the last second or so of them.
const Settle = uint64(250 * time.Millisecond)

// Ended decides which cells of the kernel's table may go, and keeps the
// counts of those that went. Its methods may be called from an event
// consumer and a reader at once.
type Ended struct {
	settle uint64
	mu     sync.Mutex
	ended  map[uint32]uint64 // pid → when its end was seen (monotonic ns)
	gone   map[Key]*Cell
}

// NewEnded returns an empty Ended that lets a process's cells go settle
// ns after its end. The end is reported by the last thread to leave
// (group_dead); a sibling that left a moment before may still be adding
// its pending counts (bpf/lifecycle.h). A count that lands after the
// cells went makes a cell of its own, which readers take as they take
// any: the wait only spares that churn. One read's interval covers it.
func NewEnded(settle uint64) *Ended {
	return &Ended{settle: settle, ended: map[uint32]uint64{}, gone: map[Key]*Cell{}}
}

// End notes that process pid ended (its last thread exited), seen at at.
// The first end noted counts: a reader that learns of ends by looking
// (the agent, from /proc) notes the same end at every look.
func (p *Ended) End(pid uint32, at uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.ended[pid]; !ok {
		p.ended[pid] = at
	}
}

// Due returns those of cells, whose read began at at, whose processes ended
// at least the settle time before, and those processes (with cells or
// without): their counts are final, and were before
// the read began, so the cells hold them whole. (Taken after a read, at
// would let a read slower than the settle time hand over a cell read before
// its process's last calls, which would then go uncounted with the cell.)
// Their processes are then no longer ended here: a pid used again is a
// process of its own.
//
// A pid comes back only once the kernel has handed out every other one
// (pid_max, 32,768 here) since: at 2,000 processes a second that is 16 s,
// far beyond the settle time. Counts of such a newcomer made before its
// predecessor's cells went are counted as the predecessor's, as the
// kernel's table itself would count them.
func (p *Ended) Due(cells []Cell, at uint64) (due []Cell, pids map[uint32]bool) {
	if p == nil {
		return nil, nil
	}
	pids = p.take(at)
	return cellsOf(cells, pids), pids
}

// take returns the processes ended at least the settle time before at,
// which are then no longer ended here.
func (p *Ended) take(at uint64) map[uint32]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ended) == 0 {
		return nil
	}
	pids := map[uint32]bool{}
	for pid, t := range p.ended {
		if at >= t+p.settle {
			pids[pid] = true
			delete(p.ended, pid)
		}
	}
	return pids
}

// Alive notes that pid is running again (a reused pid): an end noted
// before is no longer due.
func (p *Ended) Alive(pid uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.ended, pid)
}

// cellsOf returns those of cells of the processes in pids.
func cellsOf(cells []Cell, pids map[uint32]bool) []Cell {
	if len(pids) == 0 {
		return nil
	}
	var out []Cell
	for i := range cells {
		if pids[cells[i].PID] {
			out = append(out, cells[i])
		}
	}
	return out
}

// KeptMax is how many cells Keep holds apart, as many as the kernel's
// table (a cell is 1.3 KiB here, its histogram most of it: 43 MiB). Past
// that, a cell's counts are summed with those of every ended process's
// same syscall in the same cgroup, under pid 0 (no process makes a
// syscall as the idle task): the totals stay whole on a host that churns
// processes for hours, and memory stays bounded.
const KeptMax = 32768

// Keep holds the last counts of cells that left the kernel.
func (p *Ended) Keep(cells []Cell) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range cells {
		c := cells[i]
		if p.gone[c.Key] == nil && len(p.gone) >= KeptMax {
			c.PID = 0
		}
		if k := p.gone[c.Key]; k != nil {
			k.Merge(&c)
		} else {
			p.gone[c.Key] = &c
		}
	}
}

// Merge returns cells, as the kernel holds them now, with the counts of
// the cells that went added back: the run's whole counts.
func (p *Ended) Merge(cells []Cell) []Cell {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.gone) == 0 {
		return cells
	}
	out := make([]Cell, 0, len(cells)+len(p.gone))
	seen := make(map[Key]bool, len(cells))
	for i := range cells {
		c := cells[i]
		if g := p.gone[c.Key]; g != nil {
			c.Merge(g)
		}
		seen[c.Key] = true
		out = append(out, c)
	}
	for k, g := range p.gone {
		if !seen[k] {
			out = append(out, *g)
		}
	}
	return out
}
