package event

// CPUWaitBuckets is the length of CPUWaitSum.Hist.
const CPUWaitBuckets = 8

// CPUWait is time a thread spent runnable without a CPU (KindCPUWait): from
// a wake-up, or a preemption, to the switch that gave it one. Event's
// header names the waiting thread; Event.CPU is where it got the CPU and
// Event.Time when. Summary says which of two records it is: one wait long
// enough to be told (Wait, Woken, Nr, who ran meanwhile), or the thread's
// totals since its last summary (Sum).
type CPUWait struct {
	Summary bool
	Wait    uint64 // ns, this wait
	Woken   bool   // the wait began at a wake-up; else the thread was preempted
	Nr      int32  // syscall in flight; -1: none, or not known
	// IdleNS is how much of the wait the CPU it ended on was idle, in
	// the CPU's last switches (a throttled cgroup's threads wait so, for
	// quota, not for another task).
	IdleNS uint64
	// NrRunning is how many tasks the CPU's run queue held as the wait
	// ended, the waiter included.
	NrRunning uint32
	Task      SchedTask // the waiter's priority and CPUs
	// Held is who ran on that CPU during the wait, the longest first (at
	// most CPUWaitHolders; a wait longer than the CPU's last 16 switches
	// is told from those).
	Held []SchedTask
	Sum  CPUWaitSum
}

// CPUWaitHolders is the most tasks a wait names in Held.
const CPUWaitHolders = 3

// SchedTask is a task as the scheduler sees it.
type SchedTask struct {
	NS       uint64 // Held only: ns it ran during the wait
	PID, TID uint32 // Held only: the waiter's are the event's
	Comm     string // Held only
	Cgroup   uint64 // Held only
	// Group names the scheduling group the task is in (its cgroup's, or
	// its session's autogroup): nice weighs tasks against those of their
	// own group only; groups share a CPU by their weights. An opaque id,
	// equal for tasks of one group.
	Group uint64
	// Prio is the kernel's priority: 0-99 real-time (lower runs first),
	// 100-139 for the normal policies, 120 + nice.
	Prio   uint8
	Policy uint8 // SCHED_OTHER 0, FIFO 1, RR 2, BATCH 3, IDLE 5, DEADLINE 6, EXT 7
	// Allowed is the CPUs it may run on (the first 64, one bit each);
	// NrAllowed counts them all.
	Allowed   uint64
	NrAllowed uint32
}

// CPUWaitSum is a thread's time on and waiting for a CPU over a span.
type CPUWaitSum struct {
	Run           uint64 // ns on a CPU
	WaitWoken     uint64 // ns runnable without a CPU after wake-ups
	WaitPreempted uint64 // ns runnable without a CPU after preemptions
	WaitIdle      uint64 // of the waits, ns of those that ended with the CPU coming from idle
	WaitSyscall   uint64 // of the waits, ns inside a syscall
	Max           uint64 // ns, the longest wait
	Waits         uint32
	// Hist counts waits by length: under 16 µs, then below 64, 256 µs,
	// 1, 4, 16, 64 ms, and longer.
	Hist [CPUWaitBuckets]uint32
}

// Waited is the time the thread waited for a CPU in all.
func (s *CPUWaitSum) Waited() uint64 { return s.WaitWoken + s.WaitPreempted }

// Add adds o's counts to s.
func (s *CPUWaitSum) Add(o *CPUWaitSum) {
	s.Run += o.Run
	s.WaitWoken += o.WaitWoken
	s.WaitPreempted += o.WaitPreempted
	s.WaitIdle += o.WaitIdle
	s.WaitSyscall += o.WaitSyscall
	s.Max = max(s.Max, o.Max)
	s.Waits += o.Waits
	for i := range s.Hist {
		s.Hist[i] += o.Hist[i]
	}
}
