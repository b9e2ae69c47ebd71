package doctor

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/units"
)

// The findings it reports.
const (
	SlowSyscall       ID = "slow-syscall"
	AuditBacklogStall ID = "audit-backlog-stall"
)

func init() {
	register(registration{ids: []ID{SlowSyscall, AuditBacklogStall},
		build: func(h *Host) Detector {
			s := newSlow(h.Arch, h.Live)
			s.bar = h.slowBar()
			return s
		}})
}

// slow groups syscalls that took long by where they slept (with --stacks,
// the kernel stack; otherwise the syscall). Calls that exist to wait (poll,
// a blocking read of a pipe, nanosleep, futex) are left out: waiting is
// their job. Syscalls that slept in the audit subsystem get their own
// finding, audit-backlog-stall (detect_slow_audit.go), which also reads the kernel's
// audit counters.
type slow struct {
	arch   event.Arch
	bar    uint64 // ns: a call this long is slow (Host.slowBar)
	groups map[string]*slowGroup
	audit  *auditStall
	// stacked: some slow call carried where it slept, so sleep tracking
	// was on and a slow call without a switch-out ran on the CPU.
	stacked   bool
	unstacked []unstackedCall
	counts    []uint64 // calls by syscall number, fast or slow (detect_slow_auditinfer.go)
	// under is the longest call under bar that does not wait by
	// design: the nearest miss (near).
	under struct {
		ns      uint64
		nr, pid uint32
		comm    string
		example string
	}
}

type slowGroup struct {
	where   string
	stack   []string
	calls   map[string]uint64 // syscall name → count
	n       uint64
	totalNS uint64
	maxNS   uint64
	// maxOwnNS: the longest call less its time waiting for a CPU, which is
	// the host's load, not the call's; the warning's measure.
	maxOwnNS uint64
	sleptNS  uint64 // blocked
	queuedNS uint64 // runnable, waiting for a CPU
	example  string
	wakers   map[string]uint64
	procs    map[uint32]string
	nonblock uint64 // calls made with a non-blocking flag that still slept
}

// A call asleep waiting for the storage device is never more than info:
// the wait is the device's latency, not something the program did wrong.
// A shared virtual disk answers a cold read or a synchronous discard in
// 100 ms to over a second under ordinary load (the benign corpus saw a
// 107 ms discard, 520 ms reads of a cold Go build cache and a 1.08 s
// getdents64), and no rule on the call's length alone tells that apart
// from a failing disk; the device's own statistics would.

// live no longer matters here: the audit status comes from Host.Audit.
func newSlow(arch event.Arch, live bool) *slow {
	return &slow{arch: arch, bar: slowMin, groups: map[string]*slowGroup{}, audit: &auditStall{arch: arch}}
}

