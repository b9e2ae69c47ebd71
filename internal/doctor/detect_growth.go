package doctor

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/units"
)

// The finding it reports.
const (
	LatencyGrows ID = "latency-grows-with-count"
)

func init() {
	register(registration{ids: []ID{LatencyGrows}, long: true,
		build: func(h *Host) Detector {
			g := newGrowth(h.Arch)
			g.bar = h.slowBar()
			return g
		}})
}

// growth finds a syscall whose latency grows with the state of its process:
// threads, memory mappings or open files. Kernels keep such state in lists
// and trees; a path that walks them (fork copying every mapping, a search
// for a free area) gets slower as the process grows.
type growth struct {
	arch    event.Arch
	bar     uint64 // ns: a call this long carries its sleeps (Host.slowBar)
	procs   map[uint32]*growthProc
	mmapNr  uint32
	munmap  uint32
	closeNr uint32
	// closest is the candidate Findings found nearest a finding it did
	// not make (near).
	closest *growthMiss
	// stacked: some call carried its sleeps, so sleep tracking was on;
	// tracked, set by Findings: a slow call without sleeps ran
	// (sleepsTracked).
	stacked, tracked bool
}

// growthMiss is a candidate that fell short, and how.
type growthMiss struct {
	p         *growthProc
	nr        uint32
	sm        *samples
	dim       int
	fit       dimFit
	rise      float64 // fitted latency at the end of the range over the start; 0: no line passed
	small     bool    // a line passed, over too few calls or too little time
	closeness float64
}

type growthProc struct {
	pid     uint32
	comm    string
	threads int
	maps    int
	fds     int
	// kernelMaps: maps comes from the kernel's count carried by the
	// events, not from the mmap calls seen. Such events come from the
	// doctor's live mode, where only some calls cross over, so fds (the
	// opens seen less the closes seen) means nothing there.
	kernelMaps bool
	samples    map[uint32]*samples // by syscall
}

type samples struct {
	threads, maps, fds []point
	time               timeSum
	n                  uint64
	approx             uint64 // of n, bounded by ticks (untimed calls make no point)
	// stride: one call in stride becomes a point. When the points reach
	// maxSamples every other one goes and the stride doubles, so they
	// cover the whole run evenly (a long doctor's runs last hours).
	stride uint64
	// Of the calls that carried their sleeps (the slow ones, where sleeps
	// are followed): how many, their latency, and of it the time asleep
	// (not preempted); and of the calls as slow that never switched out,
	// how many and their latency. They tell a walk, which runs on the
	// CPU, from a wait (onCPU).
	slept, sleptNS, asleepNS uint64
	bare, bareNS             uint64
}

// onCPU reports that the calls were seen to run on the CPU: at least as
// many of them as the smallest fit has bins were slow enough to carry
// their sleeps, and they spent under half their time asleep. A kernel walk
// of a growing structure runs; a wait that lengthens as the process grows
// (a go build's futex waits, as its open files grew) sleeps. The slow
// calls that never switched out count as running only where sleeps were
// tracked (tracked); elsewhere nothing is known of them.
func (sm *samples) onCPU(tracked bool) bool {
	n, total := sm.slept, sm.sleptNS
	if tracked {
		n, total = n+sm.bare, total+sm.bareNS
	}
	return n >= growthMinBins && sm.asleepNS*2 < total
}

const maxSamples = 50000

var dims = []string{"threads", "memory mappings", "open file descriptors"}

