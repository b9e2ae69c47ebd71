package doctor

import (
	"fmt"
	"math/bits"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/units"
)

// The finding it reports: threads runnable but not running, waiting for a
// CPU another task holds. Named for what the user lost (time waiting for a
// CPU), not for the kernel's structure (the run queue).
const CPUWait ID = "cpu-wait"

func init() {
	register(registration{ids: []ID{CPUWait},
		build: func(h *Host) Detector { return newCPUWaits(h.Arch) }})
}

// cpuWaitLongNS is the kernel's bar for a wait told on its own, with who
// had the CPU (RUNQ_LONG_NS in bpf/runq.h: more than a scheduler slice
// anywhere, 1.4 ms on 2 CPUs, 2.8 ms on 8 or more).
const cpuWaitLongNS = 4_000_000

// cpuWaitRepeat: a warning needs this many long waits. One 4 ms wait is a
// hiccup; five mean the thread was kept from its CPU past a slice again
// and again, which a latency-sensitive loop feels as late wake-ups each
// time.
const cpuWaitRepeat = 5

// cpuWaitShare: the share of the time a process's threads wanted a CPU
// (on one, or runnable without one) that they spent waiting with another
// task on it. The doctor's common bar (warnShare): a quarter of that time
// lost, given back, makes them a third faster. For a loop that sleeps and
// wakes, the time it wanted a CPU is its work plus its waits: one that
// works 50 µs and waits 5 ms a turn is at 99%.
const cpuWaitShare = warnShare

// cpuWaitUnfair: of the long waits, the share that must have a reason
// beyond fair sharing (the waiter woken rather than preempted, the holder
// at a higher priority, the waiter pinned to fewer CPUs than the host has)
// for a warning. A majority: then the reason is the rule of these waits,
// not an accident of a few.
const cpuWaitUnfair = 0.5

// cpuWaitHoldersMax bounds the holders kept per process, and cpuWaitProcsMax
// the processes followed: about 100 bytes an entry.
const (
	cpuWaitHoldersMax = 64
	cpuWaitProcsMax   = 1 << 14
)

type cpuHolder struct {
	pid, tid  uint32
	comm      string
	cgroup    uint64
	group     uint64
	prio      uint8
	policy    uint8
	allowed   uint64
	nrAllowed uint32
	waits     uint64 // long waits it ran during
	ns        uint64 // of those waits, ns it ran
}

// cpuWaiter is what the events said of one process's waits.
type cpuWaiter struct {
	pid      uint32
	comm     string
	cgroup   uint64
	sum      event.CPUWaitSum // its threads' totals, from summaries
	threads  map[uint32]bool
	long     uint64 // waits of at least cpuWaitLongNS while other tasks ran on the CPU
	longNS   uint64
	longIdle uint64 // long waits while the CPU sat idle more than others ran
	woken    uint64 // of long, the ones that began at a wake-up
	outrank  uint64 // of long, the ones where tasks that outrank it ran at least half the time others of its scheduling group did
	pinned   uint64 // of long, the ones where the waiter may run on fewer CPUs than the host has
	queued   uint64 // sum of the run queue's length as each long wait ended
	inCall   map[string]uint64
	prio     uint8
	policy   uint8
	group    uint64
	allowed  uint64
	nrAllow  uint32
	holders  map[uint32]*cpuHolder // by holder tid
	maxWait  uint64
}

type cpuWaits struct {
	procs map[uint32]*cpuWaiter
	// cpus is the most CPUs any task seen may run on: the host's CPUs
	// as far as the events know (an unpinned task may run on all).
	cpus    uint32
	arch    event.Arch
	closest *Near
}

func newCPUWaits(arch event.Arch) *cpuWaits {
	return &cpuWaits{procs: map[uint32]*cpuWaiter{}, arch: arch}
}

func (c *cpuWaits) near(*Env) *Near { return c.closest }

