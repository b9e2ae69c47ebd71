package containers

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// buildSysray builds the binary once per test run.
func buildSysray(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sysray")
	cmd := exec.Command("go", "build", "-o", bin, "../../cmd/sysray")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building sysray: %v\n%s", err, out)
	}
	return bin
}

type ctrEvent struct {
	PID       uint32 `json:"pid"`
	Comm      string `json:"comm"`
	Kind      string `json:"kind"`
	Type      string `json:"type"`
	Container *struct {
		ID, Name, Image, Runtime, Pod, Namespace string
	} `json:"container"`
}

func sysrayJSON(t *testing.T, bin string, args ...string) []ctrEvent {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.json")
	cmd := exec.Command(bin, append(args, "-o", out)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sysray %v: %v\n%s", args, err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []ctrEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e ctrEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("bad JSON %q: %v", sc.Text(), err)
		}
		evs = append(evs, e)
	}
	return evs
}

func checkAttributed(t *testing.T, what string, evs []ctrEvent, name string) {
	t.Helper()
	var opens int
	for _, e := range evs {
		if e.Kind == "drop" {
			continue
		}
		c := e.Container
		if c == nil {
			t.Fatalf("%s: %s[%d] %s has no container", what, e.Comm, e.PID, e.Type)
		}
		if c.ID != name || c.Image != image || c.Runtime != "containerd" || c.Pod != "shop-"+name || c.Namespace != "shop" || c.Name != "web" {
			t.Fatalf("%s: container %+v, want %s / %s / pod shop-%s in shop / web", what, *c, name, image, name)
		}
		if e.Type == "openat" {
			opens++
		}
	}
	if opens == 0 {
		t.Fatalf("%s: no openat from a container that opens /etc/hostname ten times a second", what)
	}
}

// Events from a containerd container carry its id, image and pod labels,
// live and after record → read on a copy of the file; --container and
// container filters select only them.
func TestSysrayAttributesContainerEvents(t *testing.T) {
	require(t)
	bin := buildSysray(t)
	name := "sysray-attr"
	run(t, nil, name, "shop-"+name, "shop", "web")

	// --container selects in the kernel: only its events arrive.
	evs := sysrayJSON(t, bin, "trace", "--json", "--container", name, "--duration", "1s")
	checkAttributed(t, "trace --container", evs, name)

	// A filter on the pod selects the same, from a host-wide trace.
	evs = sysrayJSON(t, bin, "trace", "--json", "-f", "k8s.pod.name = shop-"+name, "--duration", "1s")
	checkAttributed(t, "trace -f k8s.pod.name", evs, name)

	// record, copy, read: the capture carries the container table.
	file := filepath.Join(t.TempDir(), "c.sysray")
	if out, err := exec.Command(bin, "record", "-w", file, "--container", name, "--duration", "1s").CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "copy.sysray")
	if err := os.WriteFile(cp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	evs = sysrayJSON(t, bin, "read", "--json", cp)
	checkAttributed(t, "read of a copy", evs, name)
	evs = sysrayJSON(t, bin, "read", "--json", "-f", "container.id = "+name+" and evt.type = openat", cp)
	if len(evs) == 0 {
		t.Fatal("container.id filter on the capture matched nothing")
	}

	// A container that is not there is a clear error.
	out, err := exec.Command(bin, "trace", "--container", "no-such-container", "--duration", "1s").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no such container") {
		t.Errorf("unknown container: err %v, output %q", err, out)
	}
}

// waitAttached returns once process pid holds its BPF programs' links,
// two at least (sys_enter and sys_exit) and no more coming for 300 ms: a
// host-wide trace says nothing when it starts, and a loaded host takes
// seconds to load and attach.
func waitAttached(t *testing.T, pid int) {
	t.Helper()
	links := func() int {
		n := 0
		fds, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "fdinfo", "*"))
		for _, fd := range fds {
			if b, err := os.ReadFile(fd); err == nil && strings.Contains(string(b), "link_type:") {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(60 * time.Second)
	last, since := -1, time.Now()
	for time.Now().Before(deadline) {
		n := links()
		if n != last {
			last, since = n, time.Now()
		} else if n >= 2 && time.Since(since) >= 300*time.Millisecond {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("pid %d did not attach in 60 s (%d links)", pid, last)
}

// Story 000 in a real container: an entrypoint that touches the vsyscall
// page dies at once. A host-wide doctor names the cause and the container,
// although the container and its cgroup are gone by the report.
func TestDoctorNamesDeadContainer(t *testing.T) {
	require(t)
	bin := buildSysray(t)
	if out, err := exec.Command("make", "-s", "-C", "../../scenarios", "bin/vsyscall-crash").CombinedOutput(); err != nil {
		t.Fatalf("building the scenario: %v\n%s", err, out)
	}
	crash, err := filepath.Abs("../../scenarios/bin/vsyscall-crash")
	if err != nil {
		t.Fatal(err)
	}
	name := "sysray-crash"
	report := filepath.Join(t.TempDir(), "report.json")
	// Stopped by SIGINT once the container is gone, as a user's Ctrl-C:
	// on a loaded host neither attaching nor ctr run takes a known time.
	doc := exec.Command(bin, "doctor", "--json", "-o", report, "--duration", "120s")
	if err := doc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { doc.Process.Kill() })
	waitAttached(t, doc.Process.Pid)
	ctr := exec.Command("ctr", "run", "--rm", "--mount", "type=bind,src="+crash+",dst=/entrypoint,options=rbind:ro",
		image, name, "/entrypoint")
	out, err := ctr.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 139 {
		t.Errorf("container exit: %v (want status 139, SIGSEGV)\n%s", err, out)
	}
	time.Sleep(500 * time.Millisecond) // the crash's last events through the ring
	doc.Process.Signal(os.Interrupt)
	if err := doc.Wait(); err != nil {
		t.Fatalf("doctor: %v", err)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Findings []struct {
			ID, Severity, Title string
		}
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("bad report: %v\n%s", err, b)
	}
	if len(rep.Findings) == 0 {
		t.Fatal("no findings")
	}
	f := rep.Findings[0]
	if f.ID != "legacy-vsyscall" || f.Severity != "critical" || !strings.Contains(f.Title, "in container "+name) {
		t.Errorf("top finding %+v, want a critical legacy-vsyscall naming container %s", f, name)
	}
}
