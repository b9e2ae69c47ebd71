package doctor

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/event"
	hostfacts "github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/units"
)

// The finding it reports: threads that stalled in the page allocator's
// slow path, compacting memory (or reclaiming it) themselves before they
// could get the page a fault or a syscall asked for.
const CompactionStall ID = "compaction-stall"

func init() {
	register(registration{ids: []ID{CompactionStall},
		build: func(h *Host) Detector { return newCompaction(h) }})
}

// compactWarnRepeat: a warning needs this many stalls. One stall is a
// one-off price (the first huge page after a quiet spell, an allocation
// that found the host fragmented once); five are the rule of the
// process's faults, which every request that faults pays again.
const compactWarnRepeat = 5

// compactInfoNS: stalls that add up to less are not reported at all, not
// even as info: a millisecond of compaction now and then is the kernel's
// normal way to keep huge pages coming, and nobody can feel it.
const compactInfoNS = 10_000_000

// compactSameStallNS: passes of one thread in one call (or a fault whose
// address is unknown), less than this apart, are one stall: the allocator
// compacts zone after zone, and tries again after reclaim, within one
// allocation. Passes in a fault whose address is known are one stall by
// that address, however far apart: between passes the allocator may wait
// for a contended zone, or be preempted.
const compactSameStallNS = 1_000_000

// compactProcsMax bounds the processes followed; compactRegionsMax the
// mappings read for one process.
const (
	compactProcsMax   = 1 << 14
	compactRegionsMax = 4
)

// compactThread is one thread's span as the detector saw it: its passes
// begin before their events (Event.Time is a pass's end), which the
// doctor's lifetimes do not know.
type compactThread struct {
	first, last uint64
	// The stall in progress: the last pass's end, syscall and fault.
	lastEnd  uint64
	lastNr   int32
	lastAddr uint64
	stallNS  uint64
}

type compactProc struct {
	pid     uint32
	comm    string
	cgroup  uint64
	threads map[uint32]*compactThread
	// ns by what and where: [what][0 in faults, 1 in syscalls]
	ns       [3][2]uint64
	passes   [3]uint64
	stalls   uint64
	inFaults uint64 // of stalls, the ones in page faults
	maxStall uint64
	calls    map[string]uint64 // ns in each syscall
	orders   map[int16]uint64  // passes by allocation order
	results  map[string]uint64 // compaction passes by result
	lo, hi   uint64            // fault addresses seen
	regions  []string          // the mappings the faults were in (live)
	read     bool
}

type compaction struct {
	arch    event.Arch
	host    *Host
	procs   map[uint32]*compactProc
	closest *Near
	// smaps reads a live process's mappings; tests replace it.
	smaps func(pid uint32) ([]byte, error)
}

func newCompaction(h *Host) *compaction {
	return &compaction{arch: h.Arch, host: h, procs: map[uint32]*compactProc{},
		smaps: func(pid uint32) ([]byte, error) { return os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid)) }}
}

func (c *compaction) near(*Env) *Near { return c.closest }

// compactResults names the kernel's enum compact_result (include/linux/compaction.h).
var compactResults = []string{"not_suitable_zone", "skipped", "deferred", "no_suitable_page", "continue", "complete",
	"partial_skipped", "contended", "success"}

func (c *compaction) Observe(e *event.Event) {
	if e.Kind != event.KindReclaim {
		return
	}
	r := &e.Reclaim
	if r.What != event.ReclaimCompact && r.What != event.ReclaimDirect {
		return // memory-cgroup reclaim: cgroup-limit's
	}
	p := c.procs[e.PID]
	if p == nil {
		if len(c.procs) >= compactProcsMax {
			return
		}
		p = &compactProc{pid: e.PID, threads: map[uint32]*compactThread{}, calls: map[string]uint64{},
			orders: map[int16]uint64{}, results: map[string]uint64{}}
		c.procs[e.PID] = p
	}
	p.comm, p.cgroup = e.Comm, e.Cgroup
	begin := e.Time - min(r.Duration, e.Time)
	t := p.threads[e.TID]
	if t == nil {
		t = &compactThread{first: begin}
		p.threads[e.TID] = t
	}
	t.first, t.last = min(t.first, begin), max(t.last, e.Time)
	// A new stall unless the pass continues the thread's last one: the
	// same fault (its address says which, however long the allocator
	// waited between passes), or the same call begun right after it ended.
	same := t.lastEnd != 0 && r.Nr == t.lastNr && r.FaultAddr == t.lastAddr
	if same && r.FaultAddr == 0 && begin > t.lastEnd+compactSameStallNS {
		same = false
	}
	if !same {
		p.stalls++
		if r.Nr < 0 {
			p.inFaults++
		}
		t.stallNS = 0
	}
	t.lastEnd, t.lastNr, t.lastAddr = e.Time, r.Nr, r.FaultAddr
	t.stallNS += r.Duration
	p.maxStall = max(p.maxStall, t.stallNS)
	where := 0
	if r.Nr >= 0 {
		where = 1
		p.calls[event.SyscallName(c.arch, uint32(r.Nr))] += r.Duration
	}
	p.ns[r.What][where] += r.Duration
	p.passes[r.What]++
	p.orders[r.Order]++
	if r.What == event.ReclaimCompact {
		name := fmt.Sprintf("result_%d", r.Status)
		if r.Status >= 0 && int(r.Status) < len(compactResults) {
			name = compactResults[r.Status]
		}
		p.results[name]++
	}
	if r.FaultAddr != 0 {
		if p.lo == 0 || r.FaultAddr < p.lo {
			p.lo = r.FaultAddr
		}
		p.hi = max(p.hi, r.FaultAddr)
		// The mapping, read once, while the process is there: gone by the
		// report for a command that ended.
		if !p.read && c.host.canRead() {
			p.read = true
			p.regions = c.regionsOf(e.PID, r.FaultAddr)
		}
	}
}

