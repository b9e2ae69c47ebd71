package doctor

import (
	"fmt"
	"sort"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
	"github.com/sysray/sysray/internal/units"
)

// The findings it reports.
const (
	KernelContention ID = "kernel-contention"
	KernelHotspot    ID = "kernel-hotspot"
)

func init() {
	register(registration{ids: []ID{KernelContention, KernelHotspot},
		build: func(h *Host) Detector { return newContention(h.Arch) }})
}

// contention finds one syscall eating the time of many processes at once:
// isolated by their cgroups, processes still share one kernel, and a kernel
// path that serialises (a global lock, a drain of every CPU's lists) makes
// each caller slower the more of them call it together.
type contention struct {
	arch    event.Arch
	calls   map[uint32][]span // by syscall
	procs   map[uint32]*procSpan
	slept   map[uint32]map[string]uint64 // by syscall: where slow calls slept, ns
	counted map[uint32]uint64            // by syscall: calls, when the kernel counted them
	paths   map[uint32]*pathsSeen        // by syscall: the paths its events named
	spans   int                          // in calls, of all syscalls
	// closest is the costly call Findings found nearest the share (near).
	closest *Near
}

// pathsSeen tells a stream of work on many files (tar creating them) from
// the same request made again and again (a journal created and deleted).
type pathsSeen struct {
	n        uint64
	distinct map[string]uint64 // path → ns its calls took
}

// spreadPaths: a kernel path's time carried by at least this many paths,
// the largest first, to make up half of it, is work on many files: a
// request repeated (a journal created and deleted, one file opened by
// every worker) carries half its time on one or two. It is the time, not
// the count, that tells them apart: git opens its config files again and
// again, cheaply, and each object it creates is a new file, where ext4
// on a journal-less disk looks past the recently deleted inodes one by
// one (recently_deleted), a millisecond a file after a mass delete.
const spreadPaths = 4

// spread is how many paths carry half the sampled calls' time.
func (ps *pathsSeen) spread() int {
	var total uint64
	ns := make([]uint64, 0, len(ps.distinct))
	for _, v := range ps.distinct {
		ns = append(ns, v)
		total += v
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i] > ns[j] })
	var sum uint64
	for i, v := range ns {
		sum += v
		if 2*sum >= total {
			return i + 1
		}
	}
	return len(ns)
}

const maxPaths = 4096

type span struct {
	start, end uint64
	pid        uint32
	cgroup     uint64
}

type procSpan struct {
	cgroup      uint64
	comm        string
	first, last uint64
	byNr        map[uint32]uint64 // ns inside each syscall
	device      map[uint32]uint64 // ns of it asleep waiting for the storage device (bioCause), from events
}

// maxSpans bounds the calls kept of one syscall for its concurrency curve,
// and maxAllSpans those of all syscalls: a span is 32 bytes, and a capture
// of a busy host holds hundreds of syscalls, which at 200,000 each would
// be gigabytes. A million (32 MiB) holds five syscalls' worth in full.
const (
	maxSpans    = 200000
	maxAllSpans = 1 << 20
)

func newContention(arch event.Arch) *contention {
	return &contention{arch: arch, calls: map[uint32][]span{}, procs: map[uint32]*procSpan{},
		slept: map[uint32]map[string]uint64{}, paths: map[uint32]*pathsSeen{}}
}

// counts replaces the time each process spent in each syscall with the
// kernel's exact figures, when calls were sampled.
func (c *contention) counts(cells []stat.Cell) {
	for _, p := range c.procs {
		p.byNr = map[uint32]uint64{}
	}
	c.counted = map[uint32]uint64{}
	for _, cell := range cells {
		if p := c.procs[cell.PID]; p != nil {
			// Time preempted inside a call is the CPUs' queue, not the
			// kernel path; the curve below looks at it apart.
			p.byNr[cell.Nr] += cell.Total - min(cell.Runq, cell.Total)
			p.cgroup = cell.Cgroup
			c.counted[cell.Nr] += cell.Count
		}
	}
}