func newGrowth(arch event.Arch) *growth {
	g := &growth{arch: arch, bar: slowMin, procs: map[uint32]*growthProc{}}
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
	case event.KindExec:
		// A new program: its threads, mappings and files start over, and
		// so does its name.
		delete(g.procs, e.PID)
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
		if s.Maps != 0 {
			// The kernel's own count beats counting the mmap calls seen,
			// of which the doctor's mode samples a few.
			p.maps = int(s.Maps)
			p.kernelMaps = true
		}
		if g.spawnWait(s) {
			// The parent waits for its child to exec or exit: the child's
			// time, which grows with whatever the host is doing, not with
			// this process (a go build's vfork clones rose with its open
			// files, R² 0.81, as the build got busier).
			g.track(p, s)
			return
		}
		sm := p.samples[s.Nr]
		if sm == nil {
			sm = &samples{}
			p.samples[s.Nr] = sm
		}
		sm.n++
		sm.time.add(s)
		if len(s.Sleeps) > 0 {
			g.stacked = true
			sm.slept++
			sm.sleptNS += s.Latency
			for i := range s.Sleeps {
				if !preempted(&s.Sleeps[i]) {
					sm.asleepNS += s.Sleeps[i].Duration
				}
			}
		} else if s.Latency >= g.bar && !s.Untimed() {
			sm.bare++
			sm.bareNS += s.Latency
		}
		if s.Approx && !s.Untimed() {
			sm.approx++
		}
		// A latency known only to a kernel tick is still a point: its
		// expected value is the call's length, and the fit averages such
		// points instead of taking their median.
		if sm.stride == 0 {
			sm.stride = 1
		}
		// An untimed call's 0 is no latency: as a point it would drag
		// its bin's mean down.
		if sm.n%sm.stride == 0 && !s.Untimed() {
			if len(sm.threads) >= maxSamples {
				sm.threads, sm.maps, sm.fds = halve(sm.threads), halve(sm.maps), halve(sm.fds)
				sm.stride *= 2
			}
			y := float64(s.Latency - min(queued(s), s.Latency))
			sm.threads = append(sm.threads, point{x: float64(p.threads), y: y, approx: s.Approx, seq: sm.n})
			sm.maps = append(sm.maps, point{x: float64(p.maps), y: y, approx: s.Approx, seq: sm.n})
			sm.fds = append(sm.fds, point{x: float64(p.fds), y: y, approx: s.Approx, seq: sm.n})
		}
		g.track(p, s)
	}
}

// spawnWait reports a vfork, a clone with CLONE_VFORK (vforkCall), or a
// call that slept where such a parent waits (clone3 keeps its flags in
// memory).
func (g *growth) spawnWait(s *event.Syscall) bool {
	if vforkCall(event.SyscallName(g.arch, s.Nr), s) {
		return true
	}
	for i := range s.Sleeps {
		if !s.Sleeps[i].Preempted && vforkWait(s.Sleeps[i].Stack) {
			return true
		}
	}
	return false
}

// track follows the process's mappings and descriptors through its calls.
func (g *growth) track(p *growthProc, s *event.Syscall) {
	if s.Failed() {
		return
	}
	switch {
	case s.Nr == g.mmapNr && !p.kernelMaps:
		p.maps++
	case s.Nr == g.munmap && !p.kernelMaps:
		p.maps--
	case s.Nr == g.closeNr:
		p.fds--
	default:
		if spec := event.Lookup(g.arch, s.Nr); spec != nil && spec.RetKind == event.ArgFd {
			p.fds++
		}
	}
}

