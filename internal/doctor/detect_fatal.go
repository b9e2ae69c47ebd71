package doctor

import (
	"fmt"
	"strings"

	"github.com/sysray/sysray/internal/event"
)

// The findings it reports.
const (
	FatalSignal ID = "fatal-signal"
	OOMKill     ID = "oom-kill"
)

func init() {
	register(registration{ids: []ID{FatalSignal, OOMKill, SyscallRefused},
		build: func(h *Host) Detector { return newFatal(h.Arch, h.OOMKills) }})
}

// fatal explains processes killed by a signal: for faults, where the bad
// access was and what the address is; for every kill, the last syscalls
// and the exit status.
type fatal struct {
	arch     event.Arch
	oomKills func() uint64
	oomAt0   uint64 // the kernel's OOM kill count when the doctor started
	// oomBefore holds, for a thread whose kernel SIGKILL a window before
	// this one saw and handed on (carry), the OOM kills that window's
	// doctor counted: the kill was counted there, and its exit comes here.
	oomBefore map[uint32]uint64
	recent    map[uint32]*ring // per thread: last syscalls
	faults    map[uint32]event.Fault
	signals   map[uint32]event.Signal // per thread: last fatal-looking signal generated for it
	deaths    []death
	culprits  map[uint32]culprit // by process: a thread that died of a signal before the rest
}

type culprit struct {
	tid    uint32
	signal *event.Signal
	fault  *event.Fault
	// Its last calls: the events seen for it, and live the kernel's own
	// list. Both are read at report time: a thread's last events may
	// arrive after its exit (they are staged per CPU and come in batches).
	ring   *ring
	recent []event.RecentCall
}

// last lists the thread's last syscalls, and the fd of its last write
// that failed with EPIPE (-1 for none).
func (c *culprit) last(arch event.Arch) ([]string, int) {
	var last []string
	pipeFD := -1
	if c.ring != nil {
		last = c.ring.list(arch)
		pipeFD = c.ring.lastEPIPE()
	}
	if len(c.recent) > 0 {
		// Live, the kernel kept every call the thread made last; the
		// events are only the ones that crossed over.
		last = recentList(arch, c.recent, c.ring)
	}
	return last, pipeFD
}

type death struct {
	pid, tid uint32
	comm     string
	cgroup   uint64
	sig      int
	core     bool
	signal   *event.Signal
	fault    *event.Fault
	thread   culprit
	at       uint64
}

const recentCalls = 5

type ring struct {
	calls [recentCalls]event.Syscall
	times [recentCalls]uint64
	n     int
}

func (r *ring) add(s *event.Syscall, t uint64) {
	r.calls[r.n%recentCalls] = *s
	r.times[r.n%recentCalls] = t
	r.n++
}

// lastEPIPE is the fd of the latest call in the ring that failed with EPIPE
// (a write to a pipe or socket whose reader is gone), or -1.
func (r *ring) lastEPIPE() int {
	for i := r.n - 1; i >= max(0, r.n-recentCalls); i-- {
		if c := &r.calls[i%recentCalls]; c.Ret == -32 {
			return int(c.Args[0])
		}
	}
	return -1
}

// byTime is the call that entered at t, if the ring has it.
func (r *ring) byTime(t uint64) *event.Syscall {
	for i := max(0, r.n-recentCalls); i < r.n; i++ {
		if r.times[i%recentCalls] == t {
			return &r.calls[i%recentCalls]
		}
	}
	return nil
}

