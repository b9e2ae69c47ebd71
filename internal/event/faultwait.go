package event

// FaultWait is a window of one thread's sleeps while it was in no syscall:
// asleep (not preempted) with its last entry into the kernel a user page
// fault. Nearly all are the fault's own waits (a file page read from disk,
// a folio locked under I/O, the mmap lock); the stacks say which. The
// kernel adds them up per thread and sends a window at least every 250 ms
// of sleeping, at the thread's exit and when tracing stops. Event.Time is
// the end of the window's last sleep.
type FaultWait struct {
	Start    uint64 // ns: the start of the window's first sleep
	Duration uint64 // ns asleep in all
	Count    uint32 // sleeps
	// MajFaults and MinFaults are the thread's own counters (what
	// getrusage sums) over the window: from its first sleep to the window's
	// end, then from one window's end to the next's.
	MajFaults uint64
	MinFaults uint64
	// Lo and Hi are the lowest and highest user fault address slept on; 0
	// when none was kept.
	Lo, Hi uint64
	// Places are the kernel stacks slept at, longest first as the kernel
	// kept them (at most 4: time at others is in Duration only).
	Places []FaultPlace
	// Mem is the thread's memory cgroup as user space read it where the
	// event was recorded.
	Mem MemFacts
}

// FaultPlace is one kernel stack a thread slept at outside syscalls.
type FaultPlace struct {
	Duration uint64 // ns
	Count    uint32
	Addr     uint64 // the user fault address of the last sleep here; 0 if none was kept
	Stack    []Frame
	// Map is the mapping Addr fell in, read from /proc/PID/maps where the
	// event was recorded; zero when unknown.
	Map Mapping
}

// Mapping is one line of /proc/PID/maps.
type Mapping struct {
	Start, End uint64
	Offset     uint64 // into the file
	Path       string // "" for anonymous memory
	Inode      uint64 // 0 for anonymous memory
}

// Size is the mapping's length in bytes.
func (m *Mapping) Size() uint64 { return m.End - m.Start }

// MemFacts are what a memory cgroup (or the host, when the cgroup has no
// limit) said when read. Counters are cumulative, so two reads of one
// cgroup give what happened between them.
type MemFacts struct {
	Read   bool   // false: not read (a capture's older writer, a sick host)
	Cgroup string // cgroup v2 path of the thread
	// Max and High are memory.max and memory.high in bytes; NoLimit when
	// "max"; 0 when unknown.
	Max, High uint64
	Current   uint64 // memory.current, bytes
	// RefaultFile and RefaultAnon are workingset_refault_file and
	// workingset_refault_anon: pages read back in soon after they were
	// evicted, the kernel's own sign of a working set larger than memory.
	// From the cgroup's memory.stat, or /proc/vmstat when Host.
	RefaultFile, RefaultAnon uint64
	// Host says the counters are the host's (/proc/vmstat): the cgroup
	// sets no limit (or could not be read), so the host's memory is it.
	Host bool
}

// NoLimit stands for "max" in memory.max and memory.high.
const NoLimit = ^uint64(0)
