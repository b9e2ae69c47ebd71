package container

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fakeHost is a cgroup v2 tree and a /proc with cgroup files, in temp dirs.
type fakeHost struct {
	t      *testing.T
	cgroup string
	proc   string
}

func newFakeHost(t *testing.T) *fakeHost {
	h := &fakeHost{t: t, cgroup: t.TempDir(), proc: t.TempDir()}
	return h
}

func (h *fakeHost) mkcg(path string) uint64 {
	h.t.Helper()
	full := filepath.Join(h.cgroup, path)
	if err := os.MkdirAll(full, 0o755); err != nil {
		h.t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(full, &st); err != nil {
		h.t.Fatal(err)
	}
	return st.Ino
}

func (h *fakeHost) proc_(pid int, cgroupFile string) {
	h.t.Helper()
	dir := filepath.Join(h.proc, itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroupFile), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func itoa(n int) string { return string(appendInt(nil, n)) }
func appendInt(b []byte, n int) []byte {
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}

func hybrid(v1path, v2path string) string {
	return "9:name=systemd:" + v1path + "\n4:memory:" + v1path + "\n1:cpu:" + v1path + "\n0::" + v2path + "\n"
}

// fakeSource answers from a map, optionally after a delay or never.
type fakeSource struct {
	name    string
	runtime string
	meta    map[string]Meta
	block   chan struct{} // if set, Fetch waits for it (or ctx)
	calls   atomic.Int32
	ns      []string
}

func (f *fakeSource) Name() string       { return f.name }
func (f *fakeSource) Handles(r Ref) bool { return r.Runtime == f.runtime }
func (f *fakeSource) Fetch(ctx context.Context, r Ref) (Meta, error) {
	f.calls.Add(1)
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return Meta{}, ctx.Err()
		}
	}
	m, ok := f.meta[r.ID]
	if !ok {
		return Meta{}, ErrNotFound
	}
	return m, nil
}

type nsSource struct {
	fakeSource
}

func (n *nsSource) Namespaces(context.Context) ([]string, error) { return n.ns, nil }