// regionsOf describes the mapping of pid that holds addr, from its smaps:
// its range, size, whether it was advised MADV_HUGEPAGE (VmFlags hg) and
// how much of it huge pages back.
func (c *compaction) regionsOf(pid uint32, addr uint64) []string {
	b, err := c.smaps(pid)
	if err != nil {
		return nil
	}
	var out []string
	var cur string
	var lo, hi, huge uint64
	in := false
	flush := func(flags string) {
		if !in || len(out) >= compactRegionsMax {
			return
		}
		s := fmt.Sprintf("%#x-%#x (%s", lo, hi, units.Bytes(hi-lo))
		if strings.Contains(" "+flags+" ", " hg ") {
			s += ", MADV_HUGEPAGE"
		}
		if strings.Contains(" "+flags+" ", " nh ") {
			s += ", MADV_NOHUGEPAGE"
		}
		s += fmt.Sprintf(", %s in huge pages now", units.Bytes(huge))
		if cur != "" {
			s += ", " + cur
		}
		out = append(out, s+")")
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if a, z, ok := strings.Cut(f[0], "-"); ok && !strings.HasSuffix(f[0], ":") {
			l, err1 := strconv.ParseUint(a, 16, 64)
			h, err2 := strconv.ParseUint(z, 16, 64)
			if err1 == nil && err2 == nil {
				lo, hi, huge, in = l, h, 0, addr >= l && addr < h
				cur = ""
				if len(f) >= 6 {
					cur = f[5]
				}
				continue
			}
		}
		switch f[0] {
		case "AnonHugePages:":
			if len(f) >= 2 {
				n, _ := strconv.ParseUint(f[1], 10, 64)
				huge = n << 10
			}
		case "VmFlags:":
			flush(strings.Join(f[1:], " "))
			in = false
		}
	}
	return out
}

// compactGroup is the finding's subject: the processes of one program
// that stalled, with their figures added.
type compactGroup struct {
	comm     string
	pids     []uint32
	ns       [3][2]uint64
	passes   [3]uint64
	stalls   uint64
	inFaults uint64
	maxStall uint64
	calls    map[string]uint64
	orders   map[int16]uint64
	results  map[string]uint64
	lo, hi   uint64
	regions  []string
	threadNS uint64
	threads  int
}

func (g *compactGroup) total() uint64 {
	return g.ns[event.ReclaimCompact][0] + g.ns[event.ReclaimCompact][1] + g.ns[event.ReclaimDirect][0] + g.ns[event.ReclaimDirect][1]
}

// threadTime is the time of the threads of p that stalled, each from its
// first event or pass to its last: the time the stalls are a share of.
// Threads that never stalled are left out: a pool of idle threads must
// not dilute the faulting ones' share.
func (env *Env) compactThreadTime(p *compactProc) (uint64, int) {
	var ns uint64
	for tid, t := range p.threads {
		first, last := t.first, t.last
		if l := env.threads[tid]; l != nil && l.pid == p.pid {
			lf, ll := l.first, l.last
			if env.traced[1] > 0 {
				lf, ll = max(lf, env.traced[0]), min(ll, env.traced[1])
			}
			if ll > lf {
				first, last = min(first, lf), max(last, ll)
			}
		}
		if last > first {
			ns += last - first
		}
	}
	return ns, len(p.threads)
}