func (c *contention) Observe(e *event.Event) {
	if e.Kind != event.KindSyscall || e.Syscall.Unfinished {
		return
	}
	p := c.procs[e.PID]
	if p == nil {
		p = &procSpan{comm: e.Comm, first: e.Time, byNr: map[uint32]uint64{}, device: map[uint32]uint64{}}
		c.procs[e.PID] = p
	}
	p.comm = e.Comm // the name after its last exec
	if end := e.End(); end > p.last {
		p.last = end
	}
	p.byNr[e.Syscall.Nr] += e.Syscall.Latency
	if len(e.Syscall.Sleeps) > 0 {
		if _, ns, _ := bioCause(event.SyscallName(c.arch, e.Syscall.Nr), &e.Syscall); ns > 0 {
			p.device[e.Syscall.Nr] += ns
		}
	}
	spec := event.Lookup(c.arch, e.Syscall.Nr)
	for i, d := range e.Syscall.Data {
		if spec != nil && i < len(spec.Args) && spec.Args[i].Kind == event.ArgPath && len(d) > 0 {
			ps := c.paths[e.Syscall.Nr]
			if ps == nil {
				ps = &pathsSeen{distinct: map[string]uint64{}}
				c.paths[e.Syscall.Nr] = ps
			}
			ps.n++
			if _, ok := ps.distinct[string(d)]; ok || len(ps.distinct) < maxPaths {
				ps.distinct[string(d)] += e.Syscall.Latency
			}
			break
		}
	}
	for _, sl := range e.Syscall.Sleeps {
		if key, _ := where(sl.Stack); key != "" {
			m := c.slept[e.Syscall.Nr]
			if m == nil {
				m = map[string]uint64{}
				c.slept[e.Syscall.Nr] = m
			}
			m[key] += sl.Duration
		}
	}
	if l := c.calls[e.Syscall.Nr]; len(l) < maxSpans && c.spans < maxAllSpans {
		c.calls[e.Syscall.Nr] = append(l, span{e.Time, e.End(), e.PID, e.Cgroup})
		c.spans++
	}
}

// The kernel-hotspot rule (docs/detectors/kernel-hotspot.md gives the reasoning):
//   - warnShare: a syscall that takes a quarter of a process's thread
//     time would, removed, make it a third faster: worth a warning, in one
//     cgroup as in many (the cgroup count changes the words, not the
//     verdict: separate cgroups mean limits do not isolate the cost).
//   - minThreadNS: a process must have lived 50 ms of thread time for a
//     share of it to mean anything.
//   - A call under cheapNS on average does no work in the kernel worth
//     naming; hot-syscall reports those.
//   - Calls that wait by design (reads, polls, sleeps) and calls that wait
//     for a device by design (fsync and kin) are not a kernel path's cost.
const (
	minThreadNS = 50_000_000
)

func (c *contention) near(*Env) *Near { return c.closest }

