// Package containers checks internal/container against a real containerd:
// setup.sh installs and starts it and imports a local busybox image, the
// tests run containers with Kubernetes-style labels and check that a Table
// resolves their pids and cgroup ids to the right container, image and
// labels, and that the libc probe reads the library inside their root.
//
// The tests need root and containerd. Without them they skip, unless
// SYSRAY_REQUIRE_BPF=1 (as in CI), which makes them run setup.sh (which
// installs containerd) and fail if that is impossible.
package containers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/container"
	"github.com/sysray/sysray/internal/proc"
)

const image = "docker.io/sysray/busybox:test"

// loop is the container's workload: a shell that keeps reading a file.
var loop = []string{"sh", "-c", "while :; do cat /etc/hostname >/dev/null; sleep 0.1; done"}

func require(t *testing.T) {
	t.Helper()
	must := os.Getenv("SYSRAY_REQUIRE_BPF") == "1"
	skip := func(why string) {
		t.Helper()
		if must {
			t.Fatalf("cannot run container tests (%s) but SYSRAY_REQUIRE_BPF=1", why)
		}
		t.Skipf("skipping container test: %s", why)
	}
	if os.Geteuid() != 0 {
		skip("not root")
	}
	if proc.CgroupV2Mount() == "" {
		skip("no cgroup v2 hierarchy mounted")
	}
	if _, err := exec.LookPath("containerd"); err != nil && !must {
		skip("containerd not installed (run tests/containers/setup.sh, or set SYSRAY_REQUIRE_BPF=1 to have the test do it)")
	}
	if out, err := script("setup.sh"); err != nil {
		skip(fmt.Sprintf("setup.sh: %v\n%s", err, out))
	}
}

func script(name string, args ...string) (string, error) {
	return scriptEnv(nil, name, args...)
}

func scriptEnv(env []string, name string, args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{name}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return "", err
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return stdout.String() + stderr.String(), err
		}
		return strings.TrimSpace(stdout.String()), nil
	case <-time.After(8 * time.Minute): // apt-get on a fresh machine
		cmd.Process.Kill()
		return stderr.String(), fmt.Errorf("%s timed out", name)
	}
}

// run starts a container through setup.sh and returns its init pid.
func run(t *testing.T, env []string, name, pod, podNS, cname string) uint32 {
	t.Helper()
	args := append([]string{"run", name, pod, podNS, cname, "--"}, loop...)
	out, err := scriptEnv(env, "setup.sh", args...)
	if err != nil {
		t.Fatalf("setup.sh run: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := scriptEnv(env, "teardown.sh", name); err != nil {
			t.Errorf("teardown.sh %s: %v\n%s", name, err, out)
		}
	})
	pid, err := strconv.ParseUint(out, 10, 32)
	if err != nil {
		t.Fatalf("setup.sh run printed %q, want a pid", out)
	}
	return uint32(pid)
}

func v2Path(t *testing.T, pid uint32) (path string, raw []byte) {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range container.CgroupLines(raw) {
		if l.V2() {
			return l.Path, raw
		}
	}
	t.Fatalf("no v2 line in /proc/%d/cgroup:\n%s", pid, raw)
	return "", nil
}

