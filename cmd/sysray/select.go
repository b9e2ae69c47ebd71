package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/filter"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/probe"
	"github.com/sysray/sysray/internal/proc"
)

// selection holds the flags that say what to trace, shared by every live command.
type selection struct {
	pids       []int
	children   bool
	comm       string
	cgroups    []string
	syscalls   []string
	minLatency time.Duration
	pageFaults bool
	stacks     bool
	slow       time.Duration
	filter     string
	duration   time.Duration
	bufferMiB  int
	container  []string
}

func (s *selection) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntSliceVarP(&s.pids, "pid", "p", nil, "trace these processes (repeat or comma-separate)")
	f.BoolVar(&s.children, "children", false, "with -p, also trace their descendants: those running now and those they start")
	f.StringVar(&s.comm, "comm", "", "only events of threads with this name")
	f.StringSliceVar(&s.cgroups, "cgroup", nil, "only processes in this cgroup v2 path (repeatable)")
	f.StringSliceVarP(&s.syscalls, "syscalls", "e", nil, "only these syscalls, e.g. -e openat,connect")
	f.DurationVar(&s.minLatency, "min-latency", 0, "only syscalls slower than this, e.g. 10ms")
	f.BoolVar(&s.pageFaults, "page-faults", false, "record every user page fault (default: only vsyscall-page faults and faults that raise a signal)")
	f.BoolVar(&s.stacks, "stacks", false, "show where slow syscalls slept: kernel stacks, time, and who woke them")
	f.DurationVar(&s.slow, "slow", 10*time.Millisecond, "with --stacks: syscalls at least this slow carry their stacks")
	f.StringVarP(&s.filter, "filter", "f", "", "filter expression, e.g. 'evt.type = openat and evt.failed' (see docs/filter.md)")
	f.DurationVar(&s.duration, "duration", 0, "stop after this long, e.g. 10s")
	f.StringSliceVar(&s.container, "container", nil, "only this container, by id (or 12-char prefix) or name; enforced in the kernel by cgroup")
	f.IntVar(&s.bufferMiB, "buffer-size", 0, "ring buffer per CPU, MiB (default: 64 MiB shared by all CPUs, 8 to 64 each)")
}

// build turns the flags into live options and a user-space filter (nil when none).
func (s *selection) build(args []string, ctrs *liveContainers) (live.Options, *filter.Filter, error) {
	arch := event.HostArch()
	var opts live.Options
	cfg := probe.Config{MinLatency: uint64(s.minLatency), AllFaults: s.pageFaults, Children: s.children,
		Stacks: s.stacks, Slow: uint64(s.slow)}
	if s.stacks && s.slow <= 0 {
		return opts, nil, errors.New("--slow must be positive")
	}
	if s.bufferMiB < 0 || s.bufferMiB > 4096 {
		return opts, nil, fmt.Errorf("--buffer-size %d: want 1 to 4096 MiB", s.bufferMiB)
	}
	cfg.RingSize = s.bufferMiB << 20
	for _, p := range s.pids {
		if p <= 0 {
			return opts, nil, fmt.Errorf("--pid %d: not a process id", p)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", p)); err != nil {
			return opts, nil, fmt.Errorf("--pid %d: no such process", p)
		}
		cfg.PIDs = append(cfg.PIDs, uint32(p))
	}
	if s.children && len(cfg.PIDs) > 0 {
		// The descendants already running count too: `-p` on a service's
		// supervisor means its workers. (One forked between this snapshot
		// and the attach is missed.)
		if snap, err := proc.Snapshot(); err == nil {
			cfg.PIDs = append(cfg.PIDs, proc.Descendants(snap, cfg.PIDs)...)
		}
	}
	for _, cg := range s.cgroups {
		id := proc.CgroupID(strings.TrimPrefix(filepath.Clean("/"+cg), proc.CgroupV2Mount()))
		if id == 0 {
			return opts, nil, fmt.Errorf("--cgroup %s: not found in the cgroup v2 hierarchy (%s)", cg, proc.CgroupV2Mount())
		}
		cfg.Cgroups = append(cfg.Cgroups, id)
	}
	if len(s.container) > 0 {
		ids, err := ctrs.resolve(s.container)
		if err != nil {
			return opts, nil, err
		}
		cfg.Cgroups = append(cfg.Cgroups, ids...)
	}
	if len(s.syscalls) > 0 {
		cfg.Syscalls = []uint32{}
		for _, name := range s.syscalls {
			nr, ok := event.SyscallByName(arch, strings.TrimSpace(name))
			if !ok {
				return opts, nil, fmt.Errorf("-e %s: no such syscall on %s", name, arch)
			}
			cfg.Syscalls = append(cfg.Syscalls, nr)
		}
	}
	var flt *filter.Filter
	expr := s.filter
	if s.comm != "" {
		c := fmt.Sprintf("proc.name = %q", s.comm)
		if expr != "" {
			expr = c + " and (" + expr + ")"
		} else {
			expr = c
		}
	}
	if expr != "" {
		var err error
		flt, err = filter.Parse(expr)
		if err != nil {
			return opts, nil, err
		}
		// Let the kernel drop what the filter would drop anyway.
		set, minLat := flt.Hints(arch)
		if set != nil {
			cfg.Syscalls = intersect(cfg.Syscalls, set)
		}
		if minLat > cfg.MinLatency {
			cfg.MinLatency = minLat
		}
	}
	if s.duration < 0 {
		return opts, nil, errors.New("--duration must be positive")
	}
	opts.Probe = cfg
	opts.Command = args
	opts.Duration = s.duration
	return opts, flt, nil
}

// intersect narrows a syscall selection; nil a means "all".
func intersect(a, b []uint32) []uint32 {
	if a == nil {
		return append([]uint32{}, b...)
	}
	in := map[uint32]bool{}
	for _, x := range b {
		in[x] = true
	}
	out := []uint32{}
	for _, x := range a {
		if in[x] {
			out = append(out, x)
		}
	}
	return out
}

// env gives filters and printers the process and container tables.
type env struct {
	arch  event.Arch
	procs *proc.Table
	ctrs  containers
}

func (e env) Arch() event.Arch { return e.arch }
func (e env) Cmdline(pid uint32) string {
	if e.procs == nil {
		return ""
	}
	return e.procs.Cmdline(pid)
}

func (e env) Container(pid uint32, cg uint64) filter.Container {
	if e.ctrs == nil {
		return filter.Container{}
	}
	return e.ctrs.Container(pid, cg)
}
