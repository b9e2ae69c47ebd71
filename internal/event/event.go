package event

// Kind says which part of Event is meaningful.
type Kind uint8

const (
	KindSyscall        Kind = 1 // a syscall that completed (or was cut off: Syscall.Unfinished)
	KindPageFault      Kind = 2 // a user page fault
	KindVsyscall       Kind = 3 // the kernel emulated a legacy vsyscall
	KindSignalGenerate Kind = 4 // a signal was sent (or dropped: Signal.Result)
	KindSignalDeliver  Kind = 5 // a signal reached its target thread
	KindFork           Kind = 6 // a new process or thread
	KindExec           Kind = 7 // a successful execve/execveat
	KindExit           Kind = 8 // a thread exited
	KindDrop           Kind = 9 // the kernel lost Drop.Count events on CPU
	// KindRecent carries a thread's last syscalls (Proc.Recent) from the
	// kernel to the probe's reader, which folds them into the thread's exit
	// event: consumers never see one.
	KindRecent  Kind = 10
	KindReclaim Kind = 11 // a thread reclaimed memory to charge it to its memory cgroup
	KindCPUWait Kind = 12 // a thread waited for a CPU: one long wait, or its totals (CPUWait)
	// KindFaultWait is a window of a thread's sleeps outside syscalls
	// (FaultWait): nearly all of them inside page faults.
	KindFaultWait Kind = 13
	KindFutex     Kind = 14 // a thread's futex waits and wakes on one address, summed in the kernel
)

var kindNames = [...]string{
	KindSyscall:        "syscall",
	KindPageFault:      "page_fault",
	KindVsyscall:       "vsyscall",
	KindSignalGenerate: "signal_generate",
	KindSignalDeliver:  "signal_deliver",
	KindFork:           "fork",
	KindExec:           "exec",
	KindExit:           "exit",
	KindDrop:           "drop",
	KindReclaim:        "reclaim",
	KindFutex:          "futex",
	KindFaultWait:      "fault_wait",
	KindCPUWait:        "cpu_wait",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "unknown"
}

// KindByName is the inverse of Kind.String.
func KindByName(s string) (Kind, bool) {
	for k, n := range kindNames {
		if n == s && n != "" {
			return Kind(k), true
		}
	}
	return 0, false
}

// Event is one thing that happened at the boundary between a thread and the
// kernel. Only the sub-struct that matches Kind is meaningful; the others are
// zero. Every consumer (printer, capture writer, filter, detectors) reads this
// one type, so a live stream and a capture file look the same.
type Event struct {
	Kind   Kind
	Time   uint64 // ns on CLOCK_MONOTONIC; for syscalls, the entry time
	CPU    uint32
	PID    uint32 // thread group id
	TID    uint32
	Comm   string
	Cgroup uint64 // cgroup v2 id of the thread

	Syscall  Syscall
	Fault    Fault
	Vsyscall Vsyscall
	Signal   Signal
	Proc     Proc
	Drop     Drop
	Reclaim  Reclaim
	Futex    Futex
	// FaultWait is set for KindFaultWait (faultwait.go).
	FaultWait FaultWait
	CPUWait   CPUWait
}

// Syscall is one completed (or unfinished) system call.
type Syscall struct {
	Nr         uint32
	Args       [6]uint64
	Ret        int64
	Latency    uint64 // ns from entry to exit; for unfinished calls, entry to cut-off
	Unfinished bool   // the thread died or the capture stopped inside the call
	// Approx marks a latency known to within a kernel tick, not timed by
	// the clock (budgeted timing in the doctor; see docs/doctor.md).
	Approx bool
	// Refused marks a call a seccomp filter answered itself: the kernel
	// never ran it, and Ret is the filter's errno. Latency is then 0.
	Refused bool
	// Maps is the number of memory mappings the process had when the call
	// returned, where the kernel read it (the doctor, live); 0 otherwise.
	Maps uint32
	// Queued is how long the call was runnable without a CPU (preempted),
	// in ns: the host's CPU queue, not the call's own work. Known where
	// sysray follows switches (--stacks, the doctor); 0 otherwise.
	Queued uint64
	// Data holds bytes the kernel copied for argument i: a path or other
	// string (without its NUL), or a socket address. Nil when not captured.
	Data [6][]byte
	// Truncated marks Data entries cut at the kernel's copy limit.
	Truncated [6]bool
	// With stacks on, a syscall slower than the threshold carries the
	// places it slept and the user stack that made the call.
	UserStack []Frame
	Sleeps    []Sleep
}