func (g *growth) Findings(env *Env) []Finding {
	var out []Finding
	g.closest = nil
	g.tracked = sleepsTracked(env, g.stacked)
	var small []growthMiss // too few calls or too little time to judge
	for _, p := range g.procs {
		for nr, sm := range p.samples {
			if event.Is(event.SyscallName(g.arch, nr), event.Waits) {
				continue // a wait's length is the caller's choice
			}
			if sm.n < growthMinCalls || sm.time.total() < growthMinNS {
				if sm.n >= growthMinBins && sm.time.total() >= growthMinNS/10 {
					small = append(small, growthMiss{p: p, nr: nr, sm: sm, dim: -1})
				}
				continue
			}
			fits, byRanks := g.fitDims(p, sm)
			best := -1
			for i := range fits {
				if fits[i].strength > 0 && (best < 0 || fits[i].strength > fits[best].strength) {
					best = i
				}
			}
			if best < 0 {
				g.missLine(p, nr, sm, fits)
				continue
			}
			ba, bb, bst, bbins := fits[best].a, fits[best].b, fits[best].strength, fits[best].bins
			// Dimensions that grew together (every thread brings its stack
			// mapping) fit alike, and which one wins is noise: name them
			// all rather than pick one and give the wrong fix.
			var with []int // in dims' order, so a tie's title does not flip
			for i := range fits {
				if st := fits[i].strength; st > 0 && st >= bst-growthTieR2 {
					with = append(with, i)
				}
			}
			x0, x1 := bbins[0].x, bbins[len(bbins)-1].x
			y0, y1, grows := fits[best].rise()
			if !grows {
				g.miss(&growthMiss{p: p, nr: nr, sm: sm, dim: best, fit: fits[best], rise: y1 / y0, closeness: y1 / y0 / growthFactor})
				continue
			}
			name := event.SyscallName(g.arch, nr)
			var curve []string
			for _, b := range bbins {
				curve = append(curve, fmt.Sprintf("%.0f→%s", b.x, units.Duration(uint64(b.y))))
			}
			var names, fixes []string
			also := []string{}
			r2s := map[string]float64{}
			for _, i := range with {
				names = append(names, dims[i])
				fixes = append(fixes, growthFix[i])
				r2s[dims[i]] = fits[i].r2
				if i != best {
					also = append(also, dims[i])
				}
			}
			measure, how := "R²", fmt.Sprintf("fit R²=%.2f over %d calls%s", bst, sm.n, tickNote(sm))
			if byRanks {
				measure = "τ"
				how = fmt.Sprintf("by the median slope between calls; Kendall's τ=%.2f over %d calls%s, where a line through the bins' medians "+
					"(R²=%.2f) is bent by calls that ran slow for reasons outside the process", bst, sm.n, tickNote(sm), fits[best].r2)
				if sp := fits[best].spell; sp != nil {
					how = fmt.Sprintf("by the median slope between calls; Kendall's τ=%.2f over %d calls%s, leaving out a spell of %d "+
						"consecutive calls (%s %.0f to %.0f) that took %.1f times the trend, as a process slowed from outside does; "+
						"a line through the bins' medians (R²=%.2f) is bent by them", bst, sm.n, tickNote(sm), sp.calls, dims[best], sp.x0, sp.x1,
						sp.factor, fits[best].r2)
				}
			}
			together := ""
			if len(with) > 1 {
				together = fmt.Sprintf(" The %s grew together in this run, and the latency fits each as well (%s within %.2f), "+
					"so the calls alone cannot tell which one the kernel walks.", joinAnd(names), measure, growthTieR2)
			}
			ev := map[string]any{"syscall": name, "pid": p.pid, "grows_with": dims[best], "fits_as_well": also, "r2_by_dimension": r2s, "slope_ns_per_unit": bb,
				"intercept_ns": ba, "r2": fits[best].r2, "calls": sm.n, "calls_timed_in_ticks": sm.approx, "total_ns": sm.time.total(), "curve": curve,
				"fit": "bins", "line_from_ns": y0, "line_to_ns": y1, "calls_timed_by_clock": sm.time.timed}
			if byRanks {
				ev["fit"], ev["kendall_tau"] = "ranks", bst
				if sp := fits[best].spell; sp != nil {
					ev["spell"] = map[string]any{"calls": sp.calls, "from": sp.x0, "to": sp.x1, "times_trend": sp.factor}
				}
			}
			out = append(out, Finding{ID: LatencyGrows, Severity: Warning, Key: keyOf(p.comm, name, joinAnd(names)), Syscalls: []string{name}, Procs: env.refs(p.pid),
				Title: fmt.Sprintf("%s in %s gets slower as the process's %s grow", name, env.ProcName(p.pid, p.comm), joinAnd(names)),
				Summary: fmt.Sprintf("In %s, %s latency rises with the number of %s: from about %s at %.0f to %s at %.0f "+
					"(%s more per unit, %s, %s in all). The kernel walks a structure that grows with the process; "+
					"each new %s makes the next call slower.%s",
					env.ProcName(p.pid, p.comm), name, dims[best], units.Duration(uint64(y0)), x0, units.Duration(uint64(y1)), x1,
					units.Duration(uint64(bb)), how, sm.time, dimSingular[best], together),
				Evidence: ev,
				Fix:      strings.Join(fixes, " "),
				Score:    float64(sm.time.total())})
		}
	}
	g.missSmall(small)
	return out
}

