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
	// spans says, by process, the first and last window it has calls in,
	// so that forget finds them without a pass over every window.
	spans map[uint32][2]int
}

type cum struct{ count, total, runq uint64 }

type window struct {
	dur  uint64                         // ns
	byNr map[uint32]map[uint32]*winStat // by syscall, then by process
}

type winStat struct {
	calls, total uint64
	runq         uint64 // of total, ns preempted waiting for a CPU
}

// NewSeries returns an empty series.
func NewSeries() *Series { return &Series{} }

// Add takes the counts read at at (monotonic ns). The first call only sets
// the starting point.
func (s *Series) Add(at uint64, cells []stat.Cell) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[stat.Key]cum, len(cells))
	w := window{byNr: map[uint32]map[uint32]*winStat{}}
	for _, c := range cells {
		next[c.Key] = cum{c.Count, c.Total, c.Runq}
		p := s.prev[c.Key]
		if s.prev == nil || c.Count <= p.count {
			continue
		}
		byPID := w.byNr[c.Nr]
		if byPID == nil {
			byPID = map[uint32]*winStat{}
			w.byNr[c.Nr] = byPID
		}
		ws := byPID[c.PID]
		if ws == nil {
			ws = &winStat{}
			byPID[c.PID] = ws
		}
		ws.calls += c.Count - p.count
		ws.total += c.Total - p.total
		ws.runq += c.Runq - p.runq
	}
	if s.prev != nil && at > s.lastAt {
		w.dur = at - s.lastAt
		i := len(s.windows)
		s.windows = append(s.windows, w)
		if s.spans == nil {
			s.spans = map[uint32][2]int{}
		}
		for _, byPID := range w.byNr {
			for pid := range byPID {
				if sp, ok := s.spans[pid]; ok {
					s.spans[pid] = [2]int{sp[0], i}
				} else {
					s.spans[pid] = [2]int{i, i}
				}
			}
		}
	}
	s.prev, s.lastAt = next, at
}

// forget drops the calls of processes the doctor let go of (Doctor.forget):
// no finding will look for them, and an exec storm's processes were most
// of the windows' entries, four windows a second.
func (s *Series) forget(pids map[uint32]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid := range pids {
		sp, ok := s.spans[pid]
		if !ok {
			continue
		}
		for _, w := range s.windows[sp[0] : sp[1]+1] {
			for nr, byPID := range w.byNr {
				if _, ok := byPID[pid]; ok {
					delete(byPID, pid)
					if len(byPID) == 0 {
						delete(w.byNr, nr)
					}
				}
			}
		}
		delete(s.spans, pid)
	}
}

// Restart says the kernel let go of these cells after the last read: a
// later call under one of their keys counts from zero in a new cell.
func (s *Series) Restart(cells []stat.Cell) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range cells {
		delete(s.prev, cells[i].Key)
	}
}

// byCallers groups nr's windows by how many of the processes in pids (all,
// if nil) called it, with those processes' calls and time in each group:
// other processes on the host that happen to make the same syscall are
// neither the callers in question nor their competition for its path.
func (s *Series) byCallers(nr uint32, pids map[uint32]bool) map[int]*levelStat {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]*levelStat{}
	for _, w := range s.windows {
		var callers int
		var sum winStat
		for pid, ws := range w.byNr[nr] {
			if pids != nil && !pids[pid] {
				continue
			}
			callers++
			sum.calls += ws.calls
			sum.total += ws.total
			sum.runq += ws.runq
		}
		if callers == 0 {
			continue
		}
		l := out[callers]
		if l == nil {
			l = &levelStat{}
			out[callers] = l
		}
		l.n += sum.calls
		l.total += sum.total
		l.runq += sum.runq
		l.busy += w.dur
	}
	return out
}

type levelStat struct {
	n, total uint64
	runq     uint64 // of total, ns preempted waiting for a CPU (series only)
	busy     uint64 // ns of windows at this level (series only)
}
