package doctor

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/units"
)

// slow groups syscalls that took long by where they slept (with --stacks,
// the kernel stack; otherwise the syscall). Calls that exist to wait (poll,
// a blocking read of a pipe, nanosleep, futex) are left out: waiting is
// their job. Syscalls that slept in the audit subsystem get their own
// finding, audit-backlog-stall (audit.go), which also reads the kernel's
// audit counters.
type slow struct {
	arch   event.Arch
	groups map[string]*slowGroup
	audit  *auditStall
	// stacked: some slow call carried where it slept, so sleep tracking
	// was on and a slow call without a switch-out ran on the CPU.
	stacked   bool
	unstacked []unstackedCall
	counts    []uint64 // calls by syscall number, fast or slow (auditinfer.go)
	// under is the longest call under slowMin that does not wait by
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

// Below this a syscall is not slow enough to report at all.
const slowMin = 10_000_000

// At this a single call is a visible stall (a request, a frame, a tick).
const slowWarn = 100_000_000

// A call asleep waiting for the storage device is never more than info:
// the wait is the device's latency, not something the program did wrong.
// A shared virtual disk answers a cold read or a synchronous discard in
// 100 ms to over a second under ordinary load (the benign corpus saw a
// 107 ms discard, 520 ms reads of a cold Go build cache and a 1.08 s
// getdents64), and no rule on the call's length alone tells that apart
// from a failing disk; the device's own statistics would.

// Frames of a sleep that waits for the storage device.
var deviceFrames = []string{"submit_bio_wait", "blkdev_issue_discard", "blkdev_issue_flush", "bit_wait_io",
	"folio_wait_bit_common", "folio_wait_bit", "io_schedule", "io_schedule_timeout", "wait_on_page_bit_common",
	"jbd2_log_wait_commit", "filemap_read", "filemap_fault", "wait_for_completion_io_timeout", "wait_for_completion_io"}

func hasName(stack, names []string) bool {
	for _, f := range stack {
		if contains(names, funcOf(f)) {
			return true
		}
	}
	return false
}

// live no longer matters here: the audit status comes from Host.Audit.
func newSlow(arch event.Arch, live bool) *slow {
	return &slow{arch: arch, groups: map[string]*slowGroup{}, audit: &auditStall{arch: arch}}
}

// Frames of the scheduler itself say nothing about why a thread slept.
var schedFrames = []string{"__schedule", "schedule", "schedule_timeout", "schedule_hrtimeout_range",
	"schedule_hrtimeout_range_clock", "io_schedule", "schedule_preempt_disabled", "preempt_schedule",
	"__cond_resched", "preempt_schedule_irq", "preempt_schedule_common", "io_schedule_timeout"}

// Frames that mean the thread was waiting by design.
var waitFrames = []string{"do_nanosleep", "futex_wait", "ep_poll", "do_epoll_wait", "do_select", "do_sys_poll", "pipe_read", "anon_pipe_read", "pipe_wait_readable", "pipe_wait_writable", "anon_pipe_write",
	"n_tty_read", "wait_woken", "unix_stream_read_generic", "sk_wait_data", "inet_csk_accept", "do_wait",
	"sigsuspend", "__x64_sys_pause", "__skb_wait_for_more_packets", "poll_schedule_timeout", "read_events",
	"io_cqring_wait", "pipe_write", "unix_wait_for_peer", "wait_for_partner", "do_sigtimedwait", "futex_wait_queue", "sys_pause"}

// Syscalls whose whole purpose is to wait: never a stall, whatever the stack.
var pureWaits = map[string]bool{"poll": true, "ppoll": true, "select": true, "pselect6": true, "epoll_wait": true,
	"epoll_pwait": true, "epoll_pwait2": true, "nanosleep": true, "clock_nanosleep": true, "wait4": true,
	"waitid": true, "pause": true, "rt_sigsuspend": true, "rt_sigtimedwait": true, "futex_waitv": true,
	"io_getevents": true, "msgrcv": true, "semtimedop": true, "mq_timedreceive": true}

// WaitCalls are the numbers of the syscalls that wait by design (pureWaits),
// whose brief interruptible sleeps the doctor's probe follows without their
// stacks (probe.Config.WaitCalls): no detector looks at them but for an
// audit backlog's wait, which is uninterruptible and keeps its stack.
func WaitCalls(arch event.Arch) []uint32 {
	var out []uint32
	for name := range pureWaits {
		if nr, ok := event.SyscallByName(arch, name); ok {
			out = append(out, nr)
		}
	}
	return out
}

// Syscalls that wait by design, for calls without stacks.
var waitCalls = map[string]bool{"read": true, "readv": true, "pread64": true, "recvfrom": true, "recvmsg": true,
	"recvmmsg": true, "poll": true, "ppoll": true, "select": true, "pselect6": true, "epoll_wait": true,
	"epoll_pwait": true, "epoll_pwait2": true, "nanosleep": true, "clock_nanosleep": true, "futex": true,
	"wait4": true, "waitid": true, "accept": true, "pause": true, "rt_sigsuspend": true, "rt_sigtimedwait": true,
	"io_getevents": true, "io_uring_enter": true, "msgrcv": true, "semop": true, "semtimedop": true,
	"mq_timedreceive": true, "flock": true, "write": true, "sendto": true, "sendmsg": true, "futex_waitv": true}

func funcOf(frame string) string {
	f, _, _ := strings.Cut(frame, "+")
	f, _, _ = strings.Cut(f, " ")
	return f
}

// named reports whether any frame of stack has a name.
func named(stack []event.Frame) bool {
	for _, f := range stack {
		if f.Name != "" {
			return true
		}
	}
	return false
}

func hasFrame(stack []event.Frame, names []string) bool {
	for _, f := range stack {
		fn := funcOf(f.Name)
		for _, n := range names {
			if fn == n {
				return true
			}
		}
	}
	return false
}

// tracingFrame is a frame of the tracepoint that took the stack, not of
// the code that slept.
func tracingFrame(fn string) bool {
	return strings.HasPrefix(fn, "__traceiter_") || strings.HasPrefix(fn, "__bpf_trace_") || strings.HasPrefix(fn, "bpf_trace_run")
}

// where names the place a thread slept: the first frames past the scheduler.
func where(stack []event.Frame) (string, []string) {
	var all []string
	var key []string
	for _, f := range stack {
		all = append(all, f.Name)
		fn := funcOf(f.Name)
		if len(key) == 0 && (contains(schedFrames, fn) || tracingFrame(fn)) {
			continue
		}
		if len(key) < 3 && fn != "" {
			key = append(key, fn)
		}
	}
	return strings.Join(key, " ← "), all
}

// preempted reports a switch-out that was a wait for a CPU, not a sleep:
// the thread stayed runnable (preempted), or gave the CPU up at a
// rescheduling point inside a long kernel loop (cond_resched).
func preempted(sl *event.Sleep) bool {
	return sl.Preempted || hasFrame(sl.Stack, []string{"__cond_resched", "_cond_resched", "preempt_schedule",
		"preempt_schedule_common", "preempt_schedule_irq"})
}

// vforkWait reports a parent asleep in clone(CLONE_VFORK) or vfork until
// its child execs or exits: waiting is what vfork is for.
func vforkWait(stack []event.Frame) bool {
	return hasFrame(stack, []string{"wait_for_vfork_done"}) ||
		hasFrame(stack, []string{"kernel_clone"}) && hasFrame(stack, []string{"wait_for_completion_state",
			"wait_for_completion_killable", "__wait_for_common"})
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
	if sc.Latency < slowMin {
		if sc.Latency > s.under.ns && !sc.Unfinished {
			if name := event.SyscallName(s.arch, sc.Nr); !waitCalls[name] && !pureWaits[name] && !vforkCall(name, sc) {
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
		return // a cgroup at its memory limit: cgroup-limit's (cgroup.go)
	}
	key, stack := name, []string(nil)
	isAudit, waiting := false, waitCalls[name]
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
			if firstBlocked == nil || waits && onCPU >= slowMin || !waits && blocked*2 < sc.Latency {
				waiting = false
				key, stack = name, nil
			}
		}
	} else if !isAudit && !pureWaits[name] && !(waitCalls[name] && interrupted(sc.Ret)) {
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
	if (waiting || pureWaits[name]) && !isAudit {
		return
	}
	s.add(e.PID, e.Comm, sc, name, key, stack, isAudit, blocked, queued)
}

// vforkCall reports a vfork, or a clone with CLONE_VFORK: the parent
// waits for its child to exec or exit, by design (vforkWait, without a
// stack to show it).
func vforkCall(name string, sc *event.Syscall) bool {
	const cloneVfork = 0x4000
	return name == "vfork" || name == "clone" && sc.Args[0]&cloneVfork != 0
}

// interrupted: the call returned for a signal (EINTR, or a restart the
// kernel turns into one).
func interrupted(ret int64) bool { return ret == -4 || ret <= -512 && ret >= -516 }

// unstackedCall is a slow call that never switched out: running if sleep
// tracking was on, unknown (and left to waitCalls) if not.
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

// nonBlocking reports a call made on a non-blocking socket or with a
// non-blocking flag: it should never sleep.
func nonBlocking(arch event.Arch, sc *event.Syscall) bool {
	spec := event.Lookup(arch, sc.Nr)
	if spec == nil {
		return false
	}
	for i, a := range spec.Args {
		if i < 6 && (a.Kind == event.ArgAccept4Flags || a.Kind == event.ArgSockType || a.Kind == event.ArgOpenFlags) &&
			strings.Contains(event.FormatArg(a, sc.Args[i], nil, false), "NONBLOCK") {
			return true
		}
	}
	return false
}

func (s *slow) near(env *Env) *Near {
	u := &s.under
	if u.ns == 0 {
		return nil
	}
	return &Near{ID: "slow-syscall", Closeness: float64(u.ns) / slowMin,
		Subject: fmt.Sprintf("%s in %s: %s", event.SyscallName(s.arch, u.nr), env.ProcName(u.pid, u.comm), u.example),
		Short: fmt.Sprintf("the slowest call that does not wait by design took %s; slow-syscall reports calls from %s",
			units.Duration(u.ns), units.Duration(slowMin))}
}

func (s *slow) Findings(env *Env) []Finding {
	if !s.stacked {
		if facts := readAuditFacts(env.Host.Meta); facts != nil {
			s.unstacked = s.inferAudit(facts, s.unstacked)
		}
	}
	for _, u := range s.unstacked {
		name := event.SyscallName(s.arch, u.sc.Nr)
		if !s.stacked && (waitCalls[name] || vforkCall(name, &u.sc)) {
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
		f := Finding{ID: "slow-syscall", Severity: sev,
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

// sleepsTracked reports that a call of slowMin or more without sleep
// records never switched out, so ran on the CPU: live, in a capture with
// any sleep record (stacked), or in one whose header says every call that
// slow carries its sleeps (stacks_slow).
func sleepsTracked(env *Env, stacked bool) bool {
	if env.Host.Live || stacked {
		return true
	}
	v, err := strconv.ParseUint(env.Host.Meta["stacks_slow"], 10, 64)
	return err == nil && v <= slowMin
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

func callList(m map[string]uint64) string {
	return strings.Join(byValue(m), ", ")
}

// byValue is m's keys, largest value first, ties by name.
func byValue(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	return keys
}
