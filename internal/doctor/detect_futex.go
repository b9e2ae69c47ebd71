package doctor

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/units"
)

// LockConvoy: threads of one process queued on one user-space lock, which
// they hand on to each other, spending much of their time asleep waiting
// for it. "Convoy" is the name the lock literature gives the shape: the
// threads move in single file behind whoever holds the lock.
const LockConvoy ID = "lock-convoy"

func init() {
	register(registration{ids: []ID{LockConvoy},
		build: func(h *Host) Detector { return newLockConvoy() }})
}

// convoyWaiters: a lock is contended once a second thread sleeps on it;
// two threads taking turns lose as much to the hand-off as eight do (each
// waits for the other's critical section and a wake-up). One thread asleep
// on an address is a parked thread (a Go runtime's M on its note, a
// consumer on its queue), never a convoy.
const convoyWaiters = 2

// convoyWaits: the lock must be handed on again and again, not once. A
// critical section that runs long once (a start-up) is a slow call; 20
// sleeps on one word is a pattern.
const convoyWaits = 20

// convoyWokenShare: of the sleeps on the word, the share that ended
// because a thread woke them (not a timeout, a signal or a spurious
// return). A lock's waiters sleep until the holder lets go; a thread that
// sleeps with a timeout and mostly times out is polling (a JVM's parked
// timers, a Go sysmon), which no lock fix helps.
const convoyWokenShare = 0.5

// convoyOneShare: of the threads woken on the word, the share woken one
// at a time (by a wake call that woke exactly one). Unlocking a mutex wakes one waiter (glibc's
// unlock asks for 1; FUTEX_UNLOCK_PI hands the lock to one); a condition
// variable's broadcast and a barrier wake every waiter at once, and are
// not lock hand-offs.
const convoyOneShare = 0.8

// convoyPassShare: of the threads the wakes on the word woke, the share
// woken by threads that themselves slept on it. A lock passes among its
// waiters: each takes it, and wakes the next as it lets go. A pool of idle
// workers on a condition variable is woken by a producer that never waits
// there; that is work arriving, not a lock.
const convoyPassShare = 0.5

// convoyInfoShare: below a tenth of the waiting threads' time asleep on
// the lock the contention is real but small; it is not reported. From a
// tenth it is info; the core's warnShare (a quarter) and warnWaitNS make
// it a warning, as for any cost worth acting on.
const convoyInfoShare = 0.10

// convoyInfoNS: and at least 50 ms asleep in all, so a short run's few
// waits are not reported for their share alone.
const convoyInfoNS = 50_000_000

// ftThread is what one thread did on one futex word.
type ftThread struct {
	comm                                                 string
	waits, slept, woken, timeouts, again, byProc, waitNS uint64
	maxNS, wakes, woke, wokeOne                          uint64
	wakerTID                                             uint32
	waitStack, wakeStack                                 []event.Frame
}

// ftWord is one futex word of one process.
type ftWord struct {
	pid     uint32
	addr    uint64
	threads map[uint32]*ftThread
	first   uint64 // the first and last reads that showed it
	last    uint64
}

type lockConvoy struct {
	words map[[2]uint64]*ftWord
	born  map[uint32]tidAt  // tid: when its fork was seen
	ended map[uint32]tidAt  // tid: when its exit was seen
	comms map[uint32]string // pid: the name its events carried
	first uint64            // the first event of the trace
	last  uint64
	any   bool // futex sums were seen: the kernel counted futex calls
}

func newLockConvoy() *lockConvoy {
	return &lockConvoy{words: map[[2]uint64]*ftWord{}, born: map[uint32]tidAt{}, ended: map[uint32]tidAt{}, comms: map[uint32]string{}}
}