// missSmall notes a candidate too small to judge that would pass were it
// larger (its line passes, and rises enough): a growth the rule's floor of
// calls and time left out. Only the
// costliest few are fitted (the agent reports every window).
func (g *growth) missSmall(small []growthMiss) {
	sort.Slice(small, func(i, j int) bool { return small[i].sm.time.total() > small[j].sm.time.total() })
	for i := range small[:min(len(small), 16)] {
		m := &small[i]
		fits, _ := g.fitDims(m.p, m.sm)
		for d := range fits {
			if fits[d].strength == 0 || m.dim >= 0 && fits[d].strength <= fits[m.dim].strength {
				continue
			}
			if _, _, grows := fits[d].rise(); grows {
				m.dim, m.fit = d, fits[d]
			}
		}
		if m.dim < 0 {
			continue
		}
		m.small = true
		m.closeness = min(float64(m.sm.n)/growthMinCalls, float64(m.sm.time.total())/growthMinNS)
		g.miss(m)
	}
}

// missLine notes a candidate no line passed for: its dimension nearest the
// R² a line through its bins needs.
func (g *growth) missLine(p *growthProc, nr uint32, sm *samples, fits [3]dimFit) {
	m := &growthMiss{p: p, nr: nr, sm: sm, dim: -1}
	for i := range fits {
		f := &fits[i]
		if len(f.bins) < growthMinBins || f.bins[len(f.bins)-1].x-f.bins[0].x < growthMinRange {
			continue
		}
		c := 0.0
		if f.b > 0 {
			c = f.r2 / minR2(len(f.bins))
		}
		if m.dim < 0 || c > m.closeness {
			m.dim, m.fit, m.closeness = i, *f, c
		}
	}
	if m.dim >= 0 {
		g.miss(m)
	}
}

func (g *growth) miss(m *growthMiss) {
	if g.closest == nil || m.closeness > g.closest.closeness {
		g.closest = m
	}
}

func (g *growth) near(env *Env) *Near {
	m := g.closest
	if m == nil {
		return nil
	}
	name := event.SyscallName(g.arch, m.nr)
	f := &m.fit
	n := &Near{ID: LatencyGrows, Closeness: m.closeness,
		Subject: fmt.Sprintf("%s in %s, %d calls (%s) against its %s", name, env.ProcName(m.p.pid, m.p.comm), m.sm.n,
			units.Duration(m.sm.time.total()), dims[m.dim])}
	switch {
	case m.small:
		n.Short = fmt.Sprintf("the latency rises with the %s (R² %.2f), but over %d calls and %s in all, "+
			"where the rule needs %d calls and %s: too few to tell growth from chance, or too cheap to matter",
			dims[m.dim], f.r2, m.sm.n, units.Duration(m.sm.time.total()), growthMinCalls, units.Duration(growthMinNS))
	case m.rise > 0:
		n.Short = fmt.Sprintf("a line fits (R² %.2f), but the latency it gives rose only %.1f-fold over the range seen "+
			"(%.0f to %.0f); growth needs 3-fold, or 1.5-fold with most of the latency from the state", f.r2, m.rise,
			f.bins[0].x, f.bins[len(f.bins)-1].x)
	case f.b <= 0:
		n.Short = fmt.Sprintf("the latency does not rise with the %s (the line through %d bins falls)", dims[m.dim], len(f.bins))
	default:
		pts := [][]point{m.sm.threads, m.sm.maps, m.sm.fds}[m.dim]
		tau, z := kendall(rankSample(pts))
		r2Need := fmt.Sprintf(" and R² ≥ %.1f (calls not seen to run on the CPU)", growthMinRankR2)
		if m.sm.onCPU(g.tracked) {
			r2Need = " (the calls ran on the CPU)"
		}
		n.Short = fmt.Sprintf("a line through %d bins (%.0f to %.0f) explains R² %.2f of the spread, where %d bins need %.2f; "+
			"the calls' ranks give τ %.2f at z %.1f, where ranks need τ ≥ %.2f, z ≥ %.2f%s",
			len(f.bins), f.bins[0].x, f.bins[len(f.bins)-1].x, f.r2, len(f.bins), minR2(len(f.bins)),
			tau, z, growthMinTau, growthMinZ, r2Need)
		ranked := f.r2 >= growthMinRankR2 || m.sm.onCPU(g.tracked)
		if rest, sp, ok := withoutSpell(rankSample(pts)); ok && ranked {
			tau, z := kendall(rest)
			n.Short += fmt.Sprintf("; without the %d calls in a row (%.0f to %.0f) that took %.1f times the trend, τ %.2f at z %.1f, "+
				"where z ≥ %.2f (the best of %d such stretches)", sp.calls, sp.x0, sp.x1, sp.factor, tau, z, spellZ(sp.windows), sp.windows)
		}
	}
	return n
}