// recentList formats the kernel's list of a thread's last calls. Their
// arguments were not read, except for the calls that also came as events.
func recentList(arch event.Arch, rc []event.RecentCall, seen *ring) []string {
	rc = rc[max(0, len(rc)-recentCalls):]
	out := make([]string, 0, len(rc))
	for _, c := range rc {
		if seen != nil {
			if s := seen.byTime(c.Time); s != nil && s.Nr == c.Nr {
				out = append(out, event.FormatSyscall(arch, s))
				continue
			}
		}
		s := event.Syscall{Nr: c.Nr, Ret: c.Ret}
		args := "…"
		if spec := event.Lookup(arch, c.Nr); spec != nil && len(spec.Args) == 0 {
			args = ""
		}
		out = append(out, fmt.Sprintf("%s(%s) = %s", event.SyscallName(arch, c.Nr), args, event.FormatReturn(arch, &s)))
	}
	return out
}

func (r *ring) list(arch event.Arch) []string {
	var out []string
	start := max(0, r.n-recentCalls)
	for i := start; i < r.n; i++ {
		s := r.calls[i%recentCalls]
		out = append(out, event.FormatSyscall(arch, &s))
	}
	return out
}

func newFatal(arch event.Arch, oomKills func() uint64) *fatal {
	f := &fatal{arch: arch, oomKills: oomKills, recent: map[uint32]*ring{}, faults: map[uint32]event.Fault{},
		signals: map[uint32]event.Signal{}, culprits: map[uint32]culprit{}, oomBefore: map[uint32]uint64{}}
	if oomKills != nil {
		f.oomAt0 = oomKills()
	}
	return f
}

// memorySignal: a signal raised by a memory access, which a page fault
// explains.
func memorySignal(sig int32) bool { return sig == 7 || sig == 11 }

// Instruction signals: the CPU refused the instruction itself, at si_addr.
var instrText = map[string]string{
	"FPE_INTDIV": "an integer divide by zero", "FPE_INTOVF": "an integer overflow",
	"FPE_FLTDIV": "a floating-point divide by zero", "FPE_FLTOVF": "a floating-point overflow",
	"FPE_FLTUND": "a floating-point underflow", "FPE_FLTRES": "an inexact floating-point result",
	"FPE_FLTINV": "an invalid floating-point operation", "FPE_FLTSUB": "a subscript out of range",
	"ILL_ILLOPC": "an illegal opcode", "ILL_ILLOPN": "an illegal operand (such as ud2, the trap compilers emit for unreachable code)",
	"ILL_ILLADR": "an illegal addressing mode", "ILL_ILLTRP": "an illegal trap", "ILL_PRVOPC": "a privileged opcode",
	"ILL_PRVREG": "a privileged register", "ILL_COPROC": "a coprocessor error", "ILL_BADSTK": "an internal stack error",
	"TRAP_BRKPT": "a breakpoint (int3) with no debugger attached", "TRAP_TRACE": "a trace trap with no debugger attached",
}

func faultSignal(sig int32) bool {
	switch sig {
	case 4, 5, 7, 8, 11: // SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV
		return true
	}
	return false
}

func (f *fatal) Observe(e *event.Event) {
	switch e.Kind {
	case event.KindSyscall:
		r := f.recent[e.TID]
		if r == nil {
			r = &ring{}
			f.recent[e.TID] = r
		}
		r.add(&e.Syscall, e.Time)
	case event.KindPageFault:
		f.faults[e.TID] = e.Fault
	case event.KindSignalGenerate:
		if e.Signal.Result == 0 {
			f.signals[e.Signal.TargetTID] = e.Signal
		}
	case event.KindExit:
		f.exit(e)
		// What the thread's fault or signal could explain, its exit has
		// used: whatever it was, it is spent (and not carried to the next
		// window, carry).
		delete(f.faults, e.TID)
		delete(f.signals, e.TID)
	}
}