func (c *cpuWaits) proc(e *event.Event) *cpuWaiter {
	p := c.procs[e.PID]
	if p == nil {
		if len(c.procs) >= cpuWaitProcsMax {
			return nil
		}
		p = &cpuWaiter{pid: e.PID, threads: map[uint32]bool{}, inCall: map[string]uint64{}, holders: map[uint32]*cpuHolder{}}
		c.procs[e.PID] = p
	}
	p.comm, p.cgroup = e.Comm, e.Cgroup
	return p
}

func (c *cpuWaits) Observe(e *event.Event) {
	if e.Kind != event.KindCPUWait {
		return
	}
	w := &e.CPUWait
	// The host's CPUs, as far as the events tell: an unpinned task may
	// use them all, a mask names CPUs that exist, and so does the CPU an
	// event came from (CPUs are numbered from 0, as good as always
	// without gaps).
	c.cpus = max(c.cpus, w.Task.NrAllowed, uint32(bits.Len64(w.Task.Allowed)), e.CPU+1)
	for i := range w.Held {
		c.cpus = max(c.cpus, w.Held[i].NrAllowed, uint32(bits.Len64(w.Held[i].Allowed)))
	}
	p := c.proc(e)
	if p == nil {
		return
	}
	p.threads[e.TID] = true
	p.prio, p.policy, p.allowed, p.nrAllow, p.group = w.Task.Prio, w.Task.Policy, w.Task.Allowed, w.Task.NrAllowed, w.Task.Group
	if w.Summary {
		p.sum.Add(&w.Sum)
		return
	}
	p.maxWait = max(p.maxWait, w.Wait)
	// Nice decides only among the tasks of one scheduling group (a
	// cgroup's, or with autogroups a session's): groups share a CPU by
	// their weights first. A real-time task outranks every normal one
	// wherever it is.
	var held, above, peers uint64
	for i := range w.Held {
		h := &w.Held[i]
		held += h.NS
		if h.Group != w.Task.Group && !realtime(h.Policy) {
			continue
		}
		peers += h.NS
		if outranks(h, &w.Task) {
			above += h.NS
		}
	}
	if w.IdleNS >= held {
		// The CPU sat idle for more of the wait than any task ran on
		// it: not a queue behind another (a throttled cgroup's threads
		// wait so, for quota: cgroup-limit's).
		p.longIdle++
		return
	}
	p.long++
	p.longNS += w.Wait
	p.queued += uint64(w.NrRunning)
	if w.Woken {
		p.woken++
	}
	if above > 0 && 2*above >= peers {
		p.outrank++
	}
	if w.Task.NrAllowed > 0 && w.Task.NrAllowed < c.cpus {
		p.pinned++
	}
	if w.Nr >= 0 {
		p.inCall[event.SyscallName(c.arch, uint32(w.Nr))]++
	}
	for i := range w.Held {
		t := &w.Held[i]
		h := p.holders[t.TID]
		if h == nil {
			if len(p.holders) >= cpuWaitHoldersMax {
				continue
			}
			h = &cpuHolder{}
			p.holders[t.TID] = h
		}
		h.pid, h.tid, h.comm, h.cgroup, h.group = t.PID, t.TID, t.Comm, t.Cgroup, t.Group
		h.prio, h.policy, h.allowed, h.nrAllowed = t.Prio, t.Policy, t.Allowed, t.NrAllowed
		h.waits++
		h.ns += t.NS
	}
}

// outranks says the scheduler favours h over t: a real-time or deadline
// task over a normal one, a lower real-time prio number, or for the
// normal policies a lower nice (prio 120 + nice). SCHED_IDLE (5) yields
// to everything.
func outranks(h, t *event.SchedTask) bool {
	hr, tr := realtime(h.Policy), realtime(t.Policy)
	switch {
	case hr != tr:
		return hr
	case t.Policy == schedIdle && h.Policy != schedIdle:
		return true
	}
	return h.Prio < t.Prio
}

const (
	schedFIFO     = 1
	schedRR       = 2
	schedIdle     = 5
	schedDeadline = 6
)

func realtime(policy uint8) bool {
	return policy == schedFIFO || policy == schedRR || policy == schedDeadline
}