// rise gives the fitted latency at the start and the end of the range
// seen, and whether it grows enough to report: it must triple, or, seen
// only late (sysray attached to a process already grown), rise by half
// while the line says that most of it comes from the state: with none of
// it, a call would take under a third.
func (f *dimFit) rise() (y0, y1 float64, grows bool) {
	x0, x1 := f.bins[0].x, f.bins[len(f.bins)-1].x
	y0, y1 = f.a+f.b*x0, f.a+f.b*x1
	// A fit through tick-timed calls may start below zero: the smallest
	// bin is then the honest floor.
	if y0 <= 0 {
		y0 = f.bins[0].y
		for _, b := range f.bins {
			y0 = min(y0, b.y)
		}
	}
	return y0, y1, y1 >= growthFactor*y0 || y1 >= 1.5*y0 && f.a <= y1/growthFactor
}

// clumped reports a line drawn between two clusters of calls rather than
// through calls along the state: a stretch with no call wider than a third
// of the range the line spans (growthGap), and on neither side of it a
// rise of its own, a Theil–Sen slope at least half the line's over at
// least 3 bins. A walk of a growing structure slows with each unit on
// both sides of any gap; two phases of a process do not: a go test's
// openat took 5–30 µs while it built with 11–47 mappings and 0.4–0.5 ms
// once it ran with 89–110, flat within each (R² 0.84 through the bins of
// both, in a CI run of the benign corpus). The growth that grows only on
// one side (map32's forks, flat until the low region fills) has that side.
func clumped(f *dimFit) bool {
	bins := f.bins
	g, widest := 0, 0.0
	for j := 1; j < len(bins); j++ {
		if d := bins[j].x - bins[j-1].x; d > widest {
			g, widest = j, d
		}
	}
	if widest*growthGap <= bins[len(bins)-1].x-bins[0].x {
		return false
	}
	for _, side := range [][]point{bins[:g], bins[g:]} {
		if len(side) < 3 {
			continue
		}
		if _, b := theilSen(side); b >= f.b/2 {
			return false
		}
	}
	return true
}

// dimFit is a call's latency fitted against one dimension of its process's
// state.
type dimFit struct {
	a, b     float64 // the line: latency = a + b·state
	r2       float64 // of the line through the bins' medians
	strength float64 // R², or τ when the ranks decided; 0: no growth here
	bins     []point
	spell    *spell // when the ranks decided without a spell's calls
}