// exit takes a thread's exit: a death by signal, the process's when it is
// the last thread to go.
func (f *fatal) exit(e *event.Event) {
	_, sig, core := e.Proc.Status()
	// A low byte that names no signal is not a wait status: a kernel
	// thread's exit code is its function's return, and a negative
	// errno there (-EINTR: 0x7c with the core bit) is no death.
	if sig == 0 || event.SignalName(sig) == "" {
		return
	}
	// The thread that took the signal, with what it was doing. When it
	// is not the last to go, the process's death is reported with it.
	r := f.recent[e.TID]
	if r == nil {
		r = &ring{} // for its last events, if they come after this
		f.recent[e.TID] = r
	}
	c := culprit{tid: e.TID, ring: r, recent: e.Proc.Recent}
	if s, ok := f.signals[e.TID]; ok && int(s.Sig) == sig {
		c.signal = &s
	}
	if flt, ok := f.faults[e.TID]; ok && memorySignal(int32(sig)) &&
		(c.signal == nil || c.signal.Addr == 0 || c.signal.Addr>>12 == flt.Addr>>12) {
		// The thread's last page fault explains a SIGSEGV or SIGBUS
		// only where the signal's address is on the fault's page: an
		// earlier fault (the vDSO's data page, a new stack) is not it.
		c.fault = &flt
	}
	if prev, ok := f.culprits[e.PID]; ok && c.signal == nil && c.fault == nil {
		c = prev
	}
	if !e.Proc.GroupDead {
		if c.signal != nil || c.fault != nil {
			f.culprits[e.PID] = c
		}
		return
	}
	delete(f.culprits, e.PID)
	f.deaths = append(f.deaths, death{pid: e.PID, tid: c.tid, comm: e.Comm, cgroup: e.Cgroup, sig: sig, core: core,
		at: e.Time, signal: c.signal, fault: c.fault, thread: c})
	// The thread's ring stays: its last events may still come.
}

// carry hands the next window's fatal detector (to) what this one holds of
// deaths not yet seen whole: each thread's fault and signal not yet
// followed by its exit, and the threads that died before the rest of their
// process. A crash's exit can come seconds after its fault (a core being
// written, the exit waiting on a full audit backlog), in the window after;
// without them its finding would lose the fault's address and the
// signal's code. The culprits' and the faulting threads' last calls go
// too, copied: this window's report still reads its own.
func (f *fatal) carry(to Detector) {
	n, ok := to.(*fatal)
	if !ok {
		return
	}
	for tid, flt := range f.faults {
		n.faults[tid] = flt
		if r := f.recent[tid]; r != nil && n.recent[tid] == nil {
			c := *r
			n.recent[tid] = &c
		}
	}
	// A kernel SIGKILL not yet followed by its death takes the OOM kills
	// counted here with it: the next doctor's count starts after them.
	counted := f.counted()
	oom := func(tid uint32, s *event.Signal) {
		if s != nil && s.Sig == 9 && s.Code == siKernel {
			if k := counted + f.oomBefore[tid]; k > 0 {
				n.oomBefore[tid] = k
			}
		}
	}
	for tid, s := range f.signals {
		n.signals[tid] = s
		oom(tid, &s)
	}
	for pid, c := range f.culprits {
		oom(c.tid, c.signal)
		if c.ring != nil {
			r := *c.ring
			c.ring = &r
			if n.recent[c.tid] == nil {
				n.recent[c.tid] = c.ring // its late events go on its ring
			}
		}
		n.culprits[pid] = c
	}
}

// stackReach is how far from the stack pointer an access still counts as
// the stack's own: a function's frame, or a page probe of a large one.
const stackReach = 64 << 10

// SIGSEGV si_codes.
const (
	segvMapErr = 1 // no mapping at the address
	segvAccErr = 2 // a mapping that forbids the access

	busAdrAln   = 1 // misaligned address
	busAdrErr   = 2 // no backing for the address: past the end of a mapped file
	busMceerrAR = 4 // hardware memory error, consumed
	busMceerrAO = 5 // hardware memory error, detected
)

