package session

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/filter"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/probe"
	"github.com/sysray/sysray/internal/proc"
)

// Selection is what the flags of a live command say to trace.
type Selection struct {
	PIDs       []int
	Children   bool
	Comm       string
	Cgroups    []string // cgroup v2 paths
	Syscalls   []string
	MinLatency time.Duration
	PageFaults bool
	Stacks     bool
	Slow       time.Duration
	Filter     string
	Duration   time.Duration
	BufferMiB  int
	FastRows   int      // 0: sized from the host
	Containers []string // ids, 12-character prefixes or names
}

// CommMax is how much of a thread's name the kernel keeps (TASK_COMM_LEN
// less its NUL): a program's name is cut to it at exec.
const CommMax = 15

// Build turns the selection into live options and a user-space filter (nil
// when none). What the filter says of syscalls and latency is pushed down
// to the kernel, which then drops those events before they cost anything.
// ctrs resolves Containers; it may be nil when there are none.
func (s *Selection) Build(args []string, ctrs *Live) (live.Options, *filter.Filter, error) {
	arch := event.HostArch()
	var opts live.Options
	cfg := probe.Config{MinLatency: uint64(s.MinLatency), AllFaults: s.PageFaults, Children: s.Children,
		Stacks: s.Stacks, Slow: uint64(s.Slow), FaultWait: s.Stacks}
	if s.Slow < 0 || s.Stacks && s.Slow == 0 {
		return opts, nil, errors.New("--slow must be positive")
	}
	if s.MinLatency < 0 {
		return opts, nil, fmt.Errorf("--min-latency %s: a latency cannot be negative", s.MinLatency)
	}
	if len(s.Comm) > CommMax {
		return opts, nil, fmt.Errorf("--comm %q is %d bytes, and the kernel keeps only the first %d of a thread's name, so it would never match; "+
			"use --comm %q, which matches every name that begins so", s.Comm, len(s.Comm), CommMax, s.Comm[:CommMax])
	}
	if s.BufferMiB < 0 || s.BufferMiB > 4096 {
		return opts, nil, fmt.Errorf("--buffer-size %d: want 1 to 4096 MiB", s.BufferMiB)
	}
	cfg.RingSize = s.BufferMiB << 20
	// The table is indexed by a hash's top bits, so its size is a power of
	// two; a few rows make every row shared, which is how the fallback to
	// task storage is tested, and 1 Mi rows is 640 MiB of kernel memory.
	if s.FastRows != 0 && (s.FastRows < 2 || s.FastRows > 1<<20 || s.FastRows&(s.FastRows-1) != 0) {
		return opts, nil, fmt.Errorf("--fast-rows %d: want a power of two from 2 to 1048576", s.FastRows)
	}
	cfg.FastRows = uint32(s.FastRows)
	for _, p := range s.PIDs {
		if p <= 0 {
			return opts, nil, fmt.Errorf("--pid %d: not a process id", p)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", p)); err != nil {
			return opts, nil, fmt.Errorf("--pid %d: no such process", p)
		}
		cfg.PIDs = append(cfg.PIDs, uint32(p))
	}
	if s.Children && len(cfg.PIDs) > 0 {
		// The descendants already running count too: `-p` on a service's
		// supervisor means its workers. (One forked between this snapshot
		// and the attach is missed.)
		if snap, err := proc.Snapshot(); err == nil {
			cfg.PIDs = append(cfg.PIDs, proc.Descendants(snap, cfg.PIDs)...)
		}
	}
	for _, cg := range s.Cgroups {
		id := proc.CgroupID(strings.TrimPrefix(filepath.Clean("/"+cg), proc.CgroupV2Mount()))
		if id == 0 {
			return opts, nil, fmt.Errorf("--cgroup %s: not found in the cgroup v2 hierarchy (%s)", cg, proc.CgroupV2Mount())
		}
		cfg.Cgroups = append(cfg.Cgroups, id)
	}
	if len(s.Containers) > 0 {
		if ctrs == nil {
			return opts, nil, errors.New("--container: no container table to resolve it with")
		}
		ids, err := ctrs.Resolve(s.Containers)
		if err != nil {
			return opts, nil, err
		}
		cfg.Cgroups = append(cfg.Cgroups, ids...)
	}
	if len(s.Syscalls) > 0 {
		cfg.Syscalls = []uint32{}
		for _, name := range s.Syscalls {
			nr, ok := event.SyscallByName(arch, strings.TrimSpace(name))
			if !ok {
				return opts, nil, fmt.Errorf("-e %s: no such syscall on %s", name, arch)
			}
			cfg.Syscalls = append(cfg.Syscalls, nr)
		}
	}
	flt, err := s.filter()
	if err != nil {
		return opts, nil, err
	}
	if flt != nil {
		// Let the kernel drop what the filter would drop anyway.
		set, minLat := flt.Hints(arch)
		if set != nil {
			cfg.Syscalls = intersect(cfg.Syscalls, set)
		}
		if minLat > cfg.MinLatency {
			cfg.MinLatency = minLat
		}
	}
	if s.Duration < 0 {
		return opts, nil, errors.New("--duration must be positive")
	}
	opts.Probe = cfg
	opts.Command = args
	opts.Duration = s.Duration
	return opts, flt, nil
}

// filter is Filter with --comm folded in; nil when neither is set.
func (s *Selection) filter() (*filter.Filter, error) {
	expr := s.Filter
	if s.Comm != "" {
		c := fmt.Sprintf("proc.name = %q", s.Comm)
		if expr != "" {
			expr = c + " and (" + expr + ")"
		} else {
			expr = c
		}
	}
	if expr == "" {
		return nil, nil
	}
	return filter.Parse(expr)
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
