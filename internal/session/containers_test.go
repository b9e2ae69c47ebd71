package session

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/container"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/filter"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/output"
	"github.com/sysray/sysray/internal/proc"
)

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		c    filter.Container
		want string
	}{
		{filter.Container{}, ""},
		{filter.Container{ID: id64}, id64[:12]},
		{filter.Container{ID: "short", Runtime: "lxc"}, "short"},
		{filter.Container{ID: id64, Name: "web"}, "web"},
		{filter.Container{ID: id64, Name: "web", Image: "nginx:1.25"}, "web (image nginx:1.25)"},
		{filter.Container{ID: id64, Name: "app", Image: "app:2", PodName: "app-7f", PodNamespace: "prod"}, "app (image app:2, pod prod/app-7f)"},
		{filter.Container{ID: id64, PodName: "p", PodNamespace: "ns"}, id64[:12] + " (pod ns/p)"},
	} {
		if got := Describe(tc.c); got != tc.want {
			t.Errorf("Describe(%+v) = %q, want %q", tc.c, got, tc.want)
		}
	}
}

func TestLabel(t *testing.T) {
	if Label(nil) != nil {
		t.Error("a label without containers")
	}
	c := NewCaptured(`[{"id":"` + id2 + `","runtime":"docker","name":"db","image":"postgres:16","cgroups":[900],"pids":[20]}]`)
	l := Label(c)
	if got := l(20, 1); got == nil || *got != (output.Container{ID: id2, Name: "db", Image: "postgres:16", Runtime: "docker"}) {
		t.Errorf("label of pid 20: %+v", got)
	}
	if got := l(21, 1); got != nil {
		t.Errorf("label of a host process: %+v", got)
	}
}

// A capture's container table answers by cgroup first, then by pid (a
// process that moved cgroups keeps the container it was in), and learns
// containers started later from exec events.
func TestCaptured(t *testing.T) {
	c := NewCaptured(`[{"id":"` + id2 + `","runtime":"docker","name":"db","cgroups":[900,901],"pids":[20,21]}]`)
	for _, tc := range []struct {
		pid  uint32
		cg   uint64
		want string
	}{
		{20, 900, id2}, {99, 901, id2}, {21, 5, id2}, {99, 5, ""},
	} {
		if got := c.Container(tc.pid, tc.cg).ID; got != tc.want {
			t.Errorf("Container(%d, %d) = %q, want %q", tc.pid, tc.cg, got, tc.want)
		}
	}
	c.Observe(execIn(50, 902, dockerPath, "web"))
	if got := c.Container(50, 902); got.ID != id64 || got.Runtime != "docker" {
		t.Errorf("after its exec: %+v", got)
	}
	// Not a container's cgroup; other kinds teach nothing.
	c.Observe(execIn(51, 903, "/user.slice/user-0.slice/session-1.scope", "sh"))
	c.Observe(&event.Event{Kind: event.KindFork, PID: 52, Cgroup: 904, Proc: event.Proc{CgroupPath: dockerPath}})
	if c.Container(51, 903).ID != "" || c.Container(52, 904).ID != "" {
		t.Error("learnt a container from a host exec or a fork")
	}
	// An exec does not rename a container the header named.
	c.Observe(execIn(53, 900, dockerPath, "x"))
	if got := c.Container(53, 900); got.Name != "db" {
		t.Errorf("the header's container was replaced: %+v", got)
	}
	for _, bad := range []string{"", "{", "null", `{"id":"x"}`} {
		if NewCaptured(bad).Container(20, 900).ID != "" {
			t.Errorf("a container from meta %q", bad)
		}
	}
}

// The live table remembers a container named by an exec's cgroup path even
// when its cgroup is gone before the table could scan it.
func TestLiveRemembersExecs(t *testing.T) {
	l := newLive()
	defer l.Close()
	const cg = 1<<40 + 7 // no such cgroup on this host
	if l.Ref(60, cg).IsContainer() || l.Container(60, cg).ID != "" {
		t.Fatal("a container before its exec")
	}
	l.Observe(execIn(60, cg, dockerPath, "web"))
	if r := l.Ref(60, cg); r.ID != id64 || r.Runtime != "docker" {
		t.Errorf("Ref after the exec: %+v", r)
	}
	if c := l.Container(61, cg); c.ID != id64 {
		t.Errorf("another process in the cgroup: %+v", c)
	}
	if _, err := l.Resolve([]string{"no-such-container-name"}); err == nil || !strings.Contains(err.Error(), "no such container running") {
		t.Errorf("Resolve of a name no container has: %v", err)
	}
}

// Execs in a host cgroup ask the table for a refresh once, not once each:
// a host building software execs thousands of times a second in a few
// cgroups. A container's cgroup and a host cgroup not seen before ask too.
func TestLiveAsksOncePerHostCgroup(t *testing.T) {
	l := newLiveWith(container.Options{Sources: []container.Source{}})
	defer l.Close()
	kicks := 0
	l.kick = func() { kicks++ }
	const host, other, web = 1<<40 + 1, 1<<40 + 2, 1<<40 + 3 // no such cgroups here
	for pid := uint32(100); pid < 1100; pid++ {
		l.Observe(execIn(pid, host, "/user.slice/user-0.slice/session-1.scope", "cc"))
	}
	if kicks != 1 {
		t.Fatalf("1,000 execs in one host cgroup asked for %d refreshes, want 1", kicks)
	}
	l.Observe(execIn(2000, other, "/system.slice/cron.service", "sh"))
	l.Observe(execIn(2001, web, dockerPath, "web"))
	l.Observe(execIn(2002, web, dockerPath, "web"))
	if kicks != 3 {
		t.Errorf("a new host cgroup and a container's (twice) asked for %d refreshes in all, want 3", kicks)
	}
}