// whatIs says what kind of address a fault hit; sig and code are the signal
// and its si_code, 0 when unknown.
func whatIs(f *event.Fault, sig, code int32) string {
	a := f.Addr
	notPresent := f.Error&1 == 0
	switch {
	case sig == 7 && code == busAdrErr:
		return "a file mapping past the end of its file (the file was truncated, or is shorter than the mapping)"
	case sig == 7 && code == busAdrAln:
		return "a misaligned address (alignment checking is on)"
	case sig == 7 && (code == busMceerrAR || code == busMceerrAO):
		return "memory the hardware reported as corrupt (a machine check)"
	case inVsyscallPage(a):
		return "the legacy vsyscall page"
	case a < 0x10000:
		return "the NULL page (a null pointer, or a small offset from one)"
	case a >= 0xffff800000000000:
		return "kernel memory"
	case f.SP != 0 && notPresent && a+stackReach >= f.SP && a <= f.SP+stackReach:
		// Nothing mapped (the main stack's guard gap) or a PROT_NONE guard
		// page (a thread's), right at the stack pointer: the stack ran out.
		return fmt.Sprintf("the stack guard: a stack overflow (the stack pointer was at %#x, %s from the address)",
			f.SP, byteDist(a, f.SP))
	case f.Error&1 != 0 && f.Error&0x10 != 0:
		return "a mapping that is not executable"
	case f.Error&1 != 0 && f.Error&2 != 0:
		return "a read-only mapping"
	case f.Error&1 != 0:
		return "a mapping without read permission"
	// Not present and SEGV_ACCERR: the mapping exists but forbids the
	// access; which one, the access says.
	case code == segvAccErr && f.Error&0x10 != 0:
		return "a mapping that is not executable"
	case code == segvAccErr && f.Error&2 != 0:
		return "a read-only mapping"
	case code == segvAccErr:
		return "a mapping that allows no access (PROT_NONE, such as a guard page)"
	}
	return "an unmapped address"
}

func byteDist(a, b uint64) string {
	d := a - b
	if b > a {
		d = b - a
	}
	if d < 1024 {
		return fmt.Sprintf("%d bytes", d)
	}
	return fmt.Sprintf("%d KiB", d>>10)
}