func (c *contention) Findings(env *Env) []Finding {
	c.closest = nil
	threadNS, _ := env.threadTime()
	cpu := cpuByProc(env.oncpu)
	var out []Finding
	for nr, spans := range c.calls {
		name := event.SyscallName(c.arch, nr)
		if event.Is(name, event.MayWait) || event.Is(name, event.Waits) || event.Is(name, event.SyncsDevice) {
			continue
		}
		var heavy []string
		var share float64
		var inside uint64 // ns the heavy processes spent in this syscall: the time at stake
		cgroups := map[uint64]bool{}
		pids := map[uint32]bool{}
		// Cheap calls in great number are hot-syscall's: the kernel does
		// next to nothing in each.
		calls := c.counted[nr]
		if calls == 0 {
			calls = uint64(len(spans))
		}
		var all uint64
		for _, p := range c.procs {
			all += p.byNr[nr]
		}
		if calls > 0 && float64(all)/float64(calls) <= cheapNS {
			continue
		}
		for pid, p := range c.procs {
			tns := threadNS[pid]
			in := p.byNr[nr]
			sh, _ := timeShare(in, tns, cpu[pid], nr)
			if tns < minThreadNS || sh < warnShare {
				if cl := sh / warnShare; tns >= minThreadNS && in > 0 && (c.closest == nil || cl > c.closest.Closeness) {
					c.closest = &Near{ID: KernelHotspot, Closeness: cl,
						Subject: fmt.Sprintf("%s in %s: %s in the call", name, env.ProcName(pid, p.comm), units.Duration(in)),
						Short: fmt.Sprintf("%s of its time; kernel-hotspot reports a syscall that takes %s of a process's time",
							pct(sh), pct(warnShare))}
				}
				continue
			}
			pids[pid] = true
			inside += in
			share += sh
			heavy = append(heavy, fmt.Sprintf("%s: %.0f%% of its time", env.ProcName(pid, p.comm), 100*sh))
		}
		if len(pids) == 0 {
			continue
		}
		share /= float64(len(pids))
		for _, s := range spans {
			if pids[s.pid] {
				cgroups[s.cgroup] = true
			}
		}
		for pid := range pids {
			if p := c.procs[pid]; p.cgroup != 0 {
				cgroups[p.cgroup] = true
			}
		}
		// Live, the kernel's counts over time say how many processes were
		// calling it in each interval (an interval in which callers came or
		// went mixes two levels, so a level needs a tenth of the calls).
		// From a capture, where every call is an event, how many calls
		// were in flight together. Not from live events: slow calls all
		// cross over and fast ones are sampled, so slow calls would seem to
		// come together.
		var cv curve
		if env.series != nil {
			cv = latencyCurve(env.series.byCallers(nr, pids), "calling it", 10)
		} else {
			cv = latencyCurve(concurrency(spans), "concurrent", 50)
		}
		low, lowL, high, highL := cv.low, cv.lowL, cv.high, cv.highL
		sort.Strings(heavy)
		ev := map[string]any{"syscall": name, "processes": heavy, "cgroups": len(cgroups), "mean_share": share,
			"latency_by_concurrent_callers": cv.lines}
		onCPU := ""
		if n, funcs, stack := hotKernel(env.oncpu, nr); n > 0 {
			ev["on_cpu_samples"] = n
			ev["on_cpu_kernel_functions"] = funcs
			ev["on_cpu_kernel_stack"] = stack
			if len(funcs) > 0 {
				onCPU = " Sampled on the CPU inside " + name + ", the kernel was most often in " + funcs[0] + "."
			}
		}
		whereText := ""
		if m := c.slept[nr]; len(m) > 0 {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
			var places []string
			for i, k := range keys {
				if i == 4 {
					break
				}
				places = append(places, fmt.Sprintf("%s: %s", k, units.Duration(m[k])))
			}
			ev["slow_calls_slept_in"] = places
			whereText = " Its slow calls slept in " + keys[0] + "."
		}
		grows := highL > lowL && high >= 1.5*low
		// Time preempted inside the call is queueing for a CPU, which more
		// callers cause on any small host; only what grows without it is
		// contention inside the kernel.
		inKernel := grows && cv.highCPU >= 1.5*cv.lowCPU
		queued := ""
		if grows && !inKernel {
			queued = fmt.Sprintf(" A call takes %s with %d caller(s) in it against %s with %d, but without the time spent "+
				"waiting for a CPU it takes %s against %s: the callers queue for CPUs rather than for something in the kernel.",
				units.Duration(uint64(low)), lowL, units.Duration(uint64(high)), highL,
				units.Duration(uint64(cv.lowCPU)), units.Duration(uint64(cv.highCPU)))
		}
		// Calls whose time is mostly asleep for the storage device (a
		// rename or unlink waiting for its discard, a write for
		// writeback) are the device's cost, not a kernel path's: git's
		// renames took 37% of five processes' time on a busy host,
		// asleep in blkdev_issue_discard. blocked-in-kernel-io names the
		// cause and its fix; here it is info. Half: the device's time is
		// then the larger part, and it is a lower bound (from the slow
		// calls that crossed over).
		var device uint64
		for pid := range pids {
			device += c.procs[pid].device[nr]
		}
		forDevice := ""
		if 2*device >= inside {
			inKernel = false
			ev["asleep_for_device_ns"] = device
			forDevice = fmt.Sprintf(" At least %s of it was asleep waiting for the storage device: the device's time, which blocked-in-kernel-io explains.",
				units.Duration(device))
		}
		if inKernel {
			cpuText := ""
			if cv.highCPU < high {
				cpuText = fmt.Sprintf(" (%s against %s without the time spent waiting for a CPU)",
					units.Duration(uint64(cv.lowCPU)), units.Duration(uint64(cv.highCPU)))
			}
			out = append(out, Finding{ID: KernelContention, Severity: Warning, Key: keyOf(name), Syscalls: []string{name},
				Procs: env.refs(pidsOf(pids)...),
				Title: fmt.Sprintf("%s takes %.0f%% of the time of %d processes and slows as they call it together", name, 100*share, len(pids)),
				Summary: fmt.Sprintf("%d processes in %d cgroups spend on average %.0f%% of their time inside %s, and a call takes "+
					"%s with %d caller(s) in it against %s with %d%s: the callers contend for something inside one shared kernel, "+
					"which no CPU or memory limit isolates.%s%s%s",
					len(pids), len(cgroups), 100*share, name, units.Duration(uint64(low)), lowL, units.Duration(uint64(high)), highL,
					cpuText, onCPU, whereText, hint(name)),
				Evidence: ev, Fix: contentionFix(name), Score: 2 * float64(inside)})
		} else {
			// Without a measurable slowdown (on a small host the callers
			// mostly queue for a CPU; one caller has nobody to contend
			// with), a kernel path that takes a quarter of its callers'
			// time is still a cost they cannot see from user space.
			// One process that spends a quarter of its time in one call
			// may be doing its job (tar creating files), and so may two,
			// which are often one job split in two (a pipeline, git clone
			// and its index-pack); a kernel path that dominates three or
			// more processes at once, or processes in separate cgroups, is
			// the shared cost this detector exists for.
			procs, sev := "1 process spends", Info
			if len(pids) > 1 {
				procs = fmt.Sprintf("%d processes spend on average", len(pids))
			}
			if (len(pids) >= 3 || len(pids) >= 2 && len(cgroups) >= 2) && forDevice == "" {
				sev = Warning
			}
			// Calls that mostly name a different file each time are the
			// processes' work on many files (tar, git, a compiler's
			// outputs), however long the kernel takes over each: true,
			// and worth knowing, but no call to drop. Eight sampled calls
			// are enough to tell half of them apart from one path again;
			// or the time is spread over many paths (spreadPaths), though
			// cheap calls name a few again and again.
			manyFiles := ""
			if ps := c.paths[nr]; ps != nil && ps.n >= 8 {
				spread := ps.spread()
				if 2*uint64(len(ps.distinct)) >= min(ps.n, maxPaths) || spread >= spreadPaths {
					sev = Info
					ev["distinct_paths_sampled"] = fmt.Sprintf("%d of %d", len(ps.distinct), ps.n)
					ev["paths_with_half_the_time"] = spread
					manyFiles = fmt.Sprintf(" The calls named %d different paths in %d sampled, and %d of them took half their time: "+
						"work on many files, not one request repeated.", len(ps.distinct), ps.n, spread)
				}
			}
			isolated := ""
			if len(cgroups) >= 2 {
				isolated = fmt.Sprintf(" They run in %d cgroups, and no cgroup limit isolates a cost paid inside the one kernel they share.", len(cgroups))
			}
			out = append(out, Finding{ID: KernelHotspot, Severity: sev, Key: keyOf(name), Syscalls: []string{name},
				Procs: env.refs(pidsOf(pids)...),
				Title: fmt.Sprintf("%s takes %.0f%% of the time of %d process(es) in %d cgroup(s)", name, 100*share, len(pids), len(cgroups)),
				Summary: fmt.Sprintf("%s %.0f%% of their time inside %s: one kernel path dominates them, and nothing in user space "+
					"shows it.%s%s%s%s%s%s%s",
					procs, 100*share, name, isolated, manyFiles, queued, forDevice, onCPU, whereText, hint(name)),
				Evidence: ev, Fix: contentionFix(name), Score: float64(inside)})
		}
	}
	return out
}