// fitDims fits a call's latency against each dimension of state that could
// carry a line: through the bins' medians first, and when that passes in no
// dimension, by ranks (kendall, theilSen). A stretch of calls slowed from
// outside for reasons the kernel does not count (a vCPU the hypervisor
// held, caches a neighbour thrashed) leaves the bins' line a poor fit
// though every other call grows in step with the state; their order still
// says so. (The wait for a CPU is counted, and left out first: queued.)
func (g *growth) fitDims(p *growthProc, sm *samples) (fits [3]dimFit, byRanks bool) {
	var ok [3]bool
	for i, pts := range [][]point{sm.threads, sm.maps, sm.fds} {
		if i == 2 && p.kernelMaps {
			// Live, the doctor sees only the calls that cross over
			// (failed, slow, sampled), so the opens and closes it
			// saw count nothing: the difference only climbs with
			// time, and a git clone's openat, slower as ext4 filled
			// its inode bitmaps, fit it with R² 0.77.
			continue
		}
		f := &fits[i]
		f.a, f.b, f.r2, f.bins = binnedFit(pts)
		if len(f.bins) < growthMinBins || f.bins[len(f.bins)-1].x-f.bins[0].x < growthMinRange || clumped(f) {
			continue
		}
		ok[i] = true
		if f.b > 0 && significant(f.r2, len(f.bins)) {
			f.strength = f.r2
		}
	}
	if fits[0].strength > 0 || fits[1].strength > 0 || fits[2].strength > 0 {
		return fits, false
	}
	for i, pts := range [][]point{sm.threads, sm.maps, sm.fds} {
		if !ok[i] || fits[i].r2 < growthMinRankR2 && !sm.onCPU(g.tracked) {
			continue
		}
		pts = rankSample(pts)
		// τ first: the slopes between every pair cost a sort.
		tau, z := kendall(pts)
		var sp *spell
		if tau < growthMinTau || z < growthMinZ {
			rest, s, ok := withoutSpell(pts)
			if !ok {
				continue
			}
			if tau, z = kendall(rest); tau < growthMinTau || z < spellZ(s.windows) {
				continue
			}
			pts, sp = rest, &s
		}
		if a, b := theilSen(pts); b > 0 {
			fits[i].a, fits[i].b, fits[i].strength, fits[i].spell = a, b, tau, sp
			byRanks = true
		}
	}
	return fits, byRanks
}