func rootCgroupID(t *testing.T) uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat(proc.CgroupV2Mount(), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func newTable(t *testing.T) *container.Table {
	t.Helper()
	// The default sources: Docker, Podman and CRI-O sockets are absent
	// here, which must not get in the way of containerd.
	tb := container.NewTable(container.Options{})
	t.Cleanup(func() { tb.Close() })
	tb.Refresh(context.Background())
	return tb
}

func checkMeta(t *testing.T, tb *container.Table, r container.Ref, pod, podNS, cname string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := tb.MetaWait(ctx, r)
	if err != nil {
		t.Fatalf("MetaWait(%v): %v", r, err)
	}
	t.Logf("meta: %+v", m)
	if m.Image != image || m.PodName != pod || m.PodNamespace != podNS || m.ContainerName != cname || m.Source != "containerd" {
		t.Errorf("meta = %+v, want image %s, pod %s/%s, container %s from containerd", m, image, podNS, pod, cname)
	}
	// Container labels from ctr run --label, image labels from the image config.
	if m.Labels["io.sysray.test"] != "1" || m.Labels["org.opencontainers.image.title"] != "sysray-busybox" {
		t.Errorf("labels = %v", m.Labels)
	}
	if got, ok := tb.Meta(r); !ok || got.Image != image {
		t.Errorf("Meta after MetaWait: %+v %v, want cached", got, ok)
	}
}

// ctr run in namespace "default": cgroup /default/<name>.
func TestContainerdDefault(t *testing.T) {
	require(t)
	name := fmt.Sprintf("sysray-test-%d", os.Getpid())
	pid := run(t, nil, name, "web-0", "shop", "app")

	path, raw := v2Path(t, pid)
	t.Logf("/proc/%d/cgroup:\n%s", pid, raw)
	pl := container.ParseCgroupFile(raw)
	want := container.Ref{Runtime: container.RuntimeContainerd, Namespace: "default", ID: name}
	if got := pl.Ref; got.Runtime != want.Runtime || got.Namespace != want.Namespace || got.ID != want.ID {
		t.Fatalf("ParseCgroupFile = %+v, want %+v", pl, want)
	}

	tb := newTable(t)
	cgid := proc.CgroupID(path) // what bpf_get_current_cgroup_id returns for its threads
	t.Logf("v2 path %s, cgroup id %d, FromV1 %v", path, cgid, pl.FromV1)
	check := func(what string, got container.Ref) {
		t.Helper()
		if got.Runtime != want.Runtime || got.Namespace != want.Namespace || got.ID != want.ID {
			t.Errorf("%s: %+v, want %+v", what, got, want)
		}
	}
	if pl.FromV1 {
		// This host's runtime left the v2 cgroup alone: only the pid tells.
		t.Logf("container placed in v1 hierarchies only (v2 %s)", path)
	} else {
		r, ok := tb.ByCgroup(cgid)
		if !ok {
			t.Fatalf("cgroup id %d (%s) not in the table", cgid, path)
		}
		check("ByCgroup", r)
	}
	check("Lookup(pid, cgid)", tb.Lookup(pid, cgid))
	rootCall := tb.Lookup(pid, rootCgroupID(t))
	if pl.FromV1 {
		// A hybrid host's container in v1 only: its calls are made in
		// the v2 root, and the pid decides.
		check("Lookup(pid, root)", rootCall)
	} else if rootCall.IsContainer() {
		// The container has a v2 cgroup of its own, so a call made in
		// the root was made before the process moved there: the host's.
		t.Errorf("Lookup(pid, root) = %+v for a process placed by its v2 cgroup; want the host", rootCall)
	}
	r, ok := tb.ByPID(pid)
	if !ok {
		t.Fatalf("pid %d not in the table", pid)
	}
	check("ByPID", r)
	if s := r.String(); s != "containerd default/"+name {
		t.Errorf("String() = %q", s)
	}

	checkMeta(t, tb, r, "web-0", "shop", "app")

	found := false
	for _, c := range tb.Containers() {
		if c.Ref.ID == name {
			found = true
			t.Logf("Containers(): %+v", c)
			if len(c.PIDs) == 0 || c.PIDs[0] != pid && !containsPID(c.PIDs, pid) {
				t.Errorf("Containers() entry lacks pid %d: %+v", pid, c)
			}
		}
	}
	if !found {
		t.Errorf("Containers() lacks %s", name)
	}

	// The libc inside the container's root: the image carries the host's
	// glibc under /usr/lib/<triplet>, so the versions agree, and the file
	// read is the container's.
	lc, err := container.Libc(int(pid))
	if err != nil {
		t.Fatalf("Libc(%d): %v", pid, err)
	}
	host, err := container.LibcInRoot("/")
	if err != nil {
		t.Fatalf("host libc: %v", err)
	}
	t.Logf("container libc: %s at %s; host: %s", lc, lc.Path, host)
	if lc.Name != "glibc" || lc.Version != host.Version || lc.Version == "" {
		t.Errorf("container libc %+v, host %+v", lc, host)
	}
	if _, err := os.Stat(filepath.Join(fmt.Sprintf("/proc/%d/root", pid), lc.Path)); err != nil {
		t.Errorf("libc path %s not inside the container: %v", lc.Path, err)
	}

	// The hybrid case: move the container's init to the v2 root, as a
	// runtime that manages only the v1 controllers leaves it. Its events
	// then carry the root cgroup id and only the pid names the container.
	procs := filepath.Join(proc.CgroupV2Mount(), "cgroup.procs")
	if err := os.WriteFile(procs, []byte(strconv.Itoa(int(pid))), 0o644); err != nil {
		t.Fatalf("moving pid %d to the v2 root: %v", pid, err)
	}
	path, raw = v2Path(t, pid)
	pl = container.ParseCgroupFile(raw)
	if path != "/" || !pl.FromV1 || pl.Ref.ID != name {
		t.Fatalf("after the move: v2 %s, %+v", path, pl)
	}
	tb.Refresh(context.Background())
	check("hybrid Lookup(pid, root)", tb.Lookup(pid, rootCgroupID(t)))
	for _, c := range tb.Containers() {
		if c.Ref.ID == name && (!c.OnlyV1 || !containsPID(c.PIDs, pid)) {
			t.Errorf("hybrid Containers() entry: %+v", c)
		}
	}
	// A fresh table (no pid seen at refresh) answers the host at first and
	// the container once its background probe has read /proc/PID/cgroup.
	tb2 := container.NewTable(container.Options{Sources: []container.Source{}, Interval: time.Hour})
	defer tb2.Close()
	<-tb2.Ready()
	deadline := time.Now().Add(5 * time.Second)
	for tb2.Lookup(pid, rootCgroupID(t)).ID != name {
		if time.Now().After(deadline) {
			t.Fatalf("hybrid pid %d never resolved: %+v", pid, tb2.Lookup(pid, rootCgroupID(t)))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func containsPID(pids []uint32, pid uint32) bool {
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}

// A container in containerd's k8s.io namespace under a kubelet-style
// cgroupfs path, /kubepods/besteffort/pod<uid>/<id>: the path names the pod
// but not the runtime, and containerd answers for it.
func TestKubeletCgroupfsPath(t *testing.T) {
	require(t)
	id := fmt.Sprintf("%x", sha256.Sum256([]byte(fmt.Sprint(time.Now().UnixNano(), os.Getpid()))))
	uid := fmt.Sprintf("5157a7e5-0000-4000-8000-%012x", os.Getpid())
	parent := "/kubepods/besteffort/pod" + uid
	env := []string{"SYSRAY_CTR_NS=k8s.io", "SYSRAY_CTR_CGROUP=" + parent + "/" + id}
	// The empty pod cgroups runc leaves behind, in every hierarchy.
	t.Cleanup(func() {
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*" + parent)
		dirs = append(dirs, "/sys/fs/cgroup"+parent)
		for _, d := range dirs {
			os.Remove(d)
		}
	})
	pid := run(t, env, id, "kube-web-0", "prod", "nginx")

	path, raw := v2Path(t, pid)
	t.Logf("/proc/%d/cgroup:\n%s", pid, raw)
	pl := container.ParseCgroupFile(raw)
	want := container.Ref{Runtime: container.RuntimeCRI, ID: id, PodUID: uid, QoS: "besteffort"}
	if got := pl.Ref; got.Runtime != want.Runtime || got.ID != want.ID || got.PodUID != want.PodUID || got.QoS != want.QoS {
		t.Fatalf("ParseCgroupFile = %+v, want %+v", pl, want)
	}

	tb := newTable(t)
	cgid := proc.CgroupID(path)
	if got := tb.Lookup(pid, cgid); got.Runtime != want.Runtime || got.ID != want.ID || got.PodUID != want.PodUID {
		t.Errorf("Lookup(pid, cgid): %+v, want %+v", got, want)
	}
	// Placed by its v2 cgroup (the kubelet's cgroupfs path): a call made
	// in the root was made before the process moved into its pod.
	if got := tb.Lookup(pid, rootCgroupID(t)); !pl.FromV1 && got.IsContainer() {
		t.Errorf("Lookup(pid, root) = %+v for a process placed by its v2 cgroup; want the host", got)
	}
	r := tb.Lookup(pid, cgid)
	t.Logf("ref: %s", r)
	checkMeta(t, tb, r, "kube-web-0", "prod", "nginx")
}