type curve struct {
	lines       []string
	low, high   float64 // mean latency at the lowest and highest level
	lowL, highL int
	// The same means without the time spent waiting for a CPU: what is
	// left grows only if the callers slow each other inside the kernel.
	lowCPU, highCPU float64
}

// A level of the latency curve needs this many calls: a mean over fewer,
// many of them timed to a 4 ms tick, could be anything (a single call
// counted as 0 ns once made 2 callers look "infinitely" slower than 1).
const minLevelCalls = 10

// latencyCurve describes mean latency by level, leaving out levels with
// under 1/minPart of the calls or under minLevelCalls.
func latencyCurve(byLevel map[int]*levelStat, noun string, minPart uint64) curve {
	var c curve
	var all uint64
	levels := make([]int, 0, len(byLevel))
	for l, st := range byLevel {
		levels = append(levels, l)
		all += st.n
	}
	sort.Ints(levels)
	for _, l := range levels {
		st := byLevel[l]
		if st.n < minLevelCalls || st.n < all/minPart {
			continue
		}
		mean := float64(st.total) / float64(st.n)
		cpu := float64(st.total-min(st.runq, st.total)) / float64(st.n)
		line := fmt.Sprintf("%d %s: %s mean over %d calls", l, noun, units.Duration(uint64(mean)), st.n)
		if st.runq > 0 {
			line += fmt.Sprintf(" (%s of it waiting for a CPU)", units.Duration(uint64(mean-cpu)))
		}
		if st.busy > 0 {
			// Little's law: time inside the call over wall time is how many
			// calls were in flight on average.
			line += fmt.Sprintf(", %.2f in flight on average", float64(st.total)/float64(st.busy))
		}
		c.lines = append(c.lines, line)
		if len(c.lines) == 1 {
			c.low, c.lowL, c.lowCPU = mean, l, cpu
		}
		c.high, c.highL, c.highCPU = mean, l, cpu
	}
	return c
}