func (c *lockConvoy) Observe(e *event.Event) {
	if c.first == 0 || e.Time < c.first {
		c.first = e.Time
	}
	c.last = max(c.last, e.End())
	switch e.Kind {
	case event.KindFork:
		if e.Proc.Thread {
			c.born[e.Proc.ChildTID] = tidAt{e.PID, e.Time}
		}
		return
	case event.KindExit:
		c.ended[e.TID] = tidAt{e.PID, e.Time}
		return
	case event.KindFutex:
	default:
		if e.Comm != "" && e.TID == e.PID {
			c.comms[e.PID] = e.Comm
		}
		return
	}
	c.any = true
	f := &e.Futex
	k := [2]uint64{uint64(e.PID), f.Addr}
	w := c.words[k]
	if w == nil {
		w = &ftWord{pid: e.PID, addr: f.Addr, threads: map[uint32]*ftThread{}, first: e.Time}
		c.words[k] = w
	}
	w.last = max(w.last, e.Time)
	t := w.threads[e.TID]
	if t == nil {
		t = &ftThread{}
		w.threads[e.TID] = t
	}
	if e.Comm != "" {
		t.comm = e.Comm
	}
	t.waits += f.Waits
	t.slept += f.Slept
	t.woken += f.Woken
	t.timeouts += f.Timeouts
	t.again += f.Again
	t.byProc += f.ByProc
	t.waitNS += f.WaitNS
	t.maxNS = max(t.maxNS, f.MaxNS)
	t.wakes += f.Wakes
	t.woke += f.Woke
	t.wokeOne += f.WokeOne
	if f.WakerTID != 0 {
		t.wakerTID = f.WakerTID
	}
	if t.waitStack == nil && len(f.WaitStack) > 0 {
		t.waitStack = f.WaitStack
	}
	if t.wakeStack == nil && len(f.WakeStack) > 0 {
		t.wakeStack = f.WakeStack
	}
}

// forget lets go of ended processes' words (the doctor's memory bound).
func (c *lockConvoy) forget(pids, tids map[uint32]bool) {
	for k, w := range c.words {
		if pids[w.pid] {
			delete(c.words, k)
		}
	}
	// A forgotten process's threads go with it: its exit names its
	// main thread alone, and a thread's own forgetting may never come.
	for _, m := range []map[uint32]tidAt{c.born, c.ended} {
		for tid, at := range m {
			if pids[at.pid] || tids[tid] {
				delete(m, tid)
			}
		}
	}
	for pid := range pids {
		delete(c.comms, pid)
	}
}

// tidAt is when a thread of process pid was born or ended.
type tidAt struct {
	pid uint32
	at  uint64
}

// threadNS is a thread's time in the trace: from its birth, or the trace's
// start, to its exit, or the trace's end. The sums of a thread that ran
// before sysray began cover only the traced time, so this is their
// denominator.
func (c *lockConvoy) threadNS(tid uint32) uint64 {
	from, to := c.first, c.last
	if b, ok := c.born[tid]; ok && b.at > from {
		from = b.at
	}
	if x, ok := c.ended[tid]; ok && x.at < to {
		to = x.at
	}
	if to > from {
		return to - from
	}
	return 0
}

// convoyMeasure is what the rule reads of one word.
type convoyMeasure struct {
	w                               *ftWord
	waiters, passers                []uint32 // threads that slept; of them, those that woke someone
	slept, woken, timeouts, waits   uint64
	again, wakes, woke, wokeOne     uint64
	passed                          uint64 // threads woken by threads that also slept here
	waitNS, threadNS, maxNS         uint64
	share                           float64
	wokenShare, oneShare, passShare float64
}

func (c *lockConvoy) measure(w *ftWord) *convoyMeasure {
	m := &convoyMeasure{w: w}
	for tid, t := range w.threads {
		m.waits += t.waits
		m.again += t.again
		m.wakes += t.wakes
		m.woke += t.woke
		m.wokeOne += t.wokeOne
		if t.slept > 0 {
			m.waiters = append(m.waiters, tid)
			m.slept += t.slept
			m.woken += t.woken
			m.timeouts += t.timeouts
			m.waitNS += t.waitNS
			m.maxNS = max(m.maxNS, t.maxNS)
			m.threadNS += max(c.threadNS(tid), t.waitNS)
			if t.woke > 0 {
				m.passers = append(m.passers, tid)
				m.passed += t.woke
			}
		}
	}
	sort.Slice(m.waiters, func(i, j int) bool { return m.waiters[i] < m.waiters[j] })
	sort.Slice(m.passers, func(i, j int) bool { return m.passers[i] < m.passers[j] })
	if m.threadNS > 0 {
		m.share = float64(m.waitNS) / float64(m.threadNS)
	}
	if m.slept > 0 {
		m.wokenShare = float64(m.woken) / float64(m.slept)
	}
	if m.woke > 0 {
		m.oneShare = float64(m.wokeOne) / float64(m.woke)
		m.passShare = float64(m.passed) / float64(m.woke)
	}
	return m
}

