package checkup

import (
	"time"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/probe"
)

// Mode is who runs the doctor live, which decides what its probe carries.
type Mode int

const (
	// Command is `sysray doctor` (and demo, variants) over the host or
	// the selected processes: a run that ends, and then the report.
	Command Mode = iota
	// Filtered is `sysray doctor -f EXPR`: every matching call crosses
	// over as an event, none is counted in the kernel.
	Filtered
	// Agent is the agent's doctor: always on, on rolling windows, on
	// hosts whose own work must not pay for it.
	Agent
)

// Configure sets c up as the doctor in mode m reads the kernel; the
// selection (pids, cgroups, --slow, stacks) is the caller's.
//
// Counted (Command, Agent): the kernel counts every syscall; only
// failures, slow calls with their sleep stacks and one call in 64 others
// (at most one per gap per thread) cross over as events. That keeps the
// doctor's cost near stat's while every detector gets what it needs
// (docs/doctor-internals.md).
func Configure(c *probe.Config, arch event.Arch, m Mode) {
	// No detector reads a waker's stack or a slow call's user stack, nor
	// where a call that waits by design briefly waited.
	c.LeanStacks = true
	c.WaitCalls = WaitCalls(arch)
	// Direct compaction and direct reclaim, for compaction-stall: their
	// tracepoints fire only when the page allocator runs short of free
	// or contiguous memory (and in kcompactd, left at once).
	c.Compaction = true
	switch m {
	case Command, Filtered:
		// Futex waits and wakes summed by address, for lock-convoy: a
		// contended lock's waits are microseconds, under any slow bar.
		c.Futex = true
		// Waits for a CPU, for cpu-wait.
		c.RunQueue = true
	case Agent:
		// Neither lock-convoy's futex sums nor cpu-wait's run-queue waits:
		// their cost on a busy server (bench/redis.sh) is not measured
		// yet, and the agent's budget is 1% of its throughput.
		c.Stacks = true
	}
	if m == Filtered {
		return
	}
	c.Stat = true
	c.Sample = 64
	switch m {
	case Command:
		c.SampleGap = uint64(time.Millisecond)
		// A process's first calls of each syscall cross over too (the
		// 1st, 2nd, 4th ... 64th), so a syscall it makes a few times
		// shows how its latency moves.
		c.Firsts = true
		// Budgeted timing, as stat times calls: the clock for a
		// thread's first calls of each syscall in each tick, 1 in 16
		// after that. A syscall a process makes now and then is timed
		// exactly, however long it runs on the CPU.
		c.UseBudget()
	case Agent:
		// Ten times the command's gap: on a server of 50 busy threads
		// 1 ms let 50,000 sampled calls a second cross over, which the
		// agent then decoded, diagnosed and recorded on the server's own
		// CPUs. Failures and slow calls still all cross. (Budgeted timing
		// is the agent's choice: --exact-timing turns it off.)
		c.SampleGap = uint64(10 * time.Millisecond)
	}
}

// WaitCalls are the numbers of the syscalls that wait by design (event.Waits),
// whose brief interruptible sleeps the doctor's probe follows without their
// stacks (probe.Config.WaitCalls): no detector looks at them but for an
// audit backlog's wait, which is uninterruptible and keeps its stack.
func WaitCalls(arch event.Arch) []uint32 {
	var out []uint32
	for _, name := range event.Names(event.Waits) {
		if nr, ok := event.SyscallByName(arch, name); ok {
			out = append(out, nr)
		}
	}
	return out
}
