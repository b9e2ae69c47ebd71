package session

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/event"
)

func nr(t *testing.T, name string) uint32 {
	t.Helper()
	n, ok := event.SyscallByName(event.HostArch(), name)
	if !ok {
		t.Fatalf("no syscall %s", name)
	}
	return n
}

func sorted(s []uint32) []uint32 {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// What the filter says of syscalls and latency reaches the kernel's config.
func TestBuildPushesFilterDown(t *testing.T) {
	openat, read, write := nr(t, "openat"), nr(t, "read"), nr(t, "write")
	for _, tc := range []struct {
		name     string
		sel      Selection
		syscalls []uint32 // nil: all
		minLat   time.Duration
	}{
		{"no filter", Selection{}, nil, 0},
		{"type", Selection{Filter: "evt.type = openat"}, []uint32{openat}, 0},
		{"type in", Selection{Filter: "evt.type in (read, write)"}, sorted([]uint32{read, write}), 0},
		{"-e narrowed by the filter", Selection{Syscalls: []string{"openat", "read"}, Filter: "evt.type in (read, write)"}, []uint32{read}, 0},
		{"-e kept without a syscall filter", Selection{Syscalls: []string{"openat", " read"}, Filter: "evt.failed"}, sorted([]uint32{openat, read}), 0},
		{"latency raises --min-latency", Selection{MinLatency: time.Millisecond, Filter: "evt.latency >= 5ms"}, nil, 5 * time.Millisecond},
		{"latency never lowers it", Selection{MinLatency: 20 * time.Millisecond, Filter: "evt.latency > 5ms"}, nil, 20 * time.Millisecond},
		// An or lets other events through: the kernel must not drop them.
		{"or", Selection{Filter: "evt.type = openat or proc.name = x"}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, flt, err := tc.sel.Build([]string{"true"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if (flt != nil) != (tc.sel.Filter != "") {
				t.Errorf("filter %v for expression %q", flt, tc.sel.Filter)
			}
			got := opts.Probe.Syscalls
			if got != nil {
				got = sorted(got)
			}
			if (got == nil) != (tc.syscalls == nil) || !slices.Equal(got, tc.syscalls) {
				t.Errorf("syscalls %v, want %v", got, tc.syscalls)
			}
			if time.Duration(opts.Probe.MinLatency) != tc.minLat {
				t.Errorf("min latency %v, want %v", time.Duration(opts.Probe.MinLatency), tc.minLat)
			}
			if !slices.Equal(opts.Command, []string{"true"}) {
				t.Errorf("command %q", opts.Command)
			}
		})
	}
}

// --comm is a filter on the thread's name, and with -f both must hold.
func TestBuildComm(t *testing.T) {
	sel := Selection{Comm: "nginx", Filter: "evt.type = openat"}
	opts, flt, err := sel.Build(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(opts.Probe.Syscalls, []uint32{nr(t, "openat")}) {
		t.Errorf("syscalls %v, want openat alone", opts.Probe.Syscalls)
	}
	s := New(event.HostArch(), nil, nil, flt)
	e := syscallOf(1, 0, "openat")
	e.Comm = "nginx"
	if !s.Pass(e) {
		t.Error("nginx's openat did not pass")
	}
	e.Comm = "curl"
	if s.Pass(e) {
		t.Error("curl's openat passed --comm nginx")
	}
	e = syscallOf(1, 0, "read")
	e.Comm = "nginx"
	if s.Pass(e) {
		t.Error("nginx's read passed -f 'evt.type = openat'")
	}
}

func TestBuildFlags(t *testing.T) {
	sel := Selection{PIDs: []int{os.Getpid()}, PageFaults: true, Stacks: true, Slow: 30 * time.Millisecond,
		BufferMiB: 16, Duration: 2 * time.Second}
	opts, flt, err := sel.Build(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := opts.Probe
	if flt != nil || !slices.Equal(p.PIDs, []uint32{uint32(os.Getpid())}) || !p.AllFaults || !p.Stacks ||
		p.Slow != uint64(30*time.Millisecond) || p.RingSize != 16<<20 || opts.Duration != 2*time.Second {
		t.Errorf("options %+v, duration %v, filter %v", p, opts.Duration, flt)
	}
}

// --children adds the descendants already running.
func TestBuildChildren(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sel := Selection{PIDs: []int{os.Getpid()}, Children: true}
	opts, _, err := sel.Build(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(opts.Probe.PIDs, uint32(cmd.Process.Pid)) || !opts.Probe.Children {
		t.Errorf("pids %v (children %v): want the child %d", opts.Probe.PIDs, opts.Probe.Children, cmd.Process.Pid)
	}
	sel.Children = false
	if opts, _, _ = sel.Build(nil, nil); len(opts.Probe.PIDs) != 1 {
		t.Errorf("without --children: pids %v", opts.Probe.PIDs)
	}
}

func TestBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		sel  Selection
		want string
	}{
		{Selection{PIDs: []int{0}}, "--pid 0: not a process id"},
		{Selection{PIDs: []int{1 << 30}}, "no such process"},
		{Selection{Stacks: true}, "--slow must be positive"},
		{Selection{BufferMiB: 5000}, "--buffer-size 5000"},
		{Selection{BufferMiB: -1}, "--buffer-size -1"},
		{Selection{Syscalls: []string{"nosuchcall"}}, "-e nosuchcall: no such syscall"},
		{Selection{Filter: "evt.type ="}, "expected value"},
		{Selection{Duration: -time.Second}, "--duration must be positive"},
		{Selection{MinLatency: -time.Millisecond}, "--min-latency -1ms: a latency cannot be negative"},
		{Selection{Slow: -time.Millisecond}, "--slow must be positive"},
		{Selection{Comm: "0123456789abcdef"}, `--comm "0123456789abcdef" is 16 bytes`},
		{Selection{Cgroups: []string{"/no/such/cgroup/here"}}, "--cgroup /no/such/cgroup/here: not found"},
		{Selection{Containers: []string{"web"}}, "--container"},
	} {
		_, _, err := tc.sel.Build(nil, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one saying %q", tc.sel, err, tc.want)
		}
	}
}

func TestIntersect(t *testing.T) {
	if got := intersect(nil, []uint32{3, 1}); !slices.Equal(got, []uint32{3, 1}) {
		t.Errorf("all ∩ {3,1} = %v", got)
	}
	if got := intersect([]uint32{1, 2, 3}, []uint32{3, 4}); !slices.Equal(got, []uint32{3}) {
		t.Errorf("{1,2,3} ∩ {3,4} = %v", got)
	}
	// Nothing in common is an empty selection, not "all".
	if got := intersect([]uint32{1}, []uint32{2}); got == nil || len(got) != 0 {
		t.Errorf("{1} ∩ {2} = %#v, want empty and not nil", got)
	}
}