// Exec events seen before the late table is made are handed to it.
func TestLate(t *testing.T) {
	c := NewLate()
	defer c.Close()
	const cg = 1<<40 + 9
	c.Observe(execIn(70, cg, dockerPath, "web"))
	c.Observe(syscallOf(70, cg, "read"))
	c.Start()
	got := c.Container(70, cg)
	if got.ID != id64 {
		t.Errorf("a container execed before the table was made: %+v", got)
	}
	c.Observe(execIn(71, cg+1, "/system.slice/docker-"+id2+".scope", "db"))
	if got := c.Container(71, cg+1); got.ID != id2 {
		t.Errorf("a container execed after: %+v", got)
	}
}

// Never started (a sick host), the late table answers "host" at once.
func TestLateNeverStarted(t *testing.T) {
	c := NewLate()
	c.Observe(execIn(70, 5, dockerPath, "web"))
	start := time.Now()
	if got := c.Container(70, 5); got.ID != "" {
		t.Errorf("a container from a table never made: %+v", got)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("waited %v for a table never made", d)
	}
	c.Close()
	// Closed before it was made: the table is closed as soon as it is.
	c = NewLate()
	c.Close()
	c.Start()
}

func TestLateKeepsFewEarlyExecs(t *testing.T) {
	c := NewLate()
	defer c.Close()
	for i := 0; i < earlyMax+10; i++ {
		c.Observe(execIn(uint32(i), uint64(i), dockerPath, "x"))
	}
	c.mu.Lock()
	n := len(c.early)
	c.mu.Unlock()
	if n != earlyMax {
		t.Errorf("kept %d early execs, want at most %d", n, earlyMax)
	}
}

func TestAddRunning(t *testing.T) {
	tbl := proc.NewTable(nil)
	tbl.Update(execIn(10, 1, "", "new", "--from-event"))
	addRunning(tbl, []proc.Info{
		{PID: 10, Comm: "old", Cmdline: []string{"old", "--from-snapshot"}},
		{PID: 11, Comm: "other", Exe: "/bin/other", Cmdline: []string{"other", "-x"}, Cgroup: 4},
	})
	if got := tbl.Cmdline(10); got != "new --from-event" {
		t.Errorf("a process events told of first: %q", got)
	}
	if got := tbl.Cmdline(11); got != "other -x" {
		t.Errorf("a running process: %q", got)
	}
}

func TestReportDrops(t *testing.T) {
	var b bytes.Buffer
	ReportDrops(&b, live.Result{})
	if b.Len() != 0 {
		t.Errorf("no drops: %q", b.String())
	}
	ReportDrops(&b, live.Result{Drops: 5, PerCPU: []uint64{2, 3}})
	if want := "sysray: 5 events were lost in the kernel (per CPU: [2 3]); results are incomplete\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// slowSource names every container, after a while: a runtime still
// answering when the report asks.
type slowSource struct{ after time.Duration }

func (slowSource) Name() string               { return "slow" }
func (slowSource) Handles(container.Ref) bool { return true }
func (s slowSource) Fetch(ctx context.Context, r container.Ref) (container.Meta, error) {
	select {
	case <-time.After(s.after):
		return container.Meta{Name: "web", Image: "nginx:1.25"}, nil
	case <-ctx.Done():
		return container.Meta{}, ctx.Err()
	}
}

// A report names a container its runtime is still naming (a trace of a
// container that ran before it, -p or the whole host, asks first at the
// report), waiting up to reportWait, not its bare id.
func TestDescriberWaitsForNames(t *testing.T) {
	l := newLiveWith(container.Options{Sources: []container.Source{slowSource{300 * time.Millisecond}}})
	defer l.Close()
	const cg = 1<<40 + 11
	l.Observe(execIn(80, cg, dockerPath, "web"))
	if got := Describer(l)(80, cg); got != "web (image nginx:1.25)" {
		t.Errorf("Describer = %q, want the runtime's name", got)
	}
	if got := Describer(l)(81, 1<<40+12); got != "" {
		t.Errorf("Describer of a host process = %q", got)
	}
	// A runtime that never answers costs the report reportWait, once.
	h := newLiveWith(container.Options{Sources: []container.Source{slowSource{time.Hour}}, MetaTimeout: time.Hour})
	defer h.Close()
	h.Observe(execIn(82, cg+2, dockerPath, "web"))
	h.Observe(execIn(83, cg+3, "/system.slice/docker-"+id2+".scope", "db"))
	d, start := Describer(h), time.Now()
	if got := d(82, cg+2); got != id64[:12] {
		t.Errorf("Describer without an answer = %q, want the id", got)
	}
	d(83, cg+3)
	if el := time.Since(start); el < reportWait || el > reportWait+time.Second {
		t.Errorf("two unnamed containers took %v, want about %v in all", el, reportWait)
	}
}
