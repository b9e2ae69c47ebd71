package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v2"
)

// daemonSet is what the agent's container gets from
// deploy/kubernetes/sysray-agent.yaml.
type daemonSet struct {
	HostPID  bool
	Args     []string
	Security struct {
		Privileged             bool `yaml:"privileged"`
		ReadOnlyRootFilesystem bool `yaml:"readOnlyRootFilesystem"`
		Capabilities           struct {
			Add  []string `yaml:"add"`
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
		SeccompProfile struct {
			Type string `yaml:"type"`
		} `yaml:"seccompProfile"`
	}
	// Mounts: host path -> (path in the container, read-only).
	Mounts []hostMount
}

type hostMount struct {
	Host, Path string
	ReadOnly   bool
}

func readDaemonSet(t *testing.T) daemonSet {
	t.Helper()
	b, err := os.ReadFile("../deploy/kubernetes/sysray-agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type doc struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Template struct {
				Spec struct {
					HostPID    bool `yaml:"hostPID"`
					Containers []struct {
						Args            []string      `yaml:"args"`
						SecurityContext yaml.MapSlice `yaml:"securityContext"`
						VolumeMounts    []struct {
							Name      string `yaml:"name"`
							MountPath string `yaml:"mountPath"`
							ReadOnly  bool   `yaml:"readOnly"`
						} `yaml:"volumeMounts"`
					} `yaml:"containers"`
					Volumes []struct {
						Name     string `yaml:"name"`
						HostPath struct {
							Path string `yaml:"path"`
						} `yaml:"hostPath"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d doc
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("manifest: %v", err)
		}
		if d.Kind != "DaemonSet" {
			continue
		}
		spec := d.Spec.Template.Spec
		if len(spec.Containers) != 1 {
			t.Fatalf("want one container in the DaemonSet, got %d", len(spec.Containers))
		}
		c := spec.Containers[0]
		ds := daemonSet{HostPID: spec.HostPID, Args: c.Args}
		// Every field of the security context is one this test applies:
		// a new one in the manifest must not pass unseen.
		raw, _ := yaml.Marshal(c.SecurityContext)
		for _, it := range c.SecurityContext {
			switch it.Key {
			case "privileged", "readOnlyRootFilesystem", "capabilities", "seccompProfile",
				"allowPrivilegeEscalation", // runc sets no_new_privs; the agent execs nothing
				"runAsUser":                // 0, as runc runs it
			default:
				t.Fatalf("the manifest's securityContext has %v, which this test does not apply", it.Key)
			}
		}
		if err := yaml.Unmarshal(raw, &ds.Security); err != nil {
			t.Fatal(err)
		}
		vols := map[string]string{}
		for _, v := range spec.Volumes {
			vols[v.Name] = v.HostPath.Path
		}
		for _, m := range c.VolumeMounts {
			if vols[m.Name] == "" {
				t.Fatalf("mount %s is not a hostPath", m.Name)
			}
			ds.Mounts = append(ds.Mounts, hostMount{vols[m.Name], m.MountPath, m.ReadOnly})
		}
		return ds
	}
	t.Fatal("no DaemonSet in the manifest")
	return daemonSet{}
}

func ctrOut(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := exec.Command("ctr", append([]string{"-n", "default"}, args...)...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("ctr %v: %v\n%s", args, err, stderr)
	}
	return out
}

// agentSpec makes the OCI spec the DaemonSet amounts to: containerd makes
// it from the manifest's capabilities and seccomp profile (as the CRI
// plugin would), then the pod's host PID namespace, the root (the bare
// static binary, as deploy/Dockerfile builds it) and the host paths are
// set here. The one difference from a pod: the network is the host's, so
// the test reaches the agent on loopback.
func agentSpec(t *testing.T, ds daemonSet, image, captures string, args []string) string {
	t.Helper()
	if ds.Security.Privileged {
		t.Fatal("the DaemonSet runs the agent privileged: it must ask for capabilities one by one")
	}
	if !ds.HostPID {
		t.Fatal("the DaemonSet lacks hostPID: the agent would see only its own processes")
	}
	if !slices.Equal(ds.Security.Capabilities.Drop, []string{"ALL"}) {
		t.Fatalf("the DaemonSet drops %v, want ALL", ds.Security.Capabilities.Drop)
	}
	var def struct {
		Process struct {
			Capabilities struct{ Bounding []string }
		}
	}
	if err := json.Unmarshal(ctrOut(t, "oci", "spec"), &def); err != nil {
		t.Fatal(err)
	}
	create := []string{"c", "create"}
	if ds.Security.SeccompProfile.Type == "RuntimeDefault" {
		create = append(create, "--seccomp")
	} else if ds.Security.SeccompProfile.Type != "" {
		t.Fatalf("seccomp profile %q: this test applies RuntimeDefault or none", ds.Security.SeccompProfile.Type)
	}
	for _, c := range def.Process.Capabilities.Bounding {
		create = append(create, "--cap-drop", c)
	}
	var want []string
	for _, c := range ds.Security.Capabilities.Add {
		create = append(create, "--cap-add", "CAP_"+c)
		want = append(want, "CAP_"+c)
	}
	tmpl := fmt.Sprintf("sysray-agent-tmpl-%d", time.Now().UnixNano())
	ctrOut(t, append(create, image, tmpl, "/usr/local/bin/sysray")...)
	info := ctrOut(t, "c", "info", tmpl)
	ctrOut(t, "c", "rm", tmpl)
	var c struct{ Spec map[string]any }
	if err := json.Unmarshal(info, &c); err != nil {
		t.Fatal(err)
	}
	s := c.Spec
	process := s["process"].(map[string]any)
	caps := process["capabilities"].(map[string]any)
	for _, set := range []string{"bounding", "effective", "permitted"} {
		var got []string
		for _, c := range caps[set].([]any) {
			got = append(got, c.(string))
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("containerd made %s capabilities %v of the manifest's %v", set, got, want)
		}
	}
	process["args"] = append([]any{"/usr/local/bin/sysray"}, toAny(args)...)
	process["env"] = []any{"PATH=/usr/local/bin"}

	root := t.TempDir()
	bin, err := os.ReadFile(sysray)
	if err != nil {
		t.Fatal(err)
	}
	dirs := []string{"usr/local/bin", "proc", "sys", "dev", "run", "tmp"}
	for _, m := range ds.Mounts {
		dirs = append(dirs, m.Path[1:])
	}
	for _, d := range dirs {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/local/bin/sysray"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	s["root"] = map[string]any{"path": root, "readonly": ds.Security.ReadOnlyRootFilesystem}
	linux := s["linux"].(map[string]any)
	var ns []any
	for _, n := range linux["namespaces"].([]any) {
		switch n.(map[string]any)["type"] {
		case "pid", "network":
		default:
			ns = append(ns, n)
		}
	}
	linux["namespaces"] = ns
	mounts := s["mounts"].([]any)
	for _, m := range ds.Mounts {
		src := m.Host
		if src == "/var/lib/sysray/captures" {
			src = captures
		}
		opt := "rw"
		if m.ReadOnly {
			opt = "ro"
		}
		mounts = append(mounts, map[string]any{"destination": m.Path, "type": "bind", "source": src, "options": []any{"rbind", opt}})
	}
	s["mounts"] = mounts
	b, _ := json.Marshal(s)
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func toAny(s []string) []any {
	var out []any
	for _, x := range s {
		out = append(out, x)
	}
	return out
}

// inContainer starts a container of the test image, with Kubernetes
// labels, that waits for prog (copied in from the host), runs it with
// args, then idles. It returns at once; the program starts as soon as it
// is copied in.
func inContainer(t *testing.T, cname, prog string, args ...string) {
	t.Helper()
	name := fmt.Sprintf("sysray-%s-%d", cname, time.Now().UnixNano())
	script := fmt.Sprintf("while [ ! -x /prog ]; do sleep 0.1; done; /prog %s; exec sleep 600", strings.Join(args, " "))
	out, err := exec.Command("bash", "containers/setup.sh", "run", name, cname+"-pod", "sysray-test", cname, "--", "sh", "-c", script).Output()
	if err != nil {
		t.Fatalf("setup.sh run: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("bash", "containers/teardown.sh", name).CombinedOutput(); err != nil {
			t.Errorf("teardown.sh %s: %v\n%s", name, err, out)
		}
	})
	root := filepath.Join("/proc", strings.TrimSpace(string(out)), "root")
	b, err := os.ReadFile(prog)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".prog"), b, 0o755); err != nil {
		t.Fatalf("copying %s into the container: %v", prog, err)
	}
	if err := os.Rename(filepath.Join(root, ".prog"), filepath.Join(root, "prog")); err != nil {
		t.Fatal(err)
	}
}

// The agent as the DaemonSet runs it: in a containerd container with
// exactly the manifest's capabilities, seccomp profile, host PID
// namespace, mounts and arguments, on a root holding only the static
// binary. From there it must still see and name the host's other
// containers and diagnose them: one that dies on the legacy vsyscall
// page (story 1), and loggers in three containers calling posix_fadvise
// (story 2). Kernel frames must be named (CAP_SYSLOG), or the doctor
// could not tell a wait from a stall.
func TestAgentInContainer(t *testing.T) {
	requireBPF(t)
	if _, err := exec.LookPath("containerd"); err != nil && os.Getenv("SYSRAY_REQUIRE_BPF") != "1" {
		t.Skip("containerd not installed (tests/containers/setup.sh installs it)")
	}
	if out, err := exec.Command("bash", "containers/setup.sh").CombinedOutput(); err != nil {
		t.Fatalf("setup.sh: %v\n%s", err, out)
	}
	image, err := exec.Command("bash", "containers/setup.sh", "image").Output()
	if err != nil {
		t.Fatal(err)
	}
	ds := readDaemonSet(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	args := slices.Clone(ds.Args)
	for i := 1; i < len(args); i++ {
		// The manifest's API address is the pod's loopback; on the
		// host's network here, both go to a free loopback port.
		if args[i-1] == "--listen" || args[i-1] == "--api-listen" {
			args[i] = addr
		}
	}
	captures := t.TempDir()
	spec := agentSpec(t, ds, strings.TrimSpace(string(image)), captures, args)
	id := fmt.Sprintf("sysray-agent-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		exec.Command("ctr", "-n", "default", "task", "kill", "-s", "SIGKILL", id).Run()
		time.Sleep(200 * time.Millisecond)
		exec.Command("ctr", "-n", "default", "c", "rm", id).Run()
	})
	a := runAgent(t, exec.Command("ctr", "-n", "default", "run", "--rm", "--config", spec, id))

	inContainer(t, "vsys", scenario(t, "vsyscall-crash"))
	writer := scenario(t, "fadvise-writer")
	for i := 0; i < 3; i++ {
		inContainer(t, fmt.Sprintf("logger-%d", i), writer, "-f", "/tmp/log", "-d", "40")
	}

	want := map[string]func(agentFinding) bool{
		"legacy-vsyscall in vsys": func(f agentFinding) bool {
			return f.ID == "legacy-vsyscall" && f.Severity == "critical" && hasContainer(f, "vsys", "vsys-pod", "sysray-test")
		},
		"kernel contention in fadvise64 across the loggers": func(f agentFinding) bool {
			return (f.ID == "kernel-contention" || f.ID == "kernel-hotspot") && strings.Contains(f.Title, "fadvise64") &&
				hasContainer(f, "logger-0", "logger-0-pod", "sysray-test") && hasContainer(f, "logger-1", "logger-1-pod", "sysray-test")
		},
	}
	found := map[string]bool{}
	var all []agentFinding
	for deadline := time.Now().Add(60 * time.Second); len(found) < len(want) && time.Now().Before(deadline); {
		time.Sleep(time.Second)
		all = a.findings(t)
		for name, ok := range want {
			for _, f := range all {
				if ok(f) {
					found[name] = true
				}
			}
		}
	}
	for name := range want {
		if !found[name] {
			var got []string
			for _, f := range all {
				got = append(got, fmt.Sprintf("%s %s %q %s", f.ID, f.Severity, f.Title, f.Labels))
			}
			t.Errorf("no finding of %s from the agent in its container; it found:\n%s", name, strings.Join(got, "\n"))
		}
	}
	for _, f := range all {
		t.Logf("%s %s %q %s", f.ID, f.Severity, f.Title, f.Labels)
	}
	// Its flight capture of the crash, on the host path.
	var capture string
	for i := 0; i < 50 && capture == ""; i++ {
		ents, _ := os.ReadDir(captures)
		for _, e := range ents {
			// Not the one being written: a capture is written to a
			// hidden temporary file beside it and renamed in.
			if n := e.Name(); strings.Contains(n, "-legacy-vsyscall-vsys") && !strings.HasPrefix(n, ".") {
				capture = filepath.Join(captures, n)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if capture == "" {
		ents, _ := os.ReadDir(captures)
		t.Errorf("no flight capture of the vsyscall crash in the capture directory: %v", ents)
	} else if st, err := os.Stat(capture); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("capture %s: %v %v", capture, err, st)
	}
	code, logs := a.stop(t)
	if code != 0 {
		t.Errorf("the agent exited %d", code)
	}
	for _, l := range logs {
		if strings.Contains(l, `"level":"WARN"`) && !strings.Contains(l, `"msg":"finding"`) {
			t.Errorf("the agent warned in its container: %s", l)
		}
	}
}

func hasContainer(f agentFinding, container, pod, ns string) bool {
	for _, raw := range f.Labels {
		var l struct{ Container, Pod, Namespace string }
		if json.Unmarshal(raw, &l) == nil && l.Container == container && l.Pod == pod && l.Namespace == ns {
			return true
		}
	}
	return false
}
