package doctor

import (
	"fmt"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/units"
)

// growth finds a syscall whose latency grows with the state of its process:
// threads, memory mappings or open files. Kernels keep such state in lists
// and trees; a path that walks them (fork copying every mapping, a search
// for a free area) gets slower as the process grows.
type growth struct {
	arch    event.Arch
	procs   map[uint32]*growthProc
	mmapNr  uint32
	munmap  uint32
	closeNr uint32
}

type growthProc struct {
	pid     uint32
	comm    string
	threads int
	maps    int
	fds     int
	samples map[uint32]*samples // by syscall
}

type samples struct {
	threads, maps, fds []point
	totalNS            uint64
	n                  uint64
}

const maxSamples = 50000

var dims = []string{"threads", "memory mappings", "open file descriptors"}

func newGrowth(arch event.Arch) *growth {
	g := &growth{arch: arch, procs: map[uint32]*growthProc{}}
	g.mmapNr, _ = event.SyscallByName(arch, "mmap")
	g.munmap, _ = event.SyscallByName(arch, "munmap")
	g.closeNr, _ = event.SyscallByName(arch, "close")
	return g
}

func (g *growth) proc(e *event.Event) *growthProc {
	p := g.procs[e.PID]
	if p == nil {
		p = &growthProc{pid: e.PID, comm: e.Comm, threads: 1, samples: map[uint32]*samples{}}
		g.procs[e.PID] = p
	}
	return p
}

func (g *growth) Observe(e *event.Event) {
	switch e.Kind {
	case event.KindFork:
		if e.Proc.Thread {
			g.proc(e).threads++
		}
	case event.KindExit:
		if p := g.procs[e.PID]; p != nil && !e.Proc.GroupDead {
			p.threads--
		}
	case event.KindSyscall:
		s := &e.Syscall
		if s.Unfinished {
			return
		}
		p := g.proc(e)
		sm := p.samples[s.Nr]
		if sm == nil {
			sm = &samples{}
			p.samples[s.Nr] = sm
		}
		// A latency known only to a kernel tick is no point for a fit; the
		// call still changes the process's state below.
		if !s.Approx {
			sm.n++
			sm.totalNS += s.Latency
		}
		if len(sm.threads) < maxSamples && !s.Approx {
			y := float64(s.Latency)
			sm.threads = append(sm.threads, point{float64(p.threads), y})
			sm.maps = append(sm.maps, point{float64(p.maps), y})
			sm.fds = append(sm.fds, point{float64(p.fds), y})
		}
		if s.Failed() {
			return
		}
		switch {
		case s.Nr == g.mmapNr:
			p.maps++
		case s.Nr == g.munmap:
			p.maps--
		case s.Nr == g.closeNr:
			p.fds--
		default:
			if spec := event.Lookup(g.arch, s.Nr); spec != nil && spec.RetKind == event.ArgFd {
				p.fds++
			}
		}
	}
}

func (g *growth) Findings(env *Env) []Finding {
	var out []Finding
	for _, p := range g.procs {
		for nr, sm := range p.samples {
			if sm.n < 100 || sm.totalNS < 50_000_000 || pureWaits[event.SyscallName(g.arch, nr)] {
				continue // a wait's length is the caller's choice
			}
			best := -1
			var ba, bb, br2 float64
			var bbins []point
			for i, pts := range [][]point{sm.threads, sm.maps, sm.fds} {
				a, b, r2, bins := binnedFit(pts)
				if len(bins) < 8 || b <= 0 || bins[len(bins)-1].x-bins[0].x < 32 {
					continue
				}
				if r2 > br2 {
					best, ba, bb, br2, bbins = i, a, b, r2, bins
				}
			}
			if best < 0 || br2 < 0.7 {
				continue
			}
			x0, x1 := bbins[0].x, bbins[len(bbins)-1].x
			y0, y1 := ba+bb*x0, ba+bb*x1
			if y0 <= 0 || y1 < 3*y0 {
				continue
			}
			name := event.SyscallName(g.arch, nr)
			var curve []string
			for _, b := range bbins {
				curve = append(curve, fmt.Sprintf("%.0f→%s", b.x, units.Duration(uint64(b.y))))
			}
			out = append(out, Finding{ID: "latency-grows-with-count", Severity: Warning,
				Title: fmt.Sprintf("%s in %s gets slower as the process's %s grow", name, env.ProcName(p.pid, p.comm), dims[best]),
				Summary: fmt.Sprintf("In %s, %s latency rises with the number of %s: from about %s at %.0f to %s at %.0f "+
					"(%s more per unit, fit R²=%.2f over %d calls, %s in all). The kernel walks a structure that grows with the process; "+
					"each new %s makes the next call slower.",
					env.ProcName(p.pid, p.comm), name, dims[best], units.Duration(uint64(y0)), x0, units.Duration(uint64(y1)), x1,
					units.Duration(uint64(bb)), br2, sm.n, units.Duration(sm.totalNS), dimSingular[best]),
				Evidence: map[string]any{"syscall": name, "pid": p.pid, "grows_with": dims[best], "slope_ns_per_unit": bb,
					"intercept_ns": ba, "r2": br2, "calls": sm.n, "total_ns": sm.totalNS, "curve": curve},
				Fix:   growthFix[best],
				Score: float64(sm.totalNS)})
		}
	}
	return out
}

var dimSingular = []string{"thread", "mapping", "file descriptor"}

var growthFix = []string{
	"Create fewer threads (a pool), or find the per-thread cost: stacks allocated with unusual flags (MAP_32BIT) " +
		"or per-thread mappings make thread creation walk more each time.",
	"Keep fewer mappings: merge allocations, use larger arenas, avoid fork() in a process with many mappings " +
		"(use posix_spawn or vfork).",
	"Close file descriptors you no longer need, or keep them in a smaller table.",
}
