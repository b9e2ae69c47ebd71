package doctor

import (
	"sync"

	"github.com/sysray/sysray/internal/stat"
)

// Series turns the kernel's cumulative syscall counts, read at intervals
// during a live run, into windows: per syscall, how many calls ended in
// each interval, the time they took, and how many processes made them.
// Sampled events cannot show how many callers were inside a syscall
// together; these windows can, at no cost to the traced programs.
type Series struct {
	mu      sync.Mutex
	prev    map[stat.Key]cum
	lastAt  uint64
	windows []window
}

type cum struct{ count, total, runq uint64 }

type window struct {
	dur  uint64 // ns
	byNr map[uint32]*winStat
}

type winStat struct {
	calls, total uint64
	runq         uint64 // of total, ns preempted waiting for a CPU
	callers      int    // processes with calls ending in the window
}

// NewSeries returns an empty series.
func NewSeries() *Series { return &Series{} }

// Add takes the counts read at at (monotonic ns). The first call only sets
// the starting point.
func (s *Series) Add(at uint64, cells []stat.Cell) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[stat.Key]cum, len(cells))
	w := window{byNr: map[uint32]*winStat{}}
	for _, c := range cells {
		next[c.Key] = cum{c.Count, c.Total, c.Runq}
		p := s.prev[c.Key]
		if s.prev == nil || c.Count <= p.count {
			continue
		}
		ws := w.byNr[c.Nr]
		if ws == nil {
			ws = &winStat{}
			w.byNr[c.Nr] = ws
		}
		ws.calls += c.Count - p.count
		ws.total += c.Total - p.total
		ws.runq += c.Runq - p.runq
		ws.callers++ // a process in two cgroups counts twice; rare enough
	}
	if s.prev != nil && at > s.lastAt {
		w.dur = at - s.lastAt
		s.windows = append(s.windows, w)
	}
	s.prev, s.lastAt = next, at
}

// byCallers groups nr's windows by how many processes called it, with the
// calls and time of each group.
func (s *Series) byCallers(nr uint32) map[int]*levelStat {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]*levelStat{}
	for _, w := range s.windows {
		ws := w.byNr[nr]
		if ws == nil {
			continue
		}
		l := out[ws.callers]
		if l == nil {
			l = &levelStat{}
			out[ws.callers] = l
		}
		l.n += ws.calls
		l.total += ws.total
		l.runq += ws.runq
		l.busy += w.dur
	}
	return out
}