func (s *slow) Observe(e *event.Event) {
	if e.Kind != event.KindSyscall {
		return
	}
	sc := &e.Syscall
	if int(sc.Nr) < 1<<12 {
		if int(sc.Nr) >= len(s.counts) {
			s.counts = append(s.counts, make([]uint64, int(sc.Nr)+1-len(s.counts))...)
		}
		s.counts[sc.Nr]++
	}
	if sc.Latency < s.bar {
		if sc.Latency > s.under.ns && !sc.Unfinished {
			if name := event.SyscallName(s.arch, sc.Nr); !event.Is(name, event.MayWait) && !event.Is(name, event.Waits) && !vforkCall(name, sc) {
				s.under.ns, s.under.nr, s.under.pid, s.under.comm = sc.Latency, sc.Nr, e.PID, e.Comm
				s.under.example = event.FormatSyscall(s.arch, sc)
			}
		}
		return
	}
	if len(sc.Sleeps) > 0 {
		s.stacked = true
	}
	if sc.Unfinished {
		return
	}
	name := event.SyscallName(s.arch, sc.Nr)
	if cause, _, _ := bioCause(name, sc); cause != "" {
		return // a call that did not ask for I/O, waiting for it: blocked-in-kernel-io's
	}
	if ownsMmapLock(sc) {
		return // mmap-lock-contention's
	}
	if _, memcg := memcgReclaim(sc); memcg {
		return // a cgroup at its memory limit: cgroup-limit's (detect_cgroup.go)
	}
	key, stack := name, []string(nil)
	isAudit, waiting := false, event.Is(name, event.MayWait)
	var blocked, queued uint64 // ns asleep, and ns runnable without a CPU
	var firstBlocked *event.Sleep
	if len(sc.Sleeps) > 0 {
		// The stacks decide, when there are stacks: a read of a pipe waits
		// by design, a read stuck in I/O or on a lock does not.
		stacked, waits := true, true
		for i := range sc.Sleeps {
			sl := &sc.Sleeps[i]
			if hasFrame(sl.Stack, []string{"audit_log_start"}) {
				isAudit = true
			}
			if !named(sl.Stack) {
				// No frame has a name (kernel symbols hidden from the
				// reader): the stack cannot tell a wait from a stall.
				stacked = false
			}
			if preempted(sl) {
				queued += sl.Duration
				continue
			}
			blocked += sl.Duration
			if firstBlocked == nil {
				firstBlocked = sl
			}
			if len(sl.Stack) > 0 && !hasFrame(sl.Stack, waitFrames) && !vforkWait(sl.Stack) {
				waits = false
			}
		}
		// The kernel's count has the wait for a CPU in places the sleep
		// slots did not keep.
		queued = max(queued, sc.Queued)
		if firstBlocked != nil {
			key, stack = where(firstBlocked.Stack)
			if key == "" {
				key = name
			}
		}
		if stacked {
			waiting = waits
			// A call that spent the threshold on the CPU is slow however
			// it slept or queued on the way, and where it did says nothing
			// of why; one that never blocked is running, whatever its name.
			// A call mostly on the CPU joins the running calls of its
			// syscall, wherever it blocked for a moment.
			onCPU := sc.Latency - min(blocked+queued, sc.Latency)
			if firstBlocked == nil || waits && onCPU >= s.bar || !waits && blocked*2 < sc.Latency {
				waiting = false
				key, stack = name, nil
			}
		}
	} else if !isAudit && !event.Is(name, event.Waits) && !(event.Is(name, event.MayWait) && interrupted(sc.Ret)) {
		// (A wait a signal interrupted comes back without its sleeps: it
		// is held until the thread's next call, and emitted from there.)
		// No switch-out at all: with sleep tracking on it ran on the CPU
		// from entry to exit, a read of 64 MiB of /dev/urandom as much as
		// a getrandom. Whether tracking was on, the report knows.
		if len(s.unstacked) < 10000 {
			s.unstacked = append(s.unstacked, unstackedCall{pid: e.PID, comm: e.Comm, at: e.Time, sc: *sc})
		}
		return
	}
	if (waiting || event.Is(name, event.Waits)) && !isAudit {
		return
	}
	s.add(e.PID, e.Comm, sc, name, key, stack, isAudit, blocked, queued)
}

// unstackedCall is a slow call that never switched out: running if sleep
// tracking was on, unknown (and left to event.MayWait) if not.
type unstackedCall struct {
	pid  uint32
	comm string
	at   uint64
	sc   event.Syscall
}

func (s *slow) add(pid uint32, comm string, sc *event.Syscall, name, key string, stack []string, isAudit bool, blocked, queued uint64) {
	var g *slowGroup
	if isAudit {
		g = s.audit.group(key, stack)
	} else {
		g = s.groups[key]
		if g == nil {
			g = newGroup(key, stack)
			s.groups[key] = g
		}
	}
	g.calls[name]++
	g.n++
	g.totalNS += sc.Latency
	g.maxOwnNS = max(g.maxOwnNS, sc.Latency-min(queued, sc.Latency))
	g.sleptNS += blocked
	g.queuedNS += queued
	if sc.Latency > g.maxNS {
		g.maxNS = sc.Latency
		approx := ""
		if sc.Approx {
			approx = "~"
		}
		g.example = event.FormatSyscall(s.arch, sc) + fmt.Sprintf(" <%s%s>", approx, units.Duration(sc.Latency))
		if len(stack) > 0 {
			g.stack = stack
		}
	}
	if nonBlocking(s.arch, sc) {
		g.nonblock++
	}
	for _, sl := range sc.Sleeps {
		if sl.WakerComm != "" && len(g.wakers) < 8 {
			g.wakers[fmt.Sprintf("%s[%d]", sl.WakerComm, sl.WakerPID)]++
		}
	}
	if len(g.procs) < 8 {
		g.procs[pid] = comm
	}
}