func newTable(t *testing.T, h *fakeHost, o Options) *Table {
	t.Helper()
	o.CgroupRoot, o.ProcRoot = h.cgroup, h.proc
	if o.Interval == 0 {
		o.Interval = time.Hour // tests refresh by hand
	}
	if o.Sources == nil {
		o.Sources = []Source{}
	}
	tb := NewTable(o)
	t.Cleanup(func() { tb.Close() })
	select {
	case <-tb.Ready():
	case <-time.After(5 * time.Second):
		t.Fatal("table never became ready")
	}
	return tb
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTableLookup(t *testing.T) {
	h := newFakeHost(t)
	root := h.mkcg(".")
	web := h.mkcg("default/web")
	webSub := h.mkcg("default/web/sub")
	dock := h.mkcg("system.slice/docker-" + id64 + ".scope")
	ctrd := h.mkcg("system.slice/containerd.service")
	pod := h.mkcg("kubepods/burstable/pod" + podU)
	kc := h.mkcg("kubepods/burstable/pod" + podU + "/" + id64b)
	session := h.mkcg("user.slice/user-0.slice/session-1.scope")

	h.proc_(100, hybrid("/default/web", "/default/web"))                        // v1 and v2 agree
	h.proc_(101, hybrid("/default/hybrid", "/"))                                // v1 only, v2 root
	h.proc_(102, hybrid("/default/hybrid", "/system.slice/containerd.service")) // v1 only, v2 in service
	h.proc_(103, hybrid("/", "/user.slice/user-0.slice/session-1.scope"))
	h.proc_(104, hybrid("/system.slice/cron.service", "/system.slice/cron.service"))
	h.proc_(105, "0::/default/web\n") // moved there from the session by its own write

	tb := newTable(t, h, Options{})

	wantWeb := Ref{Runtime: "containerd", Namespace: "default", ID: "web", Path: "/default/web"}
	hyb := Ref{Runtime: "containerd", Namespace: "default", ID: "hybrid", Path: "/default/hybrid"}
	tests := []struct {
		name string
		pid  uint32
		cg   uint64
		want Ref
	}{
		{"cgroup names container", 100, web, wantWeb},
		{"cgroup wins over unknown pid", 9999, web, wantWeb},
		{"sub-cgroup of container", 100, webSub, Ref{Runtime: "containerd", Namespace: "default", ID: "web", Path: "/default/web/sub"}},
		{"docker scope", 0, dock, Ref{Runtime: "docker", ID: id64, Path: "/system.slice/docker-" + id64 + ".scope"}},
		{"kube container", 0, kc, Ref{Runtime: "cri", ID: id64b, PodUID: podU, QoS: "burstable", Path: "/kubepods/burstable/pod" + podU + "/" + id64b}},
		{"kube pod cgroup", 0, pod, Ref{PodUID: podU, QoS: "burstable", Path: "/kubepods/burstable/pod" + podU}},
		{"hybrid: v2 root, pid says container", 101, root, hyb},
		{"hybrid: cgroup id 0, pid says container", 101, 0, hyb},
		{"hybrid: v2 in service, pid says container", 102, ctrd, hyb},
		{"service by cgroup", 104, ctrd, Ref{Service: "containerd", Path: "/system.slice/containerd.service"}},
		{"service by pid", 104, root, Ref{Service: "cron", Path: "/system.slice/cron.service"}},
		{"host session", 103, root, Ref{Path: "/user.slice/user-0.slice/session-1.scope"}},
		{"moved into a container: a call made before, in a host cgroup", 105, session, Ref{Path: "/user.slice/user-0.slice/session-1.scope"}},
		{"moved into a container: a call made before, in the root", 105, root, Ref{}},
		{"moved into a container: a call made there", 105, web, wantWeb},
		{"moved into a container: a cgroup newer than the walk", 105, 424242, wantWeb},
	}
	for _, tt := range tests {
		if got := tb.Lookup(tt.pid, tt.cg); got != tt.want {
			t.Errorf("%s: Lookup(%d, %d)\n got  %+v\n want %+v", tt.name, tt.pid, tt.cg, got, tt.want)
		}
	}
	if _, ok := tb.ByCgroup(root); ok {
		t.Errorf("root cgroup should not be in the table")
	}
	if p, ok := tb.CgroupPath(web); !ok || p != "/default/web" {
		t.Errorf("CgroupPath = %q, %v", p, ok)
	}

	// A process that appears after the refresh: host at first, then probed
	// in the background, without a refresh.
	h.proc_(200, hybrid("/default/late", "/"))
	if got := tb.Lookup(200, root); !got.IsHost() {
		t.Errorf("unprobed pid: %+v", got)
	}
	eventually(t, "pid 200 probed", func() bool { return tb.Lookup(200, root).ID == "late" })

	// A refresh sees containers that appeared since.
	newc := h.mkcg("default/new")
	if _, ok := tb.ByCgroup(newc); ok {
		t.Fatal("known before refresh")
	}
	tb.Refresh(context.Background())
	if r, ok := tb.ByCgroup(newc); !ok || r.ID != "new" {
		t.Errorf("after refresh: %+v %v", r, ok)
	}

	cs := tb.Containers()
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.Ref.String())
		if c.Ref.ID == "hybrid" && (!c.OnlyV1 || len(c.PIDs) != 2 || len(c.CgroupIDs) != 0) {
			t.Errorf("hybrid container: %+v", c)
		}
		if c.Ref.ID == "web" && (c.OnlyV1 || len(c.PIDs) != 2 || len(c.CgroupIDs) != 2) {
			t.Errorf("web container: %+v", c)
		}
	}
	t.Logf("containers: %q", ids)
	if len(cs) != 7 { // web, hybrid, late, new, docker, kube container, kube pod
		t.Errorf("Containers() = %d entries: %q", len(cs), ids)
	}
}

func TestTableLearnsNamespaces(t *testing.T) {
	h := newFakeHost(t)
	bk := h.mkcg("buildkit/job1")
	src := &nsSource{fakeSource{name: "containerd", runtime: RuntimeContainerd, ns: []string{"buildkit"}}}
	tb := newTable(t, h, Options{Sources: []Source{src}})
	if r, ok := tb.ByCgroup(bk); !ok || r.Namespace != "buildkit" || r.ID != "job1" {
		t.Errorf("learned namespace: %+v %v", r, ok)
	}
}