func (f *fatal) Findings(env *Env) []Finding {
	var out []Finding
	for _, d := range f.deaths {
		last, pipeFD := d.thread.last(f.arch)
		sigName := event.SignalName(d.sig)
		status := "killed by " + sigName
		if d.core {
			status += " (core dumped)"
		}
		ev := map[string]any{"pid": d.pid, "tid": d.tid, "comm": d.comm, "cgroup": d.cgroup, "signal": sigName,
			"exit_status": 128 + d.sig, "core_dumped": d.core, "last_syscalls": last}
		sev := Warning
		var what, seccompCall string
		var oomKills uint64 // counted while this doctor, or the one before, saw the signal
		if d.sig == 9 && d.signal != nil && d.signal.Code == siKernel {
			oomKills = f.counted() + f.oomBefore[d.tid]
		}
		switch {
		case d.fault != nil && faultSignal(int32(d.sig)):
			sev = Critical
			var siCode int32
			if d.signal != nil && int(d.signal.Sig) == d.sig {
				siCode = d.signal.Code
			}
			where := whatIs(d.fault, int32(d.sig), siCode)
			if d.fault.SP != 0 {
				ev["stack_pointer"] = fmt.Sprintf("%#x", d.fault.SP)
			}
			ev["fault_addr"] = fmt.Sprintf("%#x", d.fault.Addr)
			ev["fault_ip"] = fmt.Sprintf("%#x", d.fault.IP)
			ev["fault_flags"] = event.FaultFlags(d.fault.Error)
			ev["address_is"] = where
			code := ""
			if d.signal != nil {
				code = " (" + event.SigCodeName(int(d.signal.Sig), int(d.signal.Code)) + ")"
				ev["si_code"] = event.SigCodeName(int(d.signal.Sig), int(d.signal.Code))
			}
			what = fmt.Sprintf("a %s at %#x, instruction %#x, in %s%s: %s", accessNoun(d.fault),
				d.fault.Addr, d.fault.IP, where, code, event.FaultFlags(d.fault.Error))
		case faultSignal(int32(d.sig)) && !memorySignal(int32(d.sig)) && d.signal != nil && d.signal.Code > 0 && d.signal.Code < 0x80:
			// SIGFPE, SIGILL, SIGTRAP raised by the CPU (a positive si_code
			// below SI_KERNEL; kill() and tgkill() give 0 or less): the
			// instruction itself, at si_addr.
			sev = Critical
			code := event.SigCodeName(int(d.signal.Sig), int(d.signal.Code))
			ev["si_code"] = code
			ev["fault_ip"] = fmt.Sprintf("%#x", d.signal.Addr)
			desc := instrText[code]
			if desc == "" {
				desc = "an instruction the CPU refused"
			}
			ev["instruction_is"] = desc
			what = fmt.Sprintf("%s at instruction %#x (%s)", desc, d.signal.Addr, code)
		case d.sig == event.SIGSYS && d.signal != nil && d.signal.Code == event.SysSeccomp:
			// Its filter's RET_KILL (or RET_TRAP with no handler): the call
			// was never run. syscall-refused's family, so its id.
			sev = Critical
			seccompCall = d.signal.SeccompCall()
			ev["syscall"] = seccompCall
			ev["syscall_nr"] = d.signal.Syscall
			ev["call_addr"] = fmt.Sprintf("%#x", d.signal.Addr)
			what = fmt.Sprintf("its seccomp filter refused %s (syscall %d, called from %#x)",
				seccompCall, d.signal.Syscall, d.signal.Addr)
			if u := fallbacks[seccompCall].use; u != "" {
				what += "; " + seccompCall + " is for " + u
			}
		case oomKills > 0:
			// SIGKILL from the kernel itself while the kernel counted an OOM kill.
			sev = Critical
			ev["oom_kills"] = oomKills
			what = "SIGKILL from the kernel's out-of-memory killer (the kernel counted OOM kills while the doctor watched)"
		case d.sig == 13 && pipeFD >= 0 && pipeFD <= 2:
			// `producer | head`: the reader stopped early, as it may.
			sev = Info
			ev["fd"] = pipeFD
			what = fmt.Sprintf("SIGPIPE: it wrote to its standard %s after the reader had gone, as a producer in `… | head` does",
				map[int]string{0: "input", 1: "output", 2: "error"}[pipeFD])
		case d.signal != nil && d.signal.SenderPID != 0 && d.signal.SenderPID != d.pid:
			sev = Info // someone sent it: a deliberate kill
			ev["sender_pid"] = d.signal.SenderPID
			what = fmt.Sprintf("%s sent by process %d (%s)", sigName, d.signal.SenderPID,
				event.SigCodeName(int(d.signal.Sig), int(d.signal.Code)))
		case d.signal != nil:
			what = fmt.Sprintf("%s (%s)", sigName, event.SigCodeName(int(d.signal.Sig), int(d.signal.Code)))
			if d.sig == 9 && d.signal.Code == siKernel {
				what += ", sent by the kernel (the OOM killer sends SIGKILL this way)"
			}
		default:
			what = sigName
		}
		summary := fmt.Sprintf("%s was %s after %s.", env.ProcName(d.pid, d.comm), status, what)
		if len(last) > 0 {
			summary += " Its last syscalls: " + strings.Join(last, "; ") + "."
		}
		fix := "Look at the code at the faulting instruction (addr2line -e BINARY " + ipOf(d.fault) + ", or a core dump)."
		if d.fault != nil && strings.HasPrefix(whatIs(d.fault, 0, 0), "the stack guard") {
			fix = "Find the deep or unbounded recursion, or the large arrays on the stack (a core dump's backtrace shows " +
				"the repeating frames); if the depth is legitimate, raise the stack: ulimit -s for the main thread, " +
				"pthread_attr_setstacksize for threads."
		}
		id := FatalSignal
		if _, ok := ev["oom_kills"]; ok {
			id = OOMKill
			fix = "Give the process (its cgroup or container) more memory, or find what grows: the kernel killed it " +
				"because its memory limit, or the host's memory, ran out. dmesg shows the OOM report with the limit."
		} else if d.fault != nil && inVsyscallPage(d.fault.Addr) {
			fix = "See the legacy-vsyscall finding: rebuild on a newer base image, or boot with vsyscall=emulate."
		} else if _, ok := ev["fd"]; ok && sev == Info {
			fix = "Nothing to fix: a pipeline's reader may stop early. A program that must finish its output ignores " +
				"SIGPIPE and handles EPIPE."
		} else if sev == Info {
			fix = "Nothing to fix if the kill was intended."
		} else if ip, ok := ev["instruction_is"]; ok {
			fix = fmt.Sprintf("Look at the instruction at %s (addr2line -e BINARY %s, or a core dump's backtrace): %s. "+
				"Check the operands it uses (a zero divisor, a code path the compiler marked unreachable).", ev["fault_ip"], ev["fault_ip"], ip)
		} else if d.fault == nil {
			fix = "Find out why the signal was raised: abort() and assertion failures print to stderr; the kernel logs OOM kills (dmesg)."
		}
		title := fmt.Sprintf("%s was %s", env.ProcName(d.pid, d.comm), status)
		if seccompCall != "" {
			id = SyscallRefused
			title = fmt.Sprintf("%s was killed by its seccomp filter for calling %s", env.ProcName(d.pid, d.comm), seccompCall)
			summary += " The kernel implements " + seccompCall + "; the policy the process runs under (a container runtime's " +
				"profile, a systemd unit's SystemCallFilter=) does not know it and kills instead of answering ENOSYS, " +
				"so the libc never got the chance to fall back to the older call."
			fix = "Update the runtime's seccomp profile (or the unit's SystemCallFilter=) to allow " + seccompCall +
				", or to answer ENOSYS (SCMP_ACT_ERRNO(ENOSYS)) for syscalls it does not know, so that libc falls back; " +
				"or run an image whose libc is as old as the profile."
		}
		if id == OOMKill {
			title = fmt.Sprintf("%s was killed by the out-of-memory killer", env.ProcName(d.pid, d.comm))
		}
		out = append(out, Finding{ID: id, Severity: sev, Key: keyOf(d.comm, status, seccompCall), Procs: env.refs(d.pid),
			Title: title, Summary: summary,
			Evidence: ev, Fix: fix, Score: 1e9})
	}
	return out
}

