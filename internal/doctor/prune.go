package doctor

import (
	"sync"

	"github.com/sysray/sysray/internal/stat"
)

// The kernel keeps the live doctor's exact counts in a table of 32,768
// cells, one per process, cgroup and syscall (bpf/maps.h), and a cell
// stays until the probe goes. On a host whose processes come and go that
// fills: go build -a made 4,000, 10,381 and 14,912 cells at 5, 10 and 15 s
// (stop 33), and a longer build runs out, its later processes' calls
// uncounted; every read of the table (four a second) also grows with the
// dead. So the cells of a process that ended leave the kernel once a read
// has taken their last counts, and those counts are kept here for the
// report's totals.

// settleNS is how long after a process's end its cells are let go. The
// end is reported by the last thread to leave (group_dead); a sibling
// that left a moment before may still be adding its pending counts
// (bpf/lifecycle.h). A count that lands after the cells went makes a
// cell of its own, which the series and the totals take as they take
// any: waiting only spares that churn. One read's interval covers it.
const settleNS = uint64(seriesEvery)

// pruner decides which cells of the kernel's table may go and keeps the
// counts of those that went. Its methods may be called from the event
// consumer and the series reader at once.
type pruner struct {
	mu    sync.Mutex
	ended map[uint32]uint64 // pid → when its end was seen (monotonic ns)
	gone  map[stat.Key]*stat.Cell
}

func newPruner() *pruner {
	return &pruner{ended: map[uint32]uint64{}, gone: map[stat.Key]*stat.Cell{}}
}

// end notes that process pid ended (its last thread exited), seen at at.
func (p *pruner) end(pid uint32, at uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended[pid] = at
}

// due returns those of cells, read at at, whose processes ended at least
// settleNS before: their counts are final. Their processes are then no
// longer ended here: a pid used again is a process of its own.
//
// A pid comes back only once the kernel has handed out every other one
// (pid_max, 32,768 here) since: at 2,000 processes a second that is 16 s,
// far beyond settleNS. Counts of such a newcomer made before its
// predecessor's cells went are counted as the predecessor's, as the
// kernel's table itself would count them.
func (p *pruner) due(cells []stat.Cell, at uint64) []stat.Cell {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ended) == 0 {
		return nil
	}
	pids := map[uint32]bool{}
	for pid, t := range p.ended {
		if at >= t+settleNS {
			pids[pid] = true
			delete(p.ended, pid)
		}
	}
	var out []stat.Cell
	for i := range cells {
		if pids[cells[i].PID] {
			out = append(out, cells[i])
		}
	}
	return out
}

// keep holds the last counts of cells that left the kernel.
func (p *pruner) keep(cells []stat.Cell) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range cells {
		c := cells[i]
		if k := p.gone[c.Key]; k != nil {
			k.Merge(&c)
		} else {
			p.gone[c.Key] = &c
		}
	}
}

// merge returns cells, as the kernel holds them now, with the counts of
// the cells that went added back: the run's whole counts.
func (p *pruner) merge(cells []stat.Cell) []stat.Cell {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.gone) == 0 {
		return cells
	}
	out := make([]stat.Cell, 0, len(cells)+len(p.gone))
	seen := make(map[stat.Key]bool, len(cells))
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
