package doctor

import (
	"fmt"
	"sort"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/units"
)

// Slow calls, read and grouped as slow-syscall and audit-backlog-stall
// both do: what a call's sleeps say, which calls another detector
// explains, and a group of calls that slept in one place.

// slowGroup is the slow calls that slept in one place.
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
	stolenNS uint64 // on a virtual CPU the hypervisor had given to another guest (steal)
	example  string
	wakers   map[string]uint64
	procs    map[uint32]string
	nonblock uint64 // calls made with a non-blocking flag that still slept
}

// unstackedCall is a slow call that never switched out: running if sleep
// tracking was on, unknown (and left to event.MayWait) if not.
type unstackedCall struct {
	pid  uint32
	comm string
	at   uint64
	cpu  uint32 // where it ran, all of it: it never switched out
	sc   event.Syscall
}

// add counts one call in the group: blocked, queued and stolen are its ns
// asleep, runnable without a CPU, and on a CPU the hypervisor took away.
func (g *slowGroup) add(arch event.Arch, pid uint32, comm string, sc *event.Syscall, name string, stack []string, blocked, queued, stolen uint64) {
	g.calls[name]++
	g.n++
	g.totalNS += sc.Latency
	g.maxOwnNS = max(g.maxOwnNS, sc.Latency-min(queued+stolen, sc.Latency))
	g.sleptNS += blocked
	g.queuedNS += queued
	g.stolenNS += stolen
	if sc.Latency > g.maxNS {
		g.maxNS = sc.Latency
		approx := ""
		if sc.Approx {
			approx = "~"
		}
		g.example = event.FormatSyscall(arch, sc) + fmt.Sprintf(" <%s%s>", approx, units.Duration(sc.Latency))
		if len(stack) > 0 {
			g.stack = stack
		}
	}
	if nonBlocking(arch, sc) {
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
	if g.stolenNS > 0 {
		ev["stolen_ns"] = g.stolenNS
	}
	// What of total_ns the calls' sleeps account for, asleep and waiting
	// for a CPU: the rest ran. A group of calls that slept where nothing
	// waits by design says so here, with or without a stack.
	if g.sleptNS > 0 {
		ev["asleep_ns"] = g.sleptNS
	}
	if g.queuedNS > 0 {
		ev["queued_ns"] = g.queuedNS
	}
	return ev
}

// sleptSummary is what a slow call's sleeps say: where it slept, whether
// that was a wait by design, and whether in the audit subsystem.
type sleptSummary struct {
	key     string   // where it slept (its first frames past the scheduler), or its syscall's name when it ran
	stack   []string // the stack of that sleep
	waiting bool     // it waited by design (a read of a pipe, a poll)
	audit   bool     // a sleep passed through audit_log_start: audit-backlog-stall's
	blocked uint64   // ns asleep
	queued  uint64   // ns runnable without a CPU
}

// sleptIn reads the sleeps of a call of bar or more that has some.
func sleptIn(name string, sc *event.Syscall, bar uint64) sleptSummary {
	c := sleptSummary{key: name, waiting: event.Is(name, event.MayWait)}
	var firstBlocked *event.Sleep
	// The stacks decide, when there are stacks: a read of a pipe waits
	// by design, a read stuck in I/O or on a lock does not.
	stacked, waits := true, true
	for i := range sc.Sleeps {
		sl := &sc.Sleeps[i]
		if hasFrame(sl.Stack, []string{"audit_log_start"}) {
			c.audit = true
		}
		if !named(sl.Stack) {
			// No frame has a name (kernel symbols hidden from the
			// reader): the stack cannot tell a wait from a stall.
			stacked = false
		}
		if preempted(sl) {
			c.queued += sl.Duration
			continue
		}
		c.blocked += sl.Duration
		if firstBlocked == nil {
			firstBlocked = sl
		}
		if len(sl.Stack) > 0 && !hasFrame(sl.Stack, waitFrames) && !vforkWait(sl.Stack) {
			waits = false
		}
	}
	// The kernel's count has the wait for a CPU in places the sleep
	// slots did not keep.
	c.queued = max(c.queued, sc.Queued)
	if firstBlocked != nil {
		c.key, c.stack = where(firstBlocked.Stack)
		if c.key == "" {
			c.key = name
		}
	}
	if stacked {
		c.waiting = waits
		// A call that spent the threshold on the CPU is slow however
		// it slept or queued on the way, and where it did says nothing
		// of why; one that never blocked is running, whatever its name.
		// A call mostly on the CPU joins the running calls of its
		// syscall, wherever it blocked for a moment.
		onCPU := sc.Latency - min(c.blocked+c.queued, sc.Latency)
		if firstBlocked == nil || waits && onCPU >= bar || !waits && c.blocked*2 < sc.Latency {
			c.waiting = false
			c.key, c.stack = name, nil
		}
	}
	return c
}

// ownedElsewhere says whether a slow call is explained by a detector of
// its own: blocked-in-kernel-io's (a call that did not ask for I/O, waiting
// for it), mmap-lock-contention's, or cgroup-limit's (a cgroup at its
// memory limit).
func ownedElsewhere(name string, sc *event.Syscall) bool {
	if cause, _, _ := bioCause(name, sc); cause != "" {
		return true
	}
	if ownsMmapLock(sc) {
		return true
	}
	_, memcg := memcgReclaim(sc)
	return memcg
}

// unstackedMax bounds the slow calls without sleeps a detector keeps for
// its report: a bound on memory (each is a copy of the call, and a capture
// imported from a tool without sleeps can hold millions). Past it, later
// such calls go unreported.
const unstackedMax = 10000

// unstacked says whether a slow call without sleeps is one whose sleeps
// would have said something: not a wait by design, nor a wait a signal
// interrupted (it comes back without its sleeps: they are held until the
// thread's next call, and emitted from there). With sleep tracking on it
// ran on the CPU from entry to exit, a read of 64 MiB of /dev/urandom as
// much as a getrandom.
func unstacked(name string, sc *event.Syscall) bool {
	return !event.Is(name, event.Waits) && !(event.Is(name, event.MayWait) && interrupted(sc.Ret))
}
