package session

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/filter"
	"github.com/sysray/sysray/internal/proc"
)

// id64 is a docker container id; dockerPath the cgroup its processes run in.
const id64 = "4c01db0b339c7d7bf6a3c1e0d5e2f6a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4"

var dockerPath = "/system.slice/docker-" + id64 + ".scope"

func execIn(pid uint32, cg uint64, path string, argv ...string) *event.Event {
	return &event.Event{Kind: event.KindExec, PID: pid, TID: pid, Comm: argv[0], Cgroup: cg,
		Proc: event.Proc{Filename: "/bin/" + argv[0], Argv: argv, CgroupPath: path}}
}

func syscallOf(pid uint32, cg uint64, nr string) *event.Event {
	n, ok := event.SyscallByName(event.HostArch(), nr)
	if !ok {
		panic(nr)
	}
	return &event.Event{Kind: event.KindSyscall, PID: pid, TID: pid, Cgroup: cg, Syscall: event.Syscall{Nr: n}}
}

func mustParse(t *testing.T, expr string) *filter.Filter {
	t.Helper()
	f, err := filter.Parse(expr)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The filter decides for every event but drops: a notice of lost events is
// never filtered out, whatever the expression.
func TestPassDropsAlwaysPass(t *testing.T) {
	s := New(event.HostArch(), nil, nil, mustParse(t, "evt.type = openat"))
	drop := &event.Event{Kind: event.KindDrop, Drop: event.Drop{Count: 7}}
	if !s.Pass(drop) {
		t.Error("a drop event did not pass a filter on openat")
	}
	if s.Pass(syscallOf(10, 0, "read")) {
		t.Error("read passed a filter on openat")
	}
	if !s.Pass(syscallOf(10, 0, "openat")) {
		t.Error("openat did not pass a filter on openat")
	}
	// Even an expression that names the drop kind as unwanted.
	s.Filter = mustParse(t, "evt.kind != drop")
	if !s.Pass(drop) {
		t.Error("a drop event did not pass 'evt.kind != drop'")
	}
	s.Filter = nil
	if !s.Pass(syscallOf(10, 0, "read")) {
		t.Error("without a filter an event did not pass")
	}
}

// The tables see the events the filter rejects: the exec that names a
// process and its container comes before the calls a filter keeps.
func TestPassUpdatesTablesForRejectedEvents(t *testing.T) {
	const cg = 4242
	procs := proc.NewTable(nil)
	s2 := New(event.HostArch(), procs, NewCaptured(""),
		mustParse(t, "container.id != host and proc.cmdline contains --serve and evt.type = openat"))
	if s2.Pass(execIn(77, cg, dockerPath, "web", "--serve")) {
		t.Fatal("an exec passed a filter on openat")
	}
	if got := s2.Cmdline(77); !strings.Contains(got, "--serve") {
		t.Errorf("Cmdline(77) = %q after a rejected exec, want it to hold --serve", got)
	}
	if got := s2.Container(77, cg).ID; got != id64 {
		t.Errorf("container of cgroup %d = %q after a rejected exec, want %s", cg, got, id64)
	}
	if !s2.Pass(syscallOf(77, cg, "openat")) {
		t.Error("the container's openat did not pass: the filter did not see the tables")
	}
	if s2.Pass(syscallOf(78, 1, "openat")) {
		t.Error("an openat on the host passed 'container.id != host'")
	}
}

func TestEnvWithoutTables(t *testing.T) {
	s := New(event.HostArch(), nil, nil, nil)
	if s.Cmdline(1) != "" || s.Container(1, 1).ID != "" || s.Arch() != event.HostArch() {
		t.Errorf("empty session: cmdline %q, container %+v, arch %v", s.Cmdline(1), s.Container(1, 1), s.Arch())
	}
}