func newGroup(key string, stack []string) *slowGroup {
	return &slowGroup{where: key, stack: stack, calls: map[string]uint64{}, wakers: map[string]uint64{}, procs: map[uint32]string{}}
}

func (s *slow) near(env *Env) *Near {
	u := &s.under
	if u.ns == 0 {
		return nil
	}
	return &Near{ID: SlowSyscall, Closeness: float64(u.ns) / float64(s.bar),
		Subject: fmt.Sprintf("%s in %s: %s", event.SyscallName(s.arch, u.nr), env.ProcName(u.pid, u.comm), u.example),
		Short: fmt.Sprintf("the slowest call that does not wait by design took %s; slow-syscall reports calls from %s",
			units.Duration(u.ns), units.Duration(s.bar))}
}

func (s *slow) Findings(env *Env) []Finding {
	if !s.stacked {
		if facts := readAuditFacts(env.Host.Meta); facts != nil {
			s.unstacked = s.inferAudit(facts, s.unstacked)
		}
	}
	for _, u := range s.unstacked {
		name := event.SyscallName(s.arch, u.sc.Nr)
		if !s.stacked && (event.Is(name, event.MayWait) || vforkCall(name, &u.sc)) {
			continue // without stacks, a read may have waited by design
		}
		s.add(u.pid, u.comm, &u.sc, name, name, nil, false, 0, 0)
	}
	s.unstacked = nil
	out := s.audit.Findings(env)
	unknown := s.unknownCause(env)
	for _, g := range s.groups {
		sev := Info
		device := hasName(g.stack, deviceFrames)
		if g.maxOwnNS >= slowWarn && !device {
			sev = Warning
		}
		f := Finding{ID: SlowSyscall, Severity: sev, Key: keyOf(g.where), Syscalls: byValue(g.calls),
			Title: fmt.Sprintf("%d slow %s, up to %s, sleeping in %s", g.n, callList(g.calls), units.Duration(g.maxNS), orDash(g.where)),
			Summary: fmt.Sprintf("%d syscalls (%s) took %s in all and up to %s each%s. These are not calls that wait by design, "+
				"so the time is a stall the program did not ask for.", g.n, callList(g.calls), units.Duration(g.totalNS), units.Duration(g.maxNS),
				sleptWhere(g)),
			Evidence: g.evidence(env),
			Fix:      "Follow the stack: it names the kernel path the thread waited in (a lock, I/O, memory reclaim). Record with --stacks if it is missing.",
			Score:    float64(g.totalNS)}
		if device && g.sleptNS*2 >= g.totalNS {
			f.Title = fmt.Sprintf("%d slow %s, up to %s, waiting for the storage device in %s", g.n, callList(g.calls),
				units.Duration(g.maxNS), orDash(g.where))
			f.Summary = fmt.Sprintf("%d syscalls (%s) took %s in all and up to %s each%s: the data was not in the page cache, "+
				"or the call asked the device to write, flush or discard, and the device took this long to answer. "+
				"The program did ordinary I/O; the time is the device's latency.", g.n, callList(g.calls),
				units.Duration(g.totalNS), units.Duration(g.maxNS), sleptWhere(g))
			f.Fix = "Check the device's latency while this runs (`iostat -x 1`: r_await, w_await, %util). " +
				"If it is high, the device is slow or shared: read less from it cold (a warm cache, fewer files), " +
				"move the data to a faster or less busy device, or, for discards, mount without `discard` and run fstrim periodically."
		}
		if unknown != "" {
			f.Title = fmt.Sprintf("%d slow %s, up to %s, cause unknown from this capture", g.n, callList(g.calls), units.Duration(g.maxNS))
			f.Summary = fmt.Sprintf("%d syscalls (%s) took %s in all and up to %s each. %s whether they ran on the CPU "+
				"or slept, and where, is not in it.", g.n, callList(g.calls), units.Duration(g.totalNS), units.Duration(g.maxNS), unknown)
			f.Fix = "Record again with --stacks (`sysray record --stacks -w FILE -- CMD`), or run `sysray doctor -- CMD` live: " +
				"the sleep stacks say where the time went."
			f.Evidence["cause"] = "unknown: no sleep records"
		} else if g.sleptNS*2 < g.totalNS {
			// Mostly on the CPU: the kernel was working, not waiting.
			f.Title = fmt.Sprintf("%d slow %s, up to %s, running in the kernel", g.n, callList(g.calls), units.Duration(g.maxNS))
			f.Summary = fmt.Sprintf("%d syscalls (%s) took %s in all and up to %s each, most of it on the CPU inside the kernel "+
				"rather than asleep: the work the calls asked for is large (a big buffer, many pages, a long list).%s",
				g.n, callList(g.calls), units.Duration(g.totalNS), units.Duration(g.maxNS), queuedText(g))
			f.Fix = "Ask for less per call, or less often; `sysray profile -- CMD` shows the kernel functions the time goes to."
		}
		out = append(out, f)
	}
	return out
}

