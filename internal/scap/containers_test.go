package scap

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/filter"
	"github.com/sysray/sysray/internal/session"
)

// containersCapture is a real recording (tests/containers/setup.sh):
// three containerd containers with Kubernetes labels, one of them with a
// 64-hex-digit id, and a host process.
const containersCapture = "testdata/containers.sysray"

const hexCtr = "5376476341f626339d127a3f489d86208872e8a220192490a0866e1a77f68b81"

// sysrayByContainer counts a capture's finished calls by the container
// sysray's readers put them in (full id; "" for the host).
func sysrayByContainer(t *testing.T, path string) (map[string]uint64, map[string]filter.Container) {
	t.Helper()
	c, err := session.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := map[string]uint64{}
	ctrs := map[string]filter.Container{}
	if _, err := c.Each(func(e *event.Event) error {
		if e.Kind == event.KindSyscall && !e.Syscall.Unfinished {
			x := c.Container(e.PID, e.Cgroup)
			n[x.ID]++
			ctrs[x.ID] = x
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n, ctrs
}

// The export names each container once, before any other event, with
// what sysray knows of it, and puts every thread in its container by a
// cgroup path libsinsp's engines parse; read back, each container has
// exactly the calls sysray counted in it.
func TestExportContainers(t *testing.T) {
	want, ctrs := sysrayByContainer(t, containersCapture)
	if len(ctrs) != 4 || want[""] == 0 || want["scapctr-ut"] == 0 || want[hexCtr] == 0 {
		t.Fatalf("the capture's calls by container: %v, want the host and three containers", want)
	}
	var buf bytes.Buffer
	st, err := Export(containersCapture, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if st.Containers != 3 {
		t.Errorf("%d containers described, want 3", st.Containers)
	}

	rd, err := NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var jsons []containerJSON
	others := 0
	inCtr := map[string]int{} // process list entries per cgroups value
	var ev Event
	for {
		b, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := IsProcList(b.Type); ok {
			ts, err := ParseProcList(v, b.Body)
			if err != nil {
				t.Fatal(err)
			}
			for _, th := range ts {
				if len(th.Cgroups) > 0 {
					inCtr[th.Cgroups[0]]++
				}
			}
			continue
		}
		if !IsEvent(b.Type) {
			continue
		}
		if err := ParseEvent(b.Type, b.Body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != evContainerJSONE {
			others++
			continue
		}
		if others > 0 {
			t.Errorf("a container event after %d other events", others)
		}
		if ev.TID != ^uint64(0) {
			t.Errorf("container event of thread %d, want -1 (no thread's)", ev.TID)
		}
		var j containerJSON
		if err := json.Unmarshal(trimNUL(ev.Params[0]), &j); err != nil {
			t.Fatalf("container event: %v: %q", err, ev.Params[0])
		}
		jsons = append(jsons, j)
	}
	// The threads alive when the capture began that did something there.
	for _, cg := range []string{"cpuset=/lxc/scapctr-ut", "cpuset=/" + hexCtr} {
		if inCtr[cg] == 0 {
			t.Errorf("no process list entry has cgroups %q: %v", cg, inCtr)
		}
	}

	type desc struct {
		id, full, name, pod string
		typ                 int
	}
	var got []desc
	for _, j := range jsons {
		x := j.Container
		if x.Image != "docker.io/sysray/busybox:test" || x.LookupState != 1 || x.Labels[labelNamespace] != "sysray-test" {
			t.Errorf("container event %+v: want image docker.io/sysray/busybox:test, lookup_state 1, namespace label sysray-test", x)
		}
		got = append(got, desc{x.ID, x.FullID, x.Name, x.Labels[labelPod], x.Type})
	}
	// In the order of the threads first seen; an id only the LXC layout
	// carries is typed LXC first (see containerEvents).
	wantDesc := map[desc]int{
		{"scapctr-ut", "scapctr-ut", "ut-scapc", "utpod", ctLXC}:        1,
		{"scapctr-ut", "scapctr-ut", "ut-scapc", "utpod", ctContainerd}: 1,
		{"scapctr-a", "scapctr-a", "ctr-a", "apod-x", ctLXC}:            1,
		{"scapctr-a", "scapctr-a", "ctr-a", "apod-x", ctContainerd}:     1,
		{hexCtr[:12], hexCtr, "ut-53764", "utpod", ctContainerd}:        1,
	}
	gotDesc := map[desc]int{}
	for i, d := range got {
		gotDesc[d]++
		if d.typ == ctLXC && (i+1 >= len(got) || got[i+1].id != d.id || got[i+1].typ != ctContainerd) {
			t.Errorf("container event %d (%+v) typed LXC is not followed by its own type", i, d)
		}
	}
	if !maps.Equal(gotDesc, wantDesc) {
		t.Errorf("container events:\n got %v\nwant %v", got, wantDesc)
	}

	// Read back as libsinsp's engines would place the threads (the
	// import follows the same layouts): each container's calls, less
	// the new threads' own returns, are sysray's.
	have := map[uint64]uint64{} // by the import's cgroup number
	rst, err := Read(bytes.NewReader(buf.Bytes()), func(e *event.Event) error {
		if e.Kind != event.KindSyscall || e.Syscall.Unfinished {
			return nil
		}
		switch event.SyscallName(event.ArchAMD64, e.Syscall.Nr) {
		case "clone", "clone3", "fork", "vfork":
			if e.Syscall.Ret == 0 {
				return nil
			}
		}
		have[e.Cgroup]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]uint64{}
	for cg, n := range have {
		if cg == 0 {
			byID[""] += n
			continue
		}
		if cg > uint64(len(rst.Containers)) {
			t.Fatalf("an event in cgroup %d, beyond the %d containers", cg, len(rst.Containers))
		}
		c := rst.Containers[cg-1]
		if c != ctrs[c.ID] {
			t.Errorf("read back %+v, want %+v", c, ctrs[c.ID])
		}
		byID[c.ID] += n
	}
	if !maps.Equal(byID, want) {
		t.Errorf("calls by container read back: %v, want sysray's %v", byID, want)
	}
}

// libsinsp's layouts: the runtimes' 64-hex ids (reported by their first
// 12 digits) and LXC's names; anything else is the host.
func TestCgroupContainer(t *testing.T) {
	h := hexCtr
	for _, c := range []struct {
		cg   []string
		want string
	}{
		{[]string{"cpuset=/docker/" + h}, h[:12]},
		{[]string{"cpu=/system.slice/docker-" + h + ".scope"}, h[:12]},
		{[]string{"memory=/kubepods.slice/kubepods-besteffort.slice/x/cri-containerd-" + h + ".scope"}, h[:12]},
		{[]string{"pids=/kubepods/besteffort/podX/crio-" + h}, h[:12]},
		{[]string{"cpuset=/system.slice/containerd.service/kubepods-x:cri-containerd:" + h}, h[:12]},
		{[]string{"cpuset=/lxc/web1/init.scope"}, "web1"},
		{[]string{"cpuset=/lxc.payload/web1"}, "web1"},
		{[]string{"cpuset=/user.slice/user-0.slice/session-1.scope"}, ""},
		{[]string{"cpuset=/docker/" + h[:63]}, ""},
		{[]string{"cpuset=/docker/" + h[:63] + "g"}, ""},
		{nil, ""},
	} {
		if got := cgroupContainer(c.cg); got != c.want {
			t.Errorf("%q: %q, want %q", c.cg, got, c.want)
		}
	}
	// What the writer writes, the reader takes back to the same id.
	for _, c := range []filter.Container{{ID: h}, {ID: "scapctr-ut"}, {ID: "a.b_c-d"}} {
		if got := cgroupContainer(cgroupsOf(c)); got != sinspID(c) {
			t.Errorf("%q: written %q, read back %q", c.ID, cgroupsOf(c), got)
		}
	}
	// An id no layout carries whole is not written.
	for _, id := range []string{"", "a/b", "a=b"} {
		if cg := cgroupsOf(filter.Container{ID: id}); cg != nil {
			t.Errorf("%q written as %q", id, cg)
		}
	}
}

// The process list carries each thread's cgroups, and reads back.
func TestProcListCgroups(t *testing.T) {
	var buf bytes.Buffer
	ths := []Thread{{TID: 7, PID: 7, Comm: "a", Cgroups: []string{"cpuset=/lxc/x", "memory=/lxc/x"}}, {TID: 8, PID: 8, Comm: "b"}}
	if _, err := NewWriter(&buf, MachineInfo{CPUs: 1}, ths); err != nil {
		t.Fatal(err)
	}
	rd, err := NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := IsProcList(b.Type); ok {
			got, err := ParseProcList(v, b.Body)
			if err != nil || len(got) != 2 {
				t.Fatalf("%v %v", got, err)
			}
			if len(got[0].Cgroups) != 2 || got[0].Cgroups[1] != "memory=/lxc/x" || got[1].Cgroups != nil {
				t.Errorf("cgroups read back: %q, %q", got[0].Cgroups, got[1].Cgroups)
			}
			return
		}
	}
}

// An exec whose own event was not caught (it ran while the probes
// attached) still gives libsinsp the thread's container at the execve's
// exit: with that event's cgroups left empty, sysdig put the rest of the
// process's calls on the host (CI: 18 calls of a container's `sleep`).
func TestExportExecMissed(t *testing.T) {
	c, err := session.Open(containersCapture)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := capture.Open(containersCapture)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	path := filepath.Join(t.TempDir(), "exec-missed.sysray")
	w, err := capture.Create(path, r.Header())
	if err != nil {
		t.Fatal(err)
	}
	var tid uint32
	var ctr filter.Container
	if _, err := c.Each(func(e *event.Event) error {
		if x := c.Container(e.PID, e.Cgroup); tid == 0 && e.Kind == event.KindExec && x.ID != "" {
			tid, ctr = e.TID, x
			return nil
		}
		return w.Write(e)
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	if tid == 0 {
		t.Fatal("no exec in a container in the capture")
	}

	var buf bytes.Buffer
	if _, err := Export(path, &buf); err != nil {
		t.Fatal(err)
	}
	rd, err := NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	exit := writePairs["execve"] + 1
	found := false
	var ev Event
	for {
		b, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !IsEvent(b.Type) {
			continue
		}
		if err := ParseEvent(b.Type, b.Body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != exit || ev.TID != uint64(tid) {
			continue
		}
		found = true
		for i, p := range writeEvents[exit].params {
			if p.name == "cgroups" {
				got := string(ev.Params[i])
				if want := cgroupsOf(ctr); len(want) == 0 || !strings.Contains(got, want[0]) {
					t.Errorf("execve exit of %d (exec event missed): cgroups %q, want %q (%s)", tid, got, want, ctr.ID)
				}
			}
		}
	}
	if !found {
		t.Errorf("no execve exit for thread %d", tid)
	}
}
