package tests

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v2"
	"golang.org/x/sys/unix"
)

// The Kubernetes manifest's DaemonSet: what it must say for the agent to
// work on a node, checked field by field, and its arguments run for real.
func TestDeployDaemonSet(t *testing.T) {
	requireBPF(t)
	b, err := os.ReadFile("../deploy/kubernetes/sysray-agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type port struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	}
	type probe struct {
		HTTPGet struct {
			Path string `yaml:"path"`
			Port string `yaml:"port"`
		} `yaml:"httpGet"`
	}
	type doc struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Template struct {
				Spec struct {
					HostPID    bool `yaml:"hostPID"`
					Containers []struct {
						Args            []string `yaml:"args"`
						Ports           []port   `yaml:"ports"`
						SecurityContext struct {
							RunAsUser                *int  `yaml:"runAsUser"`
							Privileged               *bool `yaml:"privileged"`
							AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
							ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
							Capabilities             struct {
								Add  []string `yaml:"add"`
								Drop []string `yaml:"drop"`
							} `yaml:"capabilities"`
							SeccompProfile struct {
								Type string `yaml:"type"`
							} `yaml:"seccompProfile"`
						} `yaml:"securityContext"`
						ReadinessProbe probe `yaml:"readinessProbe"`
						LivenessProbe  probe `yaml:"livenessProbe"`
						VolumeMounts   []struct {
							Name      string `yaml:"name"`
							MountPath string `yaml:"mountPath"`
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
	var ds *doc
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d doc
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("manifest: %v", err)
		}
		if d.Kind == "DaemonSet" {
			ds = &d
		}
	}
	if ds == nil {
		t.Fatal("no DaemonSet in the manifest")
	}
	spec := ds.Spec.Template.Spec
	if !spec.HostPID || len(spec.Containers) != 1 {
		t.Fatalf("want hostPID and one container: %+v", spec)
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	if sc.Privileged == nil || *sc.Privileged {
		t.Error("the agent must not run privileged: it has the capabilities it needs")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation must be false")
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Error("runAsUser must be 0: the runtime's socket and the capture directory are root's")
	}
	if !sc.ReadOnlyRootFilesystem {
		t.Error("the agent writes only its captures: the root filesystem must be read-only")
	}
	if strings.Join(sc.Capabilities.Drop, ",") != "ALL" {
		t.Errorf("capabilities.drop %v: want [ALL]", sc.Capabilities.Drop)
	}
	// Exactly the capabilities docs/deploy.md gives a reason for.
	want := []string{"BPF", "DAC_READ_SEARCH", "PERFMON", "SYSLOG", "SYS_PTRACE"}
	got := slices.Sorted(slices.Values(sc.Capabilities.Add))
	if !slices.Equal(got, want) {
		t.Errorf("capabilities.add %v: want exactly %v", sc.Capabilities.Add, want)
	}
	if sc.SeccompProfile.Type != "RuntimeDefault" {
		t.Errorf("seccompProfile %q: want RuntimeDefault", sc.SeccompProfile.Type)
	}
	args := c.Args
	if len(args) == 0 || args[0] != "agent" {
		t.Fatalf("args %v do not run the agent", args)
	}
	flag := func(name string) string {
		for i := range args[:len(args)-1] {
			if args[i] == name {
				return args[i+1]
			}
		}
		return ""
	}
	listen := flag("--listen")
	if len(c.Ports) != 1 || !strings.HasSuffix(listen, ":"+strconv.Itoa(c.Ports[0].ContainerPort)) || strings.HasPrefix(listen, "127.") {
		t.Errorf("--listen %q against ports %+v: Prometheus must reach the pod's port", listen, c.Ports)
	}
	for _, p := range []probe{c.ReadinessProbe, c.LivenessProbe} {
		if p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port != c.Ports[0].Name {
			t.Errorf("probe %+v: want /healthz on port %s", p, c.Ports[0].Name)
		}
	}
	vols := map[string]string{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v.HostPath.Path
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		if _, ok := vols[m.Name]; !ok {
			t.Errorf("mount %s has no volume", m.Name)
		}
		mounts[m.MountPath] = vols[m.Name]
	}
	for _, need := range []string{"/sys/fs/cgroup", "/sys/kernel/btf", "/run/containerd/containerd.sock", flag("--capture-dir")} {
		if mounts[need] != need {
			t.Errorf("%s is not the host's %s: %v", need, need, mounts)
		}
	}

	// The same arguments, on loopback and a private directory, start an
	// agent that answers /healthz, holding only the manifest's
	// capabilities (TestAgentInContainer runs it in a real container).
	for i := range args {
		switch {
		case i > 0 && args[i-1] == "--listen":
			args[i] = "127.0.0.1:0"
		case i > 0 && args[i-1] == "--capture-dir":
			args[i] = t.TempDir()
		}
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv is needed to run the agent with the manifest's capabilities: " + err.Error())
	}
	bset := "-all"
	for _, c := range sc.Capabilities.Add {
		bset += ",+" + strings.ToLower(c)
	}
	a := runAgent(t, exec.Command(setpriv, append([]string{"--bounding-set", bset, "--inh-caps", "-all", "--no-new-privs", "--",
		sysray, "agent", "--interval", "500ms"}, args[1:]...)...))
	resp, err := http.Get(a.base + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", err, resp)
	}
	resp.Body.Close()
	if code, _ := a.stop(t); code != 0 {
		t.Errorf("agent exited %d", code)
	}
}

// The systemd unit passes systemd's own check, with ExecStart pointing at
// the binary under test.
func TestDeploySystemdUnit(t *testing.T) {
	alongside(t)
	requireBPF(t)
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze is needed to check the unit: " + err.Error())
	}
	b, err := os.ReadFile("../deploy/systemd/sysray-agent.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := strings.ReplaceAll(string(b), "/usr/local/bin/sysray", sysray)
	if unit == string(b) {
		t.Fatal("the unit does not start /usr/local/bin/sysray")
	}
	path := filepath.Join(t.TempDir(), "sysray-agent.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}

	// The unit's ExecStart, run as systemd would as far as privileges go:
	// root with only CapabilityBoundingSet and no_new_privs. It counts
	// getppid calls in two cgroups exactly.
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv is needed to run the agent with the unit's capabilities: " + err.Error())
	}
	key := func(k string) []string {
		var vals []string
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, k+"="); ok {
				vals = append(vals, strings.Fields(v)...)
			}
		}
		return vals
	}
	caps := key("CapabilityBoundingSet")
	want := []string{"CAP_BPF", "CAP_DAC_READ_SEARCH", "CAP_PERFMON", "CAP_SYSLOG", "CAP_SYS_PTRACE"}
	if got := slices.Sorted(slices.Values(caps)); !slices.Equal(got, want) {
		t.Errorf("CapabilityBoundingSet %v: want exactly %v, as the DaemonSet has", caps, want)
	}
	if nnp := key("NoNewPrivileges"); len(nnp) != 1 || nnp[0] != "true" {
		t.Errorf("NoNewPrivileges %v: want true", nnp)
	}
	bset := "-all"
	for _, c := range caps {
		bset += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
	}
	exe := key("ExecStart")
	if len(exe) < 2 || exe[0] != "/usr/local/bin/sysray" || exe[1] != "agent" {
		t.Fatalf("ExecStart %v does not run the agent", exe)
	}
	uargs := slices.Clone(exe[2:])
	for i := range uargs {
		if i > 0 && uargs[i-1] == "--capture-dir" {
			uargs[i] = t.TempDir()
		}
	}
	ids, dirs := fakeContainers(t, 0xd0, 2)
	cmd := exec.Command(setpriv, append([]string{"--bounding-set", bset, "--inh-caps", "-all", "--no-new-privs", "--",
		sysray, "agent", "--listen", "127.0.0.1:0", "--interval", "500ms", "--syscalls", "always"}, uargs...)...)
	a := runAgent(t, cmd)
	// The agent holds exactly those capabilities.
	capNum := map[string]int{"CAP_BPF": unix.CAP_BPF, "CAP_PERFMON": unix.CAP_PERFMON, "CAP_SYSLOG": unix.CAP_SYSLOG,
		"CAP_SYS_PTRACE": unix.CAP_SYS_PTRACE, "CAP_DAC_READ_SEARCH": unix.CAP_DAC_READ_SEARCH}
	var mask uint64
	for _, c := range caps {
		mask |= 1 << capNum[c]
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if eff := regexp.MustCompile(`(?m)^CapEff:\s+([0-9a-f]+)$`).FindSubmatch(status); eff == nil {
		t.Errorf("no CapEff in the agent's status:\n%s", status)
	} else if v, _ := strconv.ParseUint(string(eff[1]), 16, 64); v != mask {
		t.Errorf("the agent's effective capabilities are %#x, want %#x (%v)", v, mask, caps)
	}
	if out, err := exec.Command(prog("cgmove"), dirs[0], dirs[1], "3000", "5000").CombinedOutput(); err != nil {
		t.Fatalf("cgmove: %v\n%s", err, out)
	}
	ppid := func(id string) string {
		return metric("sysray_syscall_duration_seconds_count", "container", id[:12], "namespace", "", "pod", "", "syscall", "getppid")
	}
	wantN := map[string]float64{ppid(ids[0]): 3000, ppid(ids[1]): 5000}
	var got map[string]float64
	// New cgroups wait (up to 7 s) for the container table to name them.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		got = a.scrape(t)
		if got[ppid(ids[0])] >= 3000 && got[ppid(ids[1])] >= 5000 || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(1200 * time.Millisecond)
	got = a.scrape(t)
	for k, w := range wantN {
		if got[k] != w {
			t.Errorf("with the unit's capabilities, %s = %v, want %v", k, got[k], w)
		}
	}
	if code, logs := a.stop(t); code != 0 {
		t.Errorf("agent exited %d:\n%s", code, strings.Join(logs, "\n"))
	}
}