func accessNoun(f *event.Fault) string {
	switch {
	case f.Error&0x10 != 0:
		return "jump (instruction fetch)"
	case f.Error&0x2 != 0:
		return "write"
	}
	return "read"
}

// siKernel is the si_code of a signal the kernel itself sends, as the OOM
// killer sends its SIGKILL.
const siKernel = 0x80

// counted is how many OOM kills the kernel counted while this doctor
// watched (one read of /proc/vmstat). A thread whose kernel SIGKILL came in
// the window before adds that window's count (oomBefore): the kernel
// counts the kill before it sends the signal, so a victim's count rose in
// the window that saw its signal.
func (f *fatal) counted() uint64 {
	if f.oomKills == nil {
		return 0
	}
	return f.oomKills() - f.oomAt0
}

func ipOf(f *event.Fault) string {
	if f == nil {
		return "ADDRESS"
	}
	return fmt.Sprintf("%#x", f.IP)
}

// forget drops ended processes' threads (Doctor.forget); their deaths,
// already recorded, stay.
func (f *fatal) forget(pids, tids map[uint32]bool) {
	for tid := range tids {
		delete(f.recent, tid)
		delete(f.faults, tid)
		delete(f.signals, tid)
	}
	for pid := range pids {
		delete(f.culprits, pid)
	}
}