func TestTableMeta(t *testing.T) {
	h := newFakeHost(t)
	src := &fakeSource{name: "fake", runtime: RuntimeContainerd, meta: map[string]Meta{
		"web": {Name: "web", Image: "busybox", PodName: "web-0"},
	}, block: make(chan struct{})}
	tb := newTable(t, h, Options{Sources: []Source{src}, MetaTimeout: 5 * time.Second})
	r := Ref{Runtime: RuntimeContainerd, Namespace: "default", ID: "web"}

	// The source is blocked: Meta must answer at once, without metadata.
	start := time.Now()
	for i := 0; i < 100; i++ {
		if _, ok := tb.Meta(r); ok {
			t.Fatal("metadata before the source answered")
		}
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("100 Meta calls took %v while the source was blocked", d)
	}
	close(src.block)
	eventually(t, "metadata", func() bool { _, ok := tb.Meta(r); return ok })
	m, _ := tb.Meta(r)
	if m.Image != "busybox" || m.PodName != "web-0" || m.Source != "fake" {
		t.Errorf("meta = %+v", m)
	}
	if n := src.calls.Load(); n != 1 {
		t.Errorf("source called %d times, want 1 (cached)", n)
	}
	if _, ok := tb.Meta(Ref{}); ok {
		t.Error("metadata for the host")
	}
}

// A runtime that hangs: callers never wait; fetches time out; failures are
// remembered for RetryAfter, then retried.
func TestTableMetaSlowRuntime(t *testing.T) {
	h := newFakeHost(t)
	src := &fakeSource{name: "slow", runtime: RuntimeDocker, block: make(chan struct{})}
	tb := newTable(t, h, Options{Sources: []Source{src}, MetaTimeout: 50 * time.Millisecond, RetryAfter: 300 * time.Millisecond})
	r := Ref{Runtime: RuntimeDocker, ID: id64}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := tb.MetaWait(ctx, r)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("MetaWait on a hung runtime: %v after %v", err, time.Since(start))
	}
	for i := 0; i < 10; i++ {
		if _, ok := tb.Meta(r); ok {
			t.Fatal("metadata from a hung runtime")
		}
	}
	if n := src.calls.Load(); n != 1 {
		t.Errorf("failed fetch retried %d times within RetryAfter", n)
	}
	time.Sleep(350 * time.Millisecond)
	tb.Meta(r)
	eventually(t, "retry after RetryAfter", func() bool { return src.calls.Load() == 2 })
}

// With nothing listening, the real sources fail fast and callers get ids.
func TestTableRuntimesDown(t *testing.T) {
	h := newFakeHost(t)
	dir := t.TempDir()
	srcs := []Source{
		&Docker{Socket: filepath.Join(dir, "docker.sock")},
		&Containerd{Socket: filepath.Join(dir, "containerd.sock")},
		&Docker{Socket: filepath.Join(dir, "podman.sock"), Podman: true},
		&CRI{Socket: filepath.Join(dir, "crio.sock"), Runtimes: []string{RuntimeCRIO, RuntimeCRI}},
	}
	tb := newTable(t, h, Options{Sources: srcs, MetaTimeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, rt := range []string{RuntimeDocker, RuntimeContainerd, RuntimePodman, RuntimeCRIO, RuntimeCRI} {
		start := time.Now()
		_, err := tb.MetaWait(ctx, Ref{Runtime: rt, ID: id64})
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: err = %v, want ErrUnavailable", rt, err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("%s: took %v to fail", rt, d)
		}
	}
	if _, err := tb.MetaWait(ctx, Ref{Runtime: RuntimeLXC, ID: "x"}); err == nil {
		t.Error("lxc has no source, want an error")
	}
}

func TestTableConcurrent(t *testing.T) {
	h := newFakeHost(t)
	web := h.mkcg("default/web")
	h.proc_(1, hybrid("/default/web", "/default/web"))
	tb := newTable(t, h, Options{Interval: time.Millisecond})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				if r := tb.Lookup(uint32(1+i%50), web); r.ID != "web" {
					t.Errorf("Lookup = %+v", r)
					return
				}
				tb.Meta(Ref{Runtime: RuntimeRunc, ID: itoa(i % 10)})
			}
		}(g)
	}
	wg.Wait()
}

// Place reads a process the table has not seen at once: on a hybrid host
// a container placed in the v1 controllers only has a v2 cgroup that
// names nothing, and the probe queue may answer after a report asks.
func TestTablePlace(t *testing.T) {
	h := newFakeHost(t)
	root := h.mkcg(".")
	tb := newTable(t, h, Options{})
	h.proc_(300, hybrid("/default/late", "/"))
	if r, ok := tb.Place(300); !ok || !r.IsContainer() || r.ID != "late" {
		t.Fatalf("Place(300) = %+v %v, want containerd's default/late", r, ok)
	}
	if r := tb.Lookup(300, root); r.ID != "late" {
		t.Errorf("Lookup after Place: %+v", r)
	}
	if r, ok := tb.Place(301); ok || r.IsContainer() {
		t.Errorf("Place of a process that is gone: %+v %v", r, ok)
	}
}