// concurrency groups calls by how many calls of the same syscall (including
// itself) were in flight at its midpoint.
func concurrency(spans []span) map[int]*levelStat {
	type edge struct {
		t     uint64
		delta int
	}
	edges := make([]edge, 0, 2*len(spans))
	for _, s := range spans {
		edges = append(edges, edge{s.start, +1}, edge{s.end, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].t != edges[j].t {
			return edges[i].t < edges[j].t
		}
		return edges[i].delta < edges[j].delta
	})
	mids := make([]int, len(spans))
	for i := range spans {
		mids[i] = i
	}
	sort.Slice(mids, func(i, j int) bool { return mid(spans[mids[i]]) < mid(spans[mids[j]]) })
	out := map[int]*levelStat{}
	level, ei := 0, 0
	for _, i := range mids {
		m := mid(spans[i])
		for ei < len(edges) && edges[ei].t <= m {
			level += edges[ei].delta
			ei++
		}
		l := max(level, 1)
		st := out[l]
		if st == nil {
			st = &levelStat{}
			out[l] = st
		}
		st.n++
		st.total += spans[i].end - spans[i].start
	}
	return out
}

func mid(s span) uint64 { return s.start + (s.end-s.start)/2 }

func hint(name string) string {
	switch name {
	case "fadvise64":
		return " posix_fadvise(POSIX_FADV_DONTNEED) walks the file's page cache to drop it, under the mapping's locks, " +
			"and drains the LRU lists of every CPU when pages are still busy; logging libraries call it after each write " +
			"(glog's --drop_log_memory)."
	}
	return ""
}

func contentionFix(name string) string {
	switch name {
	case "fadvise64":
		return "Stop calling posix_fadvise(DONTNEED) on every write: with glog, run with --drop_log_memory=false; " +
			"otherwise call it rarely (every few MiB) or not at all."
	}
	return "Call " + name + " less often (batch, cache the result), or spread the callers over more hosts; " +
		"record with --stacks to see where the kernel time goes."
}

// forget drops ended processes (Doctor.forget). Their calls' spans stay:
// bounded by maxSpans, they are the overlap the curve is made of.
func (c *contention) forget(pids, _ map[uint32]bool) {
	for pid := range pids {
		delete(c.procs, pid)
	}
}