// Untimed reports a call the clock did not time (past the budget of
// budgeted timing) that ended in the kernel tick it began in: its latency
// is unknown, not zero. Sums over such calls must estimate them from the
// timed ones rather than add 0.
func (s *Syscall) Untimed() bool { return s.Approx && s.Latency == 0 }

// Sleep is one place a syscall waited off CPU: the kernel stack it was
// switched out at, for how long in all, and who woke it last.
type Sleep struct {
	Duration   uint64 // ns off CPU at this place
	Count      uint32 // times switched out here
	Preempted  bool   // still runnable: preempted or waiting for a CPU, not blocked
	Stack      []Frame
	WakerPID   uint32
	WakerTID   uint32
	WakerComm  string
	WakerStack []Frame
}

// Frame is one return address of a stack, innermost first. Name is the
// symbol ("schedule_timeout+0x9d", "time+0xd [libc.so.6]"), resolved where
// the event was recorded; empty if unknown.
type Frame struct {
	Addr uint64
	Name string
}

// Fault is a user page fault.
type Fault struct {
	Addr  uint64
	IP    uint64
	Error uint64 // x86 page-fault error code (see FaultFlags)
	SP    uint64 // user stack pointer at the fault; 0 when unknown (older captures)
}

// Vsyscall is one kernel emulation of a call into the legacy vsyscall page.
type Vsyscall struct {
	Nr       uint32 // 0 gettimeofday, 1 time, 2 getcpu
	CallerIP uint64 // return address on the user stack: who called the page
}

// Signal is a signal generated for, or delivered to, a thread.
type Signal struct {
	Sig       int32
	Code      int32 // si_code
	SenderPID uint32
	TargetPID uint32
	TargetTID uint32
	Addr      uint64 // si_addr for SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP
	Result    int32  // signal_generate only: TRACE_SIGNAL_* result
	Group     bool   // sent to the whole thread group
	Handler   uint64 // signal_deliver only: sa_handler (0 SIG_DFL, 1 SIG_IGN)
	// SIGSYS raised by seccomp (Code SysSeccomp) only: the call the filter
	// refused (si_syscall, a number of Arch, si_arch: an AUDIT_ARCH_*
	// value). Addr is then the address after the syscall instruction.
	Syscall int32
	Arch    uint32
}

// SIGSYS and its si_code for a seccomp filter's RET_KILL or RET_TRAP.
const (
	SIGSYS     = 31
	SysSeccomp = 1
)

// Proc describes fork, exec and exit events.
type Proc struct {
	// Fork: the parent is the event's PID/TID; the child is ChildPID/ChildTID.
	ChildPID  uint32
	ChildTID  uint32
	Thread    bool   // fork only: the child shares the parent's thread group
	ChildComm string // fork only

	// Exec.
	Filename string
	Argv     []string
	// ArgvTruncated: Argv is a prefix of the command line. The kernel side
	// copies its first 512 bytes; a command line that fills them is taken
	// as cut, which is wrong only for one exactly 512 bytes long.
	ArgvTruncated bool
	OldTID        uint32 // the tid that called execve (differs when a non-leader thread execs)
	// CgroupPath is the cgroup v2 path at exec (its last few components;
	// "/" on the host), so the container stays known after its cgroup is gone.
	CgroupPath string

	// Exit.
	ExitCode   int32 // raw wait status bits: (code<<8)|sig|0x80 when core dumped
	GroupDead  bool  // last thread of the process
	Unfinished bool  // set when an in-flight syscall was emitted with the exit
	// Recent are the thread's last syscalls, oldest first, when it was
	// killed by a signal while the doctor sampled calls (live only; their
	// arguments were not read).
	Recent []RecentCall
}

// RecentCall is a syscall remembered without its arguments.
type RecentCall struct {
	Time    uint64 // entry, ns
	Nr      uint32
	Ret     int64
	Latency uint64
}