// The growth rule (docs/detectors/latency-grows-with-count.md gives the reasoning):
//   - growthMinNS: the calls must cost something worth fixing, 50 ms in all.
//   - growthMinCalls: 12 calls make the 6 bins of the smallest fit, 2 each.
//   - growthFactor: the fitted latency must at least triple across the range
//     seen; a kernel walk of a growing list does (dup_mmap copying 48k
//     mappings takes ~40x what 1.6k do), jitter and caches do not. Seen
//     only late, a rise by half counts if the line puts under a third of
//     the latency outside the state (intercept ≤ y1/3).
//   - growthMinBins, growthMinRange: at least 6 points over at least 32 units
//     of state, so two clusters cannot make a line.
//   - growthGap: nor two clusters of bins, one each side of a stretch with
//     no call over a third of the range, neither rising on its own
//     (clumped). From 40 calls on, bins are a twentieth of the range, so
//     a third is 6 or more empty bins in a row: state that grew while the
//     call was not made at all, where the line is only a chord.
//   - significant: the line must explain most of the spread (R² ≥ 0.7), and
//     a slope that good must be unlikely from noise: p < 0.001 on the
//     bins' t statistic. Many calls give many bins, where 0.7 suffices;
//     12 calls give 6 bins, where it takes R² ≥ 0.95. So few calls are
//     enough when the growth is large and the fit tight.
//   - growthMinTau, growthMinZ: when no line through the bins passes, the
//     calls' ranks may: Kendall's τ-b between state and latency at least
//     0.63, which is what R² 0.7 means for a straight line with normal
//     noise (τ = 2/π·asin(√0.7)), and ten times less likely from noise
//     than the bins' test asks (z ≥ 3.89, two-sided p < 0.0001): a second
//     look at calls the first found wanting must be the stronger evidence.
//     With few calls the z bound is the stricter (τ ≥ 0.78 at 14 calls; in
//     the benign corpus a Go compiler's 14 futex calls reached τ 0.73,
//     z 3.3, against its mappings), with many the τ bound. The line that
//     must then triple is Theil–Sen's. Under a neighbour streaming memory,
//     before the forks' wait for a CPU was left out of every call (only of
//     those with sleeps, over the slow threshold), map32's forks gave
//     τ 0.66–0.88 where the bins' R² fell as low as 0.55; quiet, τ
//     0.75–0.98. With the wait left out the bins' R² is 0.94 or more.
//   - growthMinRankR2: even then the bins' line must explain half the
//     spread, unless the calls were seen to run on the CPU (onCPU). A rank
//     fallback without this bound (τ over the bins) would warn on
//     ordinary work: a go build's futex waits rose in rank with its open
//     descriptors as both grew over the build (τ 0.70, R² 0.38). Those calls slept; a walk of a growing structure
//     runs, and for calls seen to run the bound keeps nothing out that
//     the mechanism allows, while a stretch of slowed calls can take the
//     bins' R² under it: 0.55–0.69 in the runs ranks decided above, but
//     0.46 in a CI miss of thread-stacks (τ 0.68, z 6.0), where the
//     whole process ran 2.5 times slower over a quarter of its forks.
//     Seen to run: at least 6 calls (as many as the smallest fit has
//     bins) slow enough to carry their sleeps, which spent under half
//     their time asleep; a slow call that never switched out ran, where
//     sleeps were tracked. Calls not seen to run (a wait, too few slow
//     calls, or a capture without sleeps) keep the bound: a drift of
//     waits with a few long ones, and so also a growth with a few calls
//     stalled far off the trend, stays below it and unreported.
//   - growthTieR2: dimensions that grew in step (threads and their stack
//     mappings) bin alike, and their R² differ only by where the bin edges
//     fall (equal to 15 digits in three live runs of map32 -n 3000); a
//     dimension the latency truly follows beats one that merely drifted
//     along by far more than 0.02. By ranks the same bound holds for τ,
//     which is equal outright for counts that grew in step.
const (
	growthMinCalls  = 12
	growthMinNS     = 50_000_000
	growthFactor    = 3
	growthMinBins   = 6
	growthMinRange  = 32
	growthTieR2     = 0.02
	growthMinTau    = 0.63
	growthMinZ      = 3.89
	growthMinRankR2 = 0.5
	growthGap       = 3
)

func significant(r2 float64, bins int) bool {
	df := bins - 2
	if r2 < 0.7 || df < 4 {
		return false
	}
	if r2 >= 1 {
		return true
	}
	return math.Sqrt(r2*float64(df)/(1-r2)) >= tCrit[min(df, len(tCrit)-1)]
}

var dimSingular = []string{"thread", "mapping", "file descriptor"}

var growthFix = []string{
	"Create fewer threads (a pool), or find the per-thread cost: stacks allocated with unusual flags (MAP_32BIT) " +
		"or per-thread mappings make thread creation walk more each time.",
	"Keep fewer mappings: merge allocations, use larger arenas, avoid fork() in a process with many mappings " +
		"(use posix_spawn or vfork).",
	"Close file descriptors you no longer need, or keep them in a smaller table.",
}

func tickNote(sm *samples) string {
	if sm.approx == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d timed to a kernel tick, averaged)", sm.approx)
}

// joinAnd lists words as a sentence does: "a", "a and b", "a, b and c".
func joinAnd(w []string) string {
	if len(w) < 2 {
		return strings.Join(w, "")
	}
	return strings.Join(w[:len(w)-1], ", ") + " and " + w[len(w)-1]
}

// halve keeps every other point.
func halve(pts []point) []point {
	out := pts[:0]
	for i := 0; i < len(pts); i += 2 {
		out = append(out, pts[i])
	}
	return out
}

// forget drops ended processes (Doctor.forget).
func (g *growth) forget(pids, _ map[uint32]bool) {
	for pid := range pids {
		delete(g.procs, pid)
	}
}