// convoy says whether the word is a lock handed on among its waiters, and
// if not, the first part of the rule it failed.
func (m *convoyMeasure) convoy() (bool, string) {
	switch {
	case len(m.waiters) < convoyWaiters:
		return false, fmt.Sprintf("%d thread(s) slept on it; a lock convoy needs %d", len(m.waiters), convoyWaiters)
	case m.slept < convoyWaits:
		return false, fmt.Sprintf("%d sleeps on it; the rule needs %d", m.slept, convoyWaits)
	case m.wokenShare < convoyWokenShare:
		return false, fmt.Sprintf("%.0f%% of its sleeps ended by a wake (%d by timeout); a lock's waiters are woken, %.0f%% at least",
			100*m.wokenShare, m.timeouts, 100*convoyWokenShare)
	case m.woke == 0:
		return false, "no wake on it was seen"
	case m.oneShare < convoyOneShare:
		return false, fmt.Sprintf("its wakes woke several threads at once (%d of %d woken one at a time); a lock wakes one", m.wokeOne, m.woke)
	case m.passShare < convoyPassShare:
		return false, fmt.Sprintf("%.0f%% of the threads woken there were woken by threads that also slept there; a lock passes among its waiters (%.0f%% at least)",
			100*m.passShare, 100*convoyPassShare)
	}
	return true, ""
}

func (c *lockConvoy) Findings(env *Env) []Finding {
	var out []Finding
	byPID := map[uint32][]*convoyMeasure{}
	for _, w := range c.words {
		m := c.measure(w)
		if ok, _ := m.convoy(); !ok {
			continue
		}
		if m.share < convoyInfoShare || m.waitNS < convoyInfoNS {
			continue
		}
		byPID[w.pid] = append(byPID[w.pid], m)
	}
	for pid, ms := range byPID {
		sort.Slice(ms, func(i, j int) bool { return ms[i].waitNS > ms[j].waitNS })
		for _, m := range ms {
			out = append(out, c.finding(env, pid, m))
		}
	}
	return out
}

// frameNames is a user stack as function names, innermost first, at most
// n, without offsets; "" when no frame was named.
func frameNames(stack []event.Frame, n int) []string {
	var out []string
	for _, f := range stack {
		if f.Name == "" {
			continue
		}
		name := funcOf(f.Name)
		if _, obj, ok := strings.Cut(f.Name, " "); ok {
			name += " " + obj
		}
		if len(out) > 0 && out[len(out)-1] == name {
			continue
		}
		out = append(out, name)
		if len(out) == n {
			break
		}
	}
	return out
}

// stackOf picks a thread's stack for the report: the busiest thread's
// that has one.
func stackOf(w *ftWord, tids []uint32, wake bool) ([]string, uint32) {
	var best uint32
	var bestN uint64
	var names []string
	for _, tid := range tids {
		t := w.threads[tid]
		s, n := t.waitStack, t.slept
		if wake {
			s, n = t.wakeStack, t.woke
		}
		if fs := frameNames(s, 8); len(fs) > 0 && (names == nil || n > bestN) {
			names, best, bestN = fs, tid, n
		}
	}
	return names, best
}