// Reclaim is one pass of reclaim or compaction a thread made, What says
// which. Memory-cgroup reclaim (try_to_free_mem_cgroup_pages): its cgroup,
// or one above it, was at a memory limit when the thread charged memory
// (or a write to memory.reclaim or memory.high asked for it; Stack tells
// which). Direct reclaim and direct compaction: the page allocator found
// too little free memory, or none contiguous enough for the order, and made
// the thread that asked free or move pages itself. Event.Time is when it
// ended.
type Reclaim struct {
	Duration uint64 // ns, on and off the CPU
	// Pages: reclaimed (reclaim); pages the migration scanner looked at
	// (compaction).
	Pages uint64
	// Nr is the syscall the thread was in; -1 outside one (a page fault in
	// user mode, or the memory.high penalty on the way back to it).
	Nr    int32
	Stack []Frame // kernel stack, with stacks on; nil otherwise
	What  ReclaimWhat
	// Order is the allocation's order (direct reclaim and compaction: 9 is
	// a 2 MiB huge page on x86-64); 0 for memory-cgroup reclaim, which
	// does not keep it.
	Order int16
	// Status is compaction's result (the kernel's enum compact_result); 0
	// otherwise.
	Status int32
	// FaultAddr, with Nr -1, is the address of the user page fault the
	// pass ran in, when the probe kept it; 0 otherwise.
	FaultAddr uint64
}

// ReclaimWhat says what a Reclaim event timed.
type ReclaimWhat uint8

const (
	ReclaimMemcg   ReclaimWhat = 0 // memory-cgroup reclaim
	ReclaimDirect  ReclaimWhat = 1 // global direct reclaim in the page allocator
	ReclaimCompact ReclaimWhat = 2 // direct compaction of one zone in the page allocator
)

// String names w as the kernel's tracepoints do.
func (w ReclaimWhat) String() string {
	switch w {
	case ReclaimMemcg:
		return "memcg reclaim"
	case ReclaimDirect:
		return "direct reclaim"
	case ReclaimCompact:
		return "direct compaction"
	}
	return "reclaim?"
}

// Futex is what one thread did on one futex word (Addr, in its process's
// address space) since its last Futex event: the kernel sums the calls
// (the doctor, record --stacks), which are mostly far too quick to cross
// over one by one. Event.Time is when the sums were read; the counts are
// the growth since the thread's previous Futex event for Addr.
type Futex struct {
	Addr     uint64
	Waits    uint64 // calls that wait (FUTEX_WAIT, WAIT_BITSET, LOCK_PI, LOCK_PI2, WAIT_REQUEUE_PI, futex_wait)
	Slept    uint64 // of them, the ones that went to sleep
	Woken    uint64 // slept and returned 0: woken, or handed the PI lock
	Timeouts uint64 // ended by their timeout (ETIMEDOUT)
	Again    uint64 // found the word changed and did not sleep (EAGAIN)
	ByProc   uint64 // slept and were last woken by another thread of the same process
	WaitNS   uint64 // time asleep in them, not counting time preempted
	MaxNS    uint64 // the longest such sleep of the thread on Addr so far (not only this interval's)
	Wakes    uint64 // calls that wake (FUTEX_WAKE, WAKE_BITSET, WAKE_OP, UNLOCK_PI, requeues, futex_wake)
	Woke     uint64 // threads they woke (for requeues, woken and moved)
	WokeOne  uint64 // wake calls that woke exactly one thread
	WakerTID uint32 // the thread that last woke one of these waits; 0 if none seen
	// The user stacks of the thread's first wait that slept and first wake
	// that woke someone on Addr, each on the first event after it was
	// taken; nil otherwise.
	WaitStack []Frame
	WakeStack []Frame
}

// Drop reports events the kernel could not hand to user space.
type Drop struct {
	Count uint64
}

// Status splits a raw exit code into its parts.
func (p *Proc) Status() (code int, sig int, core bool) {
	return int(p.ExitCode>>8) & 0xff, int(p.ExitCode) & 0x7f, p.ExitCode&0x80 != 0
}

// End is the time a syscall returned.
func (e *Event) End() uint64 {
	if e.Kind == KindSyscall {
		return e.Time + e.Syscall.Latency
	}
	return e.Time
}

// Failed reports whether a syscall returned an error (-4095..-1).
func (s *Syscall) Failed() bool { return s.Ret < 0 && s.Ret >= -4095 }