// unknownCause says why a capture cannot tell what its slow calls did, or
// "" when it can: live, the doctor tracks sleeps itself, and a capture
// with any sleep record, or whose header says every call the doctor calls
// slow would carry one (stacks_slow), was recorded with --stacks, so a slow
// call without one ran on the CPU. The header lists stacks as absent in a
// capture imported from another tool or recorded without --stacks; older
// captures do not say.
func (s *slow) unknownCause(env *Env) string {
	switch {
	case sleepsTracked(env, s.stacked):
		return ""
	case absent(env.Host.Meta, "stacks"):
		if src := env.Host.Meta["source"]; src != "" {
			return fmt.Sprintf("This capture was imported from %s, which records no sleeps or kernel stacks:", src)
		}
		return "Stacks were not recorded (the capture was made without --stacks), so"
	}
	return "This capture holds no sleep record at all (recorded without --stacks, or with them and no slow call slept):"
}

// absent reports whether a capture's header lists what as absent.
func absent(meta map[string]string, what string) bool {
	for _, a := range strings.Split(meta["absent"], ",") {
		if strings.TrimSpace(a) == what {
			return true
		}
	}
	return false
}

func queuedText(g *slowGroup) string {
	if g.queuedNS*10 < g.totalNS {
		return ""
	}
	return fmt.Sprintf(" Of that, %s went to waiting for a CPU while runnable: more runnable threads than CPUs.", units.Duration(g.queuedNS))
}

func sleptWhere(g *slowGroup) string {
	if g.where == "" || len(g.stack) == 0 {
		return ""
	}
	return ", asleep in " + g.where
}

func orDash(s string) string {
	if s == "" {
		return "the kernel"
	}
	return s
}

func (g *slowGroup) evidence(env *Env) map[string]any {
	var procs []string
	for pid, comm := range g.procs {
		procs = append(procs, env.ProcName(pid, comm))
	}
	sort.Strings(procs)
	ev := map[string]any{"syscalls": g.calls, "count": g.n, "total_ns": g.totalNS, "max_ns": g.maxNS,
		"example": g.example, "processes": procs}
	if len(g.stack) > 0 {
		ev["stack"] = g.stack
	}
	if len(g.wakers) > 0 {
		ev["woken_by"] = g.wakers
	}
	if g.nonblock > 0 {
		ev["non_blocking_calls"] = g.nonblock
	}
	return ev
}