// schedName says a task's policy and priority as chrt and nice do.
func schedName(policy, prio uint8) string {
	switch policy {
	case schedFIFO:
		return fmt.Sprintf("SCHED_FIFO priority %d", 99-int(prio))
	case schedRR:
		return fmt.Sprintf("SCHED_RR priority %d", 99-int(prio))
	case schedDeadline:
		return "SCHED_DEADLINE"
	}
	name := map[uint8]string{0: "SCHED_OTHER", 3: "SCHED_BATCH", 5: "SCHED_IDLE", 7: "SCHED_EXT"}[policy]
	if name == "" {
		name = fmt.Sprintf("policy %d", policy)
	}
	return fmt.Sprintf("nice %d, %s", int(prio)-120, name)
}

// cpuList says a CPU mask as Cpus_allowed_list does ("1", "0-3,6"), for
// the first 64 CPUs.
func cpuList(mask uint64) string {
	var parts []string
	for i := 0; i < 64; {
		if mask&(1<<i) == 0 {
			i++
			continue
		}
		j := i
		for j+1 < 64 && mask&(1<<(j+1)) != 0 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprint(i))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", i, j))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// cpuWaitGroup is the finding's subject: the processes of one program
// that waited, with their counts added.
type cpuWaitGroup struct {
	comm    string
	verdict string
	procs   []*cpuWaiter
	sum     event.CPUWaitSum
	long    uint64
	longNS  uint64
	idle    uint64
	woken   uint64
	outrank uint64
	pinned  uint64
	queued  uint64
	maxWait uint64
	inCall  map[string]uint64
	holders map[uint32]*cpuHolder // by holder pid, added over its threads
}

func (c *cpuWaits) Findings(env *Env) []Finding {
	c.closest = nil
	groups := map[string]*cpuWaitGroup{}
	pids := make([]uint32, 0, len(c.procs))
	for pid := range c.procs {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	for _, pid := range pids {
		p := c.procs[pid]
		// Processes of one program are one finding when their waits
		// have the same cause: a program's hogs and its victims are not.
		k := p.comm + "|" + p.verdict()
		g := groups[k]
		if g == nil {
			g = &cpuWaitGroup{comm: p.comm, verdict: p.verdict(), inCall: map[string]uint64{}, holders: map[uint32]*cpuHolder{}}
			groups[k] = g
		}
		g.procs = append(g.procs, p)
		g.sum.Add(&p.sum)
		g.long += p.long
		g.longNS += p.longNS
		g.idle += p.longIdle
		g.woken += p.woken
		g.outrank += p.outrank
		g.pinned += p.pinned
		g.queued += p.queued
		g.maxWait = max(g.maxWait, p.maxWait)
		for k, v := range p.inCall {
			g.inCall[k] += v
		}
		for _, h := range p.holders {
			gh := g.holders[h.pid]
			if gh == nil {
				cp := *h
				cp.waits, cp.ns = 0, 0
				gh = &cp
				g.holders[h.pid] = gh
			}
			gh.waits += h.waits
			gh.ns += h.ns
			gh.prio = min(gh.prio, h.prio)
		}
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

// verdict says what the long waits of p had most in common, each part
// when it holds for a majority of them (cpuWaitUnfair): "outranked" (tasks
// of a higher priority ran through most of the wait), "woken" (the wait
// began at a wake-up: the thread was woken for work it could not start,
// as a latency-sensitive loop is), "pinned" (the thread may run on fewer
// CPUs than the host has). "" is none of them: preempted among equals on
// CPUs it could all use, the scheduler's fair share of too few CPUs.
func (p *cpuWaiter) verdict() string {
	if p.long == 0 {
		return ""
	}
	frac := func(n uint64) float64 { return float64(n) / float64(p.long) }
	var v []string
	if frac(p.outrank) >= cpuWaitUnfair {
		v = append(v, "outranked")
	}
	if frac(p.woken) >= cpuWaitUnfair {
		v = append(v, "woken")
	}
	if frac(p.pinned) >= cpuWaitUnfair {
		v = append(v, "pinned")
	}
	return strings.Join(v, "+")
}

func (c *cpuWaits) miss(g *cpuWaitGroup, closeness float64, short string) {
	if closeness == 0 || c.closest != nil && closeness <= c.closest.Closeness {
		return
	}
	c.closest = &Near{ID: CPUWait, Closeness: closeness, Short: short,
		Subject: fmt.Sprintf("%s, %d waits of at least %s for a CPU another task held", g.comm, g.long, units.Duration(cpuWaitLongNS))}
}

func (c *cpuWaits) finding(env *Env, g *cpuWaitGroup) (Finding, bool) {
	s := &g.sum
	waited := s.Waited()
	// The waits that ended on an idle CPU were not a queue behind
	// another task: throttling (cgroup-limit's), or a migration.
	contended := waited - min(s.WaitIdle, waited)
	// Summaries are lost only for a thread's last quarter second before
	// sysray stops; its long waits are whole: they bound the waits from
	// below.
	contended = max(contended, g.longNS)
	wanted := s.Run + waited
	if wanted < contended {
		wanted = contended
	}
	if wanted == 0 || g.long == 0 {
		return Finding{}, false
	}
	share := float64(contended) / float64(wanted)
	if share < cpuWaitShare {
		c.miss(g, share/cpuWaitShare, fmt.Sprintf("its threads waited %.0f%% of the time they wanted a CPU; cpu-wait reports from %.0f%%", 100*share, 100*cpuWaitShare))
		return Finding{}, false
	}
	if contended < warnWaitNS {
		c.miss(g, float64(contended)/warnWaitNS, fmt.Sprintf("its threads waited %s for a CPU; cpu-wait reports from %s", units.Duration(contended), units.Duration(warnWaitNS)))
		return Finding{}, false
	}
	frac := func(n uint64) float64 { return float64(n) / float64(g.long) }
	// The process that waited most speaks for the group.
	p := g.procs[0]
	for _, q := range g.procs {
		if q.longNS > p.longNS {
			p = q
		}
	}
	var why []string
	// Among equals on CPUs it could all use, a thread has its fair share
	// of too few CPUs, woken or preempted: more work than CPUs (a
	// parallel build; a host busy with other tenants), the scheduler
	// doing its job; no finding. Pinned, or outranked, it is one: the
	// mask kept it from the other CPUs, or the scheduler favoured the
	// tasks it waited for. A warning needs the waiter to feel it: the
	// tasks that ran outrank it, or it was woken for work (a
	// latency-sensitive loop) and pinned with them.
	outranked := strings.Contains(g.verdict, "outranked")
	woken := strings.Contains(g.verdict, "woken")
	pinnedV := strings.Contains(g.verdict, "pinned")
	if !outranked && !pinnedV {
		c.miss(g, cpuWaitUnfair, fmt.Sprintf("its threads waited %.0f%% of the time they wanted a CPU, but among equals on CPUs "+
			"they could all use (a fair share of too few CPUs); cpu-wait reports waits behind tasks that outrank the waiter, or of a pinned waiter", 100*share))
		return Finding{}, false
	}
	unfair := outranked || woken && pinnedV
	// Pinned together: the waiter may use fewer CPUs than the host has,
	// and the holders' masks cover its CPUs.
	if frac(g.pinned) >= cpuWaitUnfair {
		var with []string
		for _, h := range sortedHolders(g.holders) {
			if h.allowed&p.allowed != 0 && h.nrAllowed < c.cpus {
				with = append(with, fmt.Sprintf("%s[%d] (CPUs %s, %s)", h.comm, h.pid, cpuList(h.allowed), schedName(h.policy, h.prio)))
			}
		}
		text := fmt.Sprintf("its affinity mask lets it run only on CPU %s of the %d CPUs its events saw", cpuList(p.allowed), c.cpus)
		if len(with) > 0 {
			text += ", and " + strings.Join(cwFirst(with, 4), ", ") + " are pinned there too: they take turns on it while other CPUs may sit idle"
		} else {
			text += ", where the tasks above run too: the other CPUs cannot take it"
		}
		why = append(why, text)
	}
	if frac(g.outrank) >= cpuWaitUnfair {
		top := sortedHolders(g.holders)[0]
		for _, h := range sortedHolders(g.holders) {
			if h.group == p.group && h.prio < p.prio || realtime(h.policy) {
				top = h
				break
			}
		}
		text := fmt.Sprintf("the tasks of its scheduling group (cgroup, or session with autogroups) that ran meanwhile outrank it: %s[%d] at %s against its %s", top.comm, top.pid, schedName(top.policy, top.prio), schedName(p.policy, p.prio))
		if !realtime(top.policy) && !realtime(p.policy) && top.prio < p.prio {
			text += fmt.Sprintf(" (the scheduler gives each of them %.1f times its share of the CPU)", niceWeight(top.prio)/niceWeight(p.prio))
		}
		why = append(why, text)
	}
	meanQueue := float64(g.queued) / float64(g.long)
	if meanQueue >= 2 {
		why = append(why, fmt.Sprintf("the CPU's run queue held %.1f tasks on average as its long waits ended, itself included: more threads runnable than that CPU could run", meanQueue))
	}
	sev := Info
	if share >= cpuWaitShare && contended >= warnWaitNS && g.long >= cpuWaitRepeat && unfair {
		sev = Warning
	}
	var procs []string
	var refs []uint32
	var threads int
	for _, p := range g.procs {
		procs = append(procs, env.ProcName(p.pid, p.comm))
		refs = append(refs, p.pid)
		threads += len(p.threads)
	}
	who := strings.Join(cwFirst(procs, 4), ", ")
	if len(procs) > 1 {
		who = fmt.Sprintf("%d processes (%s)", len(procs), who)
	}
	var held []string
	var heldEv []map[string]any
	for _, h := range cwFirst(sortedHolders(g.holders), 5) {
		name := env.ProcName(h.pid, h.comm)
		if h.pid == p.pid {
			name += " (its own thread)"
		}
		cg := ""
		if env.Host.Container != nil {
			if ct := env.Host.Container(h.pid, h.cgroup); ct != "" {
				cg = ", container " + ct
			}
		}
		held = append(held, fmt.Sprintf("%s, %s, CPUs %s%s: ran %s of them", name, schedName(h.policy, h.prio), cpuList(h.allowed), cg, units.Duration(h.ns)))
		hv := map[string]any{"pid": h.pid, "comm": h.comm, "prio": h.prio, "policy": h.policy,
			"cpus": cpuList(h.allowed), "cgroup": h.cgroup, "long_waits": h.waits, "long_wait_ns": h.ns}
		// A realtime task has a priority as chrt says it (schedName's
		// words), and no nice value: migration/1 at prio 0 is SCHED_FIFO
		// priority 99, not nice -120.
		if h.policy == schedFIFO || h.policy == schedRR {
			hv["rt_priority"] = 99 - int(h.prio)
		} else if !realtime(h.policy) {
			hv["nice"] = int(h.prio) - 120
		}
		heldEv = append(heldEv, hv)
		refs = append(refs, h.pid)
	}
	how := fmt.Sprintf("%d of the %d long waits began at a wake-up (the thread had work to start and no CPU to start it on), %d at a preemption",
		g.woken, g.long, g.long-g.woken)
	calls := byValue(g.inCall)
	in := ""
	if len(calls) > 0 {
		in = fmt.Sprintf(" Inside syscalls: %s of the waits (%s).", units.Duration(s.WaitSyscall), strings.Join(cwFirst(calls, 3), ", "))
	}
	reason := "Why: " + strings.Join(why, "; ") + "."
	if len(why) == 0 {
		reason = fmt.Sprintf("No task it waited for was pinned with it or ranked above it: the CPUs were shared fairly among more runnable threads than the %d CPUs could run.", c.cpus)
	}
	if !unfair {
		reason += " Its waits began at preemptions and the tasks that ran ranked no higher: a warning needs tasks that outrank it, " +
			"or a thread woken for work pinned with them."
	}
	title := fmt.Sprintf("%s waited for a CPU %.0f%% of the time it was ready to run (%s; %d waits of %s or more, the longest %s)",
		who, 100*share, units.Duration(contended), g.long, units.Duration(cpuWaitLongNS), units.Duration(g.maxWait))
	summary := fmt.Sprintf("Its threads were runnable but not running for %s of the %s they wanted a CPU, with another task on the CPU "+
		"(not counted: %s of waits while the CPU sat idle more than others ran on it, as a throttled cgroup's threads wait, which cgroup-limit reports). %s.%s "+
		"Who ran on the CPU during its long waits: %s. %s",
		units.Duration(contended), units.Duration(wanted), units.Duration(min(s.WaitIdle, waited)), how, in,
		strings.Join(held, "; "), reason)
	fix := cpuWaitFix(frac(g.pinned) >= cpuWaitUnfair, frac(g.outrank) >= cpuWaitUnfair)
	f := Finding{
		ID:       CPUWait,
		Key:      keyOf(g.comm, g.verdict),
		Procs:    env.refs(refs...),
		Syscalls: calls,
		Severity: sev,
		Title:    title,
		Summary:  summary,
		Fix:      fix,
		Score:    float64(contended),
		Evidence: map[string]any{"processes": procs, "threads": threads, "waited_ns": contended, "wanted_ns": wanted,
			"waited_ns_is":         "at least: a thread's last quarter second before sysray stopped is not summed",
			"share_of_wanted_time": share, "run_ns": s.Run, "wait_woken_ns": s.WaitWoken, "wait_preempted_ns": s.WaitPreempted,
			"wait_idle_cpu_ns": s.WaitIdle, "wait_in_syscalls_ns": s.WaitSyscall, "waits": s.Waits, "wait_hist": s.Hist,
			"long_waits": g.long, "long_wait_ns": g.longNS, "long_waits_idle_cpu": g.idle, "long_waits_woken": g.woken,
			"long_waits_outranked": g.outrank, "long_waits_pinned": g.pinned, "max_wait_ns": g.maxWait,
			"mean_run_queue": meanQueue, "cpus": c.cpus, "holders": heldEv, "reasons": why},
	}
	return f, true
}

// niceWeight approximates the kernel's sched_prio_to_weight: 1024 at nice
// 0, about 1.25 times more for each step down.
func niceWeight(prio uint8) float64 {
	w := 1024.0
	for n := int(prio) - 120; n > 0; n-- {
		w /= 1.25
	}
	for n := int(prio) - 120; n < 0; n++ {
		w *= 1.25
	}
	return w
}

func cpuWaitFix(pinned, outranked bool) string {
	var fix []string
	if pinned {
		fix = append(fix, "give the latency-sensitive threads CPUs of their own: widen their affinity (taskset -p -c LIST PID) "+
			"or move the tasks pinned with them elsewhere (taskset, a cpuset cgroup's cpuset.cpus)")
	}
	if outranked {
		fix = append(fix, "undo the priority that favours the others: raise the waiter's (renice, or chrt -f for a real-time loop) "+
			"or lower theirs (renice +N, SCHED_BATCH/SCHED_IDLE for batch work, or a lower cpu.weight for their cgroup)")
	}
	fix = append(fix, "or run fewer runnable threads than CPUs (fewer workers or jobs), or give the process a larger share "+
		"with cpu.weight when it shares the host with others")
	text := strings.Join(fix, "; ")
	return strings.ToUpper(text[:1]) + text[1:] + "."
}

func sortedHolders(m map[uint32]*cpuHolder) []*cpuHolder {
	out := make([]*cpuHolder, 0, len(m))
	for _, h := range m {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].ns > out[j].ns || out[i].ns == out[j].ns && out[i].pid < out[j].pid
	})
	if len(out) == 0 {
		out = append(out, &cpuHolder{prio: 120})
	}
	return out
}

func cwFirst[T any](s []T, n int) []T {
	if len(s) > n {
		return s[:n]
	}
	return s
}