func (c *lockConvoy) finding(env *Env, pid uint32, m *convoyMeasure) Finding {
	w := m.w
	comm := c.comms[pid]
	for _, t := range w.threads {
		if comm == "" && t.comm != "" {
			comm = t.comm
		}
	}
	sev := Info
	if m.share >= warnShare && m.waitNS >= warnWaitNS {
		sev = Warning
	}
	span := max(w.last, c.last) - c.first
	rate := 0.0
	if span > 0 {
		rate = float64(m.passed) / (float64(span) / 1e9)
	}
	mean := m.waitNS / max(m.slept, 1)
	waitStack, waitTID := stackOf(w, m.waiters, false)
	wakers := m.passers
	for tid, t := range w.threads {
		if t.woke > 0 && t.slept == 0 {
			wakers = append(wakers, tid)
		}
	}
	wakeStack, wakeTID := stackOf(w, wakers, true)
	who := env.ProcName(pid, comm)
	tids := make([]string, len(m.waiters))
	for i, t := range m.waiters {
		tids[i] = fmt.Sprint(t)
	}
	stacks := ""
	if len(waitStack) > 0 {
		stacks += fmt.Sprintf(" A waiter (thread %d) slept there from %s.", waitTID, strings.Join(waitStack, " ← "))
	}
	if len(wakeStack) > 0 {
		stacks += fmt.Sprintf(" The lock was handed on (the wake) from %s (thread %d).", strings.Join(wakeStack, " ← "), wakeTID)
	}
	if stacks == "" {
		stacks = " The user stacks were not named (no symbols, or a capture without them)."
	}
	ev := map[string]any{
		"address":              fmt.Sprintf("0x%x", w.addr),
		"threads_waiting":      len(m.waiters),
		"waiting_tids":         m.waiters,
		"threads_handing_on":   len(m.passers),
		"share_of_thread_time": m.share,
		"wait_ns":              m.waitNS,
		"thread_ns":            m.threadNS,
		"waits":                m.waits,
		"waits_slept":          m.slept,
		"waits_woken":          m.woken,
		"waits_timed_out":      m.timeouts,
		"waits_word_changed":   m.again,
		"mean_wait_ns":         mean,
		"max_wait_ns":          m.maxNS,
		"wakes":                m.wakes,
		"threads_woken":        m.woke,
		"hand_offs":            m.passed,
		"hand_offs_per_second": rate,
	}
	if len(waitStack) > 0 {
		ev["waiter_stack"] = waitStack
	}
	if len(wakeStack) > 0 {
		ev["waker_stack"] = wakeStack
	}
	key := fmt.Sprintf("0x%x", w.addr)
	if len(waitStack) > 0 {
		key = strings.Join(waitStack, ";")
	}
	return Finding{
		ID:       LockConvoy,
		Severity: sev,
		Key:      keyOf(comm, key),
		Procs:    env.refs(pid),
		Syscalls: []string{"futex"},
		Title: fmt.Sprintf("%d threads of %s queued on one lock (futex 0x%x): %.0f%% of their time asleep waiting for it",
			len(m.waiters), who, w.addr, 100*m.share),
		Summary: fmt.Sprintf("%d threads of %s (%s) slept %d times on the futex word at 0x%x, %s in all (mean %s, longest %s): "+
			"%.0f%% of their time. %.0f%% of those sleeps ended when another thread woke them, and %d of the %d threads woken there "+
			"were woken by threads that themselves slept on it (%.0f a second): the lock passes from thread to thread, each "+
			"waking the next as it lets go, so the threads run one at a time.%s",
			len(m.waiters), who, strings.Join(tids, ", "), m.slept, w.addr, units.Duration(m.waitNS), units.Duration(mean), units.Duration(m.maxNS),
			100*m.share, 100*m.wokenShare, m.passed, m.woke, rate, stacks),
		Evidence: ev,
		Fix: "Hold the lock for less time (move work out of the critical section: allocation, I/O, formatting), split it " +
			"(one lock per shard of the data, by key), use a structure that needs no lock (atomics, per-thread data merged " +
			"later, RCU), or run fewer threads than the lock can serve: past the point where the lock is always held, " +
			"more threads only queue.",
		Score: float64(m.waitNS),
	}
}

// near: the lock handed on nearest to the rule's share and time.
func (c *lockConvoy) near(env *Env) *Near {
	var best *convoyMeasure
	var short string
	var close float64
	for _, w := range c.words {
		m := c.measure(w)
		if len(m.waiters) == 0 {
			continue
		}
		if ok, _ := m.convoy(); !ok {
			continue // not a lock handed on: no nearer to this rule however long it slept
		}
		cl := min(m.share/convoyInfoShare, float64(m.waitNS)/convoyInfoNS)
		why := fmt.Sprintf("a lock handed on among %d threads, asleep %.1f%% of their time and %s in all; the rule needs %.0f%% and %s",
			len(m.waiters), 100*m.share, units.Duration(m.waitNS), 100*convoyInfoShare, units.Duration(convoyInfoNS))
		if cl >= 1 {
			continue
		}
		if best == nil || cl > close {
			best, short, close = m, why, cl
		}
	}
	if best == nil || close < 0.1 {
		return nil // the doctor shows misses within a tenth of the rule
	}
	return &Near{ID: LockConvoy, Subject: fmt.Sprintf("futex 0x%x in %s", best.w.addr, env.ProcName(best.w.pid, c.comms[best.w.pid])),
		Short: short, Closeness: close}
}