func (c *compaction) Findings(env *Env) []Finding {
	c.closest = nil
	groups := map[string]*compactGroup{}
	pids := make([]uint32, 0, len(c.procs))
	for pid := range c.procs {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	for _, pid := range pids {
		p := c.procs[pid]
		g := groups[p.comm]
		if g == nil {
			g = &compactGroup{comm: p.comm, calls: map[string]uint64{}, orders: map[int16]uint64{}, results: map[string]uint64{}}
			groups[p.comm] = g
		}
		g.pids = append(g.pids, pid)
		for w := range p.ns {
			g.ns[w][0] += p.ns[w][0]
			g.ns[w][1] += p.ns[w][1]
			g.passes[w] += p.passes[w]
		}
		g.stalls += p.stalls
		g.inFaults += p.inFaults
		g.maxStall = max(g.maxStall, p.maxStall)
		for k, v := range p.calls {
			g.calls[k] += v
		}
		for k, v := range p.orders {
			g.orders[k] += v
		}
		for k, v := range p.results {
			g.results[k] += v
		}
		if p.lo != 0 && (g.lo == 0 || p.lo < g.lo) {
			g.lo = p.lo
		}
		g.hi = max(g.hi, p.hi)
		if len(g.regions) == 0 {
			g.regions = p.regions
		}
		ns, n := env.compactThreadTime(p)
		g.threadNS += ns
		g.threads += n
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Finding
	for _, n := range names {
		if f, ok := c.finding(env, groups[n]); ok {
			out = append(out, f)
		}
	}
	return out
}

func (c *compaction) miss(g *compactGroup, closeness float64, short string) {
	if closeness == 0 || c.closest != nil && closeness <= c.closest.Closeness {
		return
	}
	c.closest = &Near{ID: CompactionStall, Closeness: closeness, Short: short,
		Subject: fmt.Sprintf("%s, %d stalls in direct compaction or reclaim", g.comm, g.stalls)}
}

// setting reads one of the host's memory settings: live from the host,
// else from the capture's header; "unknown" when neither has it.
func (c *compaction) setting(env *Env, key string) string {
	if c.host.canRead() {
		var v string
		switch key {
		case hostfacts.MetaTHPEnabled:
			v = hostfacts.THPSetting("enabled")
		case hostfacts.MetaTHPDefrag:
			v = hostfacts.THPSetting("defrag")
		default:
			v, _ = hostfacts.Sysctl(key)
		}
		if v != "" {
			return v
		}
	}
	if v := env.Host.Meta[key]; v != "" {
		return v
	}
	return "unknown"
}

func (c *compaction) finding(env *Env, g *compactGroup) (Finding, bool) {
	total := g.total()
	if total == 0 {
		return Finding{}, false
	}
	if total < compactInfoNS {
		c.miss(g, float64(total)/warnWaitNS, fmt.Sprintf("its threads stalled %s in direct compaction or reclaim; compaction-stall reports from %s, warns from %s",
			units.Duration(total), units.Duration(compactInfoNS), units.Duration(warnWaitNS)))
		return Finding{}, false
	}
	share := 0.0
	if g.threadNS > 0 {
		share = min(1, float64(total)/float64(g.threadNS))
	}
	sev := Info
	switch {
	case share < warnShare:
		c.miss(g, share/warnShare, fmt.Sprintf("the stalls took %.0f%% of its stalling threads' time; compaction-stall warns from %.0f%%", 100*share, 100*warnShare))
	case total < warnWaitNS:
		c.miss(g, float64(total)/warnWaitNS, fmt.Sprintf("its threads stalled %s; compaction-stall warns from %s", units.Duration(total), units.Duration(warnWaitNS)))
	case g.stalls < compactWarnRepeat:
		c.miss(g, float64(g.stalls)/compactWarnRepeat, fmt.Sprintf("%d stalls; compaction-stall warns from %d", g.stalls, compactWarnRepeat))
	default:
		sev = Warning
	}
	compactNS := g.ns[event.ReclaimCompact][0] + g.ns[event.ReclaimCompact][1]
	reclaimNS := g.ns[event.ReclaimDirect][0] + g.ns[event.ReclaimDirect][1]
	faultNS := g.ns[event.ReclaimCompact][0] + g.ns[event.ReclaimDirect][0]
	callNS := total - faultNS
	enabled, defrag := c.setting(env, hostfacts.MetaTHPEnabled), c.setting(env, hostfacts.MetaTHPDefrag)
	procs := make([]string, 0, min(len(g.pids), 8))
	for i, pid := range g.pids {
		if i == 8 {
			break
		}
		procs = append(procs, env.ProcName(pid, g.comm))
	}
	var orders []string
	var ordKeys []int
	for o := range g.orders {
		ordKeys = append(ordKeys, int(o))
	}
	sort.Ints(ordKeys)
	huge := 0
	for _, o := range ordKeys {
		orders = append(orders, fmt.Sprintf("order %d: %d passes", o, g.orders[int16(o)]))
		if o >= 9 {
			huge += int(g.orders[int16(o)])
		}
	}
	ev := map[string]any{
		"stall_ns": total, "stalls": g.stalls, "fault_stalls": g.inFaults, "max_stall_ns": g.maxStall,
		"compaction_ns": compactNS, "compaction_passes": g.passes[event.ReclaimCompact],
		"direct_reclaim_ns": reclaimNS, "direct_reclaim_passes": g.passes[event.ReclaimDirect],
		"in_faults_ns": faultNS, "in_syscalls_ns": callNS,
		"thread_ns": g.threadNS, "threads": g.threads,
		"share_of_thread_time": fmt.Sprintf("%.0f%%", 100*share),
		"orders":               orders, "processes": procs,
		"thp_enabled": enabled, "thp_defrag": defrag,
		"compaction_proactiveness": c.setting(env, hostfacts.MetaCompactionProactiveness),
		"watermark_scale_factor":   c.setting(env, hostfacts.MetaWatermarkScaleFactor),
		"min_free_kbytes":          c.setting(env, hostfacts.MetaMinFreeKbytes),
	}
	if len(g.results) > 0 {
		ev["compaction_results"] = g.results
	}
	if len(g.calls) > 0 {
		ev["syscalls_ns"] = g.calls
	}
	if g.lo != 0 {
		ev["fault_addresses"] = fmt.Sprintf("%#x-%#x", g.lo, g.hi)
	}
	if len(g.regions) > 0 {
		ev["regions"] = g.regions
	}
	who := procs[0]
	if len(g.pids) > 1 {
		who = fmt.Sprintf("%d processes (%s, …)", len(g.pids), procs[0])
	}
	what := "direct compaction"
	switch {
	case compactNS > 0 && reclaimNS > 0:
		what = "direct compaction and direct reclaim"
	case compactNS == 0:
		what = "direct reclaim"
	}
	where := "page faults"
	switch {
	case faultNS > 0 && callNS > 0:
		where = "page faults and syscalls (" + callList(g.calls) + ")"
	case faultNS == 0:
		where = "syscalls (" + callList(g.calls) + ")"
	}
	thp := huge > 0 && huge*2 >= int(g.passes[event.ReclaimCompact]+g.passes[event.ReclaimDirect])
	summary := fmt.Sprintf("%s stalled %d time(s) in %s inside %s, %s in all (up to %s a stall), %.0f%% of the time of the %d thread(s) that stalled.",
		who, g.stalls, what, where, units.Duration(total), units.Duration(g.maxStall), 100*share, g.threads)
	summary += " The page allocator found too little free memory, or none contiguous enough, and made the thread that asked compact or reclaim memory itself, on its own CPU time: sleep stacks do not show it."
	if thp {
		summary += fmt.Sprintf(" Most passes were for order-9 allocations, transparent huge pages; THP enabled=%s, defrag=%s.", enabled, defrag)
		switch defrag {
		case "always":
			summary += " With defrag=always every THP fault compacts synchronously when no 2 MiB block is free."
		case "madvise":
			summary += " With defrag=madvise, faults in regions advised MADV_HUGEPAGE compact synchronously when no huge-page-sized block is free."
		}
	}
	if len(g.regions) > 0 {
		summary += " The faults were in " + g.regions[0] + "."
	}
	var fix []string
	if compactNS > 0 {
		if thp {
			fix = append(fix, "Let THP faults fall back to 4 KiB pages instead of compacting: `echo defer+madvise > /sys/kernel/mm/transparent_hugepage/defrag` "+
				"(kcompactd compacts in the background; MADV_HUGEPAGE regions still compact directly) or `defer` (no fault compacts).",
				"Do not madvise(MADV_HUGEPAGE) short-lived or sparsely used regions (or set the allocator's THP option off, e.g. jemalloc thp:never); "+
					"for a program that needs huge pages, reserve them at boot (hugetlbfs) rather than compacting at each fault.")
		}
		fix = append(fix, "Compact ahead of the faults: raise vm.compaction_proactiveness (e.g. 40–60) so kcompactd keeps free memory in large blocks, "+
			"and vm.watermark_scale_factor so kswapd keeps more free memory.")
	}
	if reclaimNS > 0 {
		fix = append(fix, "Keep free memory above the watermark so allocations do not reclaim directly: raise vm.min_free_kbytes or vm.watermark_scale_factor "+
			"(kswapd starts earlier), or give the host memory headroom (fewer or smaller tenants, a limit on the page cache's writers).")
	}
	f := Finding{ID: CompactionStall, Severity: sev, Key: keyOf(g.comm, what), Syscalls: byValue(g.calls), Procs: env.refs(g.pids...),
		Title:    fmt.Sprintf("%s stalled in %s inside %s: %d stall(s), %s in all", g.comm, what, where, g.stalls, units.Duration(total)),
		Summary:  summary,
		Evidence: ev, Fix: strings.Join(fix, " "), Score: float64(total)}
	return f, true
}
