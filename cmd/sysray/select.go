package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/session"
)

// registerSelection adds the flags that say what to trace, shared by every
// live command.
func registerSelection(cmd *cobra.Command, s *session.Selection) {
	f := cmd.Flags()
	f.IntSliceVarP(&s.PIDs, "pid", "p", nil, "trace these processes (repeat or comma-separate)")
	f.BoolVar(&s.Children, "children", false, "with -p, also trace their descendants: those running now and those they start")
	f.StringVar(&s.Comm, "comm", "", "only events of threads with this name, as the kernel keeps it: at most 15 bytes "+
		"(a longer name is refused, not cut: cut, it would also match other programs whose names begin the same)")
	f.StringSliceVar(&s.Cgroups, "cgroup", nil, "only processes in this cgroup v2 path (repeatable)")
	f.StringSliceVarP(&s.Syscalls, "syscalls", "e", nil, "only these syscalls, e.g. -e openat,connect")
	f.DurationVar(&s.MinLatency, "min-latency", 0, "only syscalls slower than this, e.g. 10ms")
	f.BoolVar(&s.PageFaults, "page-faults", false, "record every user page fault (default: only vsyscall-page faults and faults that raise a signal)")
	f.BoolVar(&s.Stacks, "stacks", false, "show where slow syscalls slept: kernel stacks, time, and who woke them")
	f.DurationVar(&s.Slow, "slow", time.Duration(event.DefaultSlow), "with --stacks: syscalls at least this slow carry their stacks")
	f.StringVarP(&s.Filter, "filter", "f", "", "filter expression, e.g. 'evt.type = openat and evt.failed' (see docs/filter.md)")
	f.DurationVar(&s.Duration, "duration", 0, "stop after this long, e.g. 10s")
	f.StringSliceVar(&s.Containers, "container", nil, "only this container, by id (or 12-char prefix) or name; enforced in the kernel by cgroup")
	f.IntVar(&s.BufferMiB, "buffer-size", 0, "ring buffer per CPU, MiB (default: 64 MiB shared by all CPUs, 8 to 64 each)")
	f.IntVar(&s.FastRows, "fast-rows", 0, "rows of the in-kernel table whole-host tracing uses instead of per-thread storage, a power of two "+
		"(default: 4 per thread on the host, 4,096 to 16,384; a call whose row another thread holds takes the slower path, nothing is lost)")
}

// durationHelp says in a live command's help what --duration does to a
// command it runs (internal/live): tracing stops at the duration, and the
// command, if still running, is ended as perf stat --timeout ends its own.
func durationHelp(cmd *cobra.Command) {
	cmd.Flags().Lookup("duration").Usage = "stop after this long, e.g. 10s; a COMMAND still running then is sent SIGTERM " +
		"(SIGKILL 10s later) and sysray exits 0"
}
