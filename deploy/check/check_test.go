package check

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

const (
	manifests = "../kubernetes"
	chart     = "../helm/sysray-agent"
	// Where the agent looks for the runtimes' sockets.
	agentSources = "../../internal/container/sources.go"
)

// The capabilities docs/deploy.md gives a reason for, and no others.
var wantCaps = []corev1.Capability{"BPF", "DAC_READ_SEARCH", "PERFMON", "SYSLOG", "SYS_PTRACE"}

func decodeFile(t *testing.T, path string, into *Objects) error {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return Decode(path, b, into)
}

// readManifests decodes every file of deploy/kubernetes.
func readManifests(t *testing.T) Objects {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifests, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", manifests, err)
	}
	var objs Objects
	for _, f := range files {
		if err := decodeFile(t, f, &objs); err != nil {
			t.Fatal(err)
		}
	}
	return objs
}

// helm renders the chart with `helm template` and the given --set values.
// Without helm the test is skipped, or fails where CI demands every test.
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	bin, err := exec.LookPath("helm")
	if err != nil {
		if os.Getenv("SYSRAY_REQUIRE_BPF") == "1" {
			t.Fatal("helm is needed to render the chart: " + err.Error())
		}
		t.Skip("no helm in PATH")
	}
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.New(err.Error() + ": " + stderr.String())
	}
	return out, nil
}

func render(t *testing.T, sets ...string) Objects {
	t.Helper()
	args := []string{"template", "sysray-agent", chart, "--namespace", "sysray"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm %v: %v", args, err)
	}
	var objs Objects
	if err := Decode("helm template "+strings.Join(sets, " "), out, &objs); err != nil {
		t.Fatal(err)
	}
	return objs
}

// agentSockets reads the agent's socket constants from its source, so a
// change there that the chart does not follow fails here.
func agentSockets(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), agentSources, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	socks := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 {
			return true
		}
		if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING && strings.HasSuffix(vs.Names[0].Name, "Socket") {
			socks[vs.Names[0].Name], _ = strconv.Unquote(lit.Value)
		}
		return true
	})
	for _, name := range []string{"ContainerdSocket", "CRIOSocket"} {
		if socks[name] == "" {
			t.Fatalf("%s has no constant %s", agentSources, name)
		}
	}
	return socks
}

func agentContainer(t *testing.T, ds *appsv1.DaemonSet) *corev1.Container {
	t.Helper()
	cs := ds.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "agent" {
		t.Fatalf("%s: want one container named agent, got %d", ds.Name, len(cs))
	}
	return &cs[0]
}

// secretMounts are the agent's mounts of Secrets, by mount path: the
// Secret's name, its files' mode, and whether the mount is read-only.
func secretMounts(t *testing.T, ds *appsv1.DaemonSet) map[string]string {
	t.Helper()
	vols := map[string]*corev1.SecretVolumeSource{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		vols[v.Name] = v.Secret
	}
	m := map[string]string{}
	for _, vm := range agentContainer(t, ds).VolumeMounts {
		if s := vols[vm.Name]; s != nil {
			mode := "default"
			if s.DefaultMode != nil {
				mode = strconv.FormatInt(int64(*s.DefaultMode), 8)
			}
			m[vm.MountPath] = s.SecretName + " mode " + mode + " readOnly " + strconv.FormatBool(vm.ReadOnly)
		}
	}
	return m
}

func flag(args []string, name string) (string, bool) {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == name {
			return args[i+1], true
		}
	}
	return "", false
}

// leastPrivilege checks the agent's security context: not privileged, no
// escalation, drop ALL and add exactly the five capabilities.
func leastPrivilege(t *testing.T, ds *appsv1.DaemonSet) {
	t.Helper()
	c := agentContainer(t, ds)
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("the agent has no securityContext")
	}
	isFalse := func(b *bool) bool { return b != nil && !*b }
	if !isFalse(sc.Privileged) || !isFalse(sc.AllowPrivilegeEscalation) {
		t.Errorf("privileged %v, allowPrivilegeEscalation %v: want both false", sc.Privileged, sc.AllowPrivilegeEscalation)
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("runAsUser %v, readOnlyRootFilesystem %v: want 0 and true", sc.RunAsUser, sc.ReadOnlyRootFilesystem)
	}
	if sc.Capabilities == nil {
		t.Fatal("no capabilities in the securityContext")
	}
	if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("capabilities.drop %v: want [ALL]", sc.Capabilities.Drop)
	}
	if got := slices.Sorted(slices.Values(sc.Capabilities.Add)); !slices.Equal(got, wantCaps) {
		t.Errorf("capabilities.add %v: want exactly %v", sc.Capabilities.Add, wantCaps)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccompProfile %v: want RuntimeDefault", sc.SeccompProfile)
	}
	if !ds.Spec.Template.Spec.HostPID {
		t.Error("hostPID is off: the agent must see the host's processes")
	}
}

// mounts maps each of the agent's mount paths to its hostPath volume.
func mounts(t *testing.T, ds *appsv1.DaemonSet) map[string]corev1.HostPathVolumeSource {
	t.Helper()
	vols := map[string]*corev1.HostPathVolumeSource{}
	secrets := map[string]bool{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		vols[v.Name] = v.HostPath
		secrets[v.Name] = v.Secret != nil
	}
	m := map[string]corev1.HostPathVolumeSource{}
	for _, vm := range agentContainer(t, ds).VolumeMounts {
		if secrets[vm.Name] {
			continue // not the node's: secretMounts checks them
		}
		hp := vols[vm.Name]
		if hp == nil {
			t.Fatalf("mount %s is not a hostPath volume", vm.Name)
		}
		m[vm.MountPath] = *hp
	}
	return m
}

// wiring checks that the objects reach each other: the DaemonSet's
// selector, the runtime socket where the agent looks, the capture
// directory, the port the agent listens on, the Service in front of it and
// the ServiceMonitor selecting the Service.
func wiring(t *testing.T, objs Objects, socks map[string]string) {
	t.Helper()
	if len(objs.DaemonSets) != 1 || len(objs.Services) != 1 {
		t.Fatalf("want one DaemonSet and one Service, got %d and %d", len(objs.DaemonSets), len(objs.Services))
	}
	ds, svc := objs.DaemonSets[0], objs.Services[0]
	pod := labels.Set(ds.Spec.Template.Labels)
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(pod) {
		t.Errorf("the DaemonSet's selector %v does not select its pods %v (%v)", ds.Spec.Selector, pod, err)
	}
	c := agentContainer(t, ds)
	if len(c.Args) == 0 || c.Args[0] != "agent" {
		t.Fatalf("args %v do not run the agent", c.Args)
	}
	ms := mounts(t, ds)
	var runtime []string
	for path, hp := range ms {
		if hp.Type != nil && *hp.Type == corev1.HostPathSocket {
			runtime = append(runtime, path)
		}
	}
	if len(runtime) != 1 || (runtime[0] != socks["ContainerdSocket"] && runtime[0] != socks["CRIOSocket"]) {
		t.Errorf("runtime socket mounted at %v: want one, where the agent looks (%s or %s)", runtime, socks["ContainerdSocket"], socks["CRIOSocket"])
	}
	for _, p := range []string{"/sys/fs/cgroup", "/sys/kernel/btf"} {
		if ms[p].Path != p {
			t.Errorf("%s is not the host's: %v", p, ms[p])
		}
	}
	dir, given := flag(c.Args, "--capture-dir")
	if !given {
		t.Error("no --capture-dir: the agent's default is not mounted from the host")
	}
	if dir == "" {
		// No captures: nothing to mount.
		for path, hp := range ms {
			if hp.Type != nil && *hp.Type == corev1.HostPathDirectoryOrCreate {
				t.Errorf("--capture-dir \"\" but a capture directory is mounted at %s", path)
			}
		}
	} else if hp, ok := ms[dir]; !ok || hp.Path != dir || hp.Type == nil || *hp.Type != corev1.HostPathDirectoryOrCreate {
		t.Errorf("--capture-dir %q is not a hostPath directory at the same path: %v", dir, hp)
	}
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == dir && vm.ReadOnly {
			t.Errorf("the capture directory is mounted read-only")
		}
	}

	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" {
		t.Fatalf("ports %v: want one, named metrics", c.Ports)
	}
	port := c.Ports[0].ContainerPort
	listen, _ := flag(c.Args, "--listen")
	if !strings.HasSuffix(listen, ":"+strconv.Itoa(int(port))) || strings.HasPrefix(listen, "127.") {
		t.Errorf("--listen %q: want the pod's port %d on a reachable address", listen, port)
	}
	if a := ds.Spec.Template.Annotations["prometheus.io/port"]; a != strconv.Itoa(int(port)) {
		t.Errorf("prometheus.io/port %q: want %d", a, port)
	}
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "metrics" {
			t.Errorf("probe %v: want GET /healthz on port metrics", p)
		}
	}

	if svc.Namespace != ds.Namespace || len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(pod) {
		t.Errorf("the Service %s/%s (selector %v) does not select the pods of %s/%s %v", svc.Namespace, svc.Name, svc.Spec.Selector, ds.Namespace, ds.Name, pod)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "metrics" || svc.Spec.Ports[0].TargetPort.String() != "metrics" || svc.Spec.Ports[0].Port != port {
		t.Errorf("Service ports %v: want metrics on %d, to the container's port metrics", svc.Spec.Ports, port)
	}

	for _, sm := range objs.ServiceMonitors {
		s, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil || s.Empty() || !s.Matches(labels.Set(svc.Labels)) {
			t.Errorf("ServiceMonitor selector %v does not select the Service's labels %v (%v)", sm.Spec.Selector, svc.Labels, err)
		}
		if !sm.Spec.NamespaceSelector.Any && !slices.Contains(sm.Spec.NamespaceSelector.MatchNames, svc.Namespace) {
			t.Errorf("ServiceMonitor looks in %v, the Service is in %s", sm.Spec.NamespaceSelector.MatchNames, svc.Namespace)
		}
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || sm.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor endpoints %+v: want /metrics on port metrics", sm.Spec.Endpoints)
		}
		// The operator's target labels namespace, pod and container are
		// the agent's own; kept, they would turn the series' labels of
		// those names into exported_* and every query would miss.
		dropped := false
		for _, ep := range sm.Spec.Endpoints {
			for _, r := range ep.RelabelConfigs {
				dropped = dropped || strings.EqualFold(r.Action, "labeldrop") && r.Regex == "(namespace|pod|container)"
			}
		}
		if !dropped {
			t.Errorf("ServiceMonitor relabelings %+v: want the target's namespace, pod and container labels dropped", sm.Spec.Endpoints[0].RelabelConfigs)
		}
	}
}

// Every document of every manifest decodes strictly, and they fit together.
func TestManifestsDecodeStrictly(t *testing.T) {
	objs := readManifests(t)
	if len(objs.Namespaces) != 1 || len(objs.ServiceMonitors) != 1 {
		t.Fatalf("want a Namespace and a ServiceMonitor, got %d and %d", len(objs.Namespaces), len(objs.ServiceMonitors))
	}
	wiring(t, objs, agentSockets(t))
	leastPrivilege(t, objs.DaemonSets[0])
	ns := objs.Namespaces[0].Name
	for _, m := range []metav1.ObjectMeta{objs.DaemonSets[0].ObjectMeta, objs.Services[0].ObjectMeta, objs.ServiceMonitors[0].ObjectMeta} {
		if m.Namespace != ns {
			t.Errorf("%s is in namespace %q, not the manifest's %q", m.Name, m.Namespace, ns)
		}
	}
	if p := agentContainer(t, objs.DaemonSets[0]).SecurityContext.AppArmorProfile; p != nil {
		t.Errorf("appArmorProfile %v: the manifest leaves AppArmor to the runtime", p)
	}
}

// A misspelt or repeated field, or a kind nobody checks, fails the decode:
// the check above can fail.
func TestStrictDecodeCatchesMistakes(t *testing.T) {
	for _, tc := range []struct {
		file, old, new, want string
	}{
		{"sysray-agent.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true", `unknown field "spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem"`},
		{"sysray-agent.yaml", "hostPID: true", "hostPid: true", `unknown field "spec.template.spec.hostPid"`},
		{"sysray-agent.yaml", "      hostPID: true\n", "      hostPID: true\n      hostPID: true\n", `"hostPID" already set`},
		{"sysray-agent.yaml", "kind: DaemonSet", "kind: DaemonSett", `kind "DaemonSett" is not one this check knows`},
		{"sysray-agent.yaml", "clusterIP: None", "clusterIp: None", `unknown field "spec.clusterIp"`},
		{"servicemonitor.yaml", "targetLabel: node", "targetLable: node", `unknown field "spec.endpoints[0].relabelings[0].targetLable"`},
	} {
		t.Run(tc.new, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(manifests, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Count(string(b), tc.old) != 1 {
				t.Fatalf("%s does not hold %q once", tc.file, tc.old)
			}
			path := filepath.Join(t.TempDir(), tc.file)
			if err := os.WriteFile(path, []byte(strings.Replace(string(b), tc.old, tc.new, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			err = decodeFile(t, path, new(Objects))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("decoding with %q: %v; want an error with %s", tc.new, err, tc.want)
			}
		})
	}
}

// The chart renders, with each value the issue asks for, into objects that
// decode strictly, fit together and keep the least privilege.
func TestChartRenders(t *testing.T) {
	socks := agentSockets(t)
	for _, tc := range []struct {
		name  string
		sets  []string
		check func(t *testing.T, objs Objects)
	}{
		{"default", nil, func(t *testing.T, objs Objects) {
			if ms := mounts(t, objs.DaemonSets[0]); ms[socks["ContainerdSocket"]].Path != "/run/containerd/containerd.sock" {
				t.Errorf("containerd's socket: %v", ms)
			}
			if len(objs.ServiceMonitors) != 0 {
				t.Error("a ServiceMonitor by default: clusters without its CRD would refuse the release")
			}
			if p := agentContainer(t, objs.DaemonSets[0]).SecurityContext.AppArmorProfile; p != nil {
				t.Errorf("appArmorProfile %v by default", p)
			}
			if c := agentContainer(t, objs.DaemonSets[0]); len(c.Env) != 0 {
				t.Errorf("env %v by default", c.Env)
			}
		}},
		{"crio", []string{"runtime.type=crio"}, func(t *testing.T, objs Objects) {
			if ms := mounts(t, objs.DaemonSets[0]); ms[socks["CRIOSocket"]].Path != "/var/run/crio/crio.sock" {
				t.Errorf("CRI-O's socket is not at %s: %v", socks["CRIOSocket"], ms)
			}
		}},
		{"crio elsewhere", []string{"runtime.type=crio", "runtime.crioSocket=/run/k8s/crio.sock"}, func(t *testing.T, objs Objects) {
			if ms := mounts(t, objs.DaemonSets[0]); ms[socks["CRIOSocket"]].Path != "/run/k8s/crio.sock" {
				t.Errorf("the node's /run/k8s/crio.sock is not at %s: %v", socks["CRIOSocket"], ms)
			}
		}},
		{"serviceMonitor", []string{"serviceMonitor.enabled=true", "serviceMonitor.interval=15s", "serviceMonitor.labels.release=prometheus"}, func(t *testing.T, objs Objects) {
			if len(objs.ServiceMonitors) != 1 {
				t.Fatalf("%d ServiceMonitors, want 1", len(objs.ServiceMonitors))
			}
			sm := objs.ServiceMonitors[0]
			if sm.Labels["release"] != "prometheus" || sm.Spec.Endpoints[0].Interval != "15s" {
				t.Errorf("labels %v, interval %q: want release=prometheus and 15s", sm.Labels, sm.Spec.Endpoints[0].Interval)
			}
			// Prometheus's own protocols by default: text, no native histograms.
			if sm.Spec.ScrapeProtocols != nil || sm.Spec.ScrapeNativeHistograms != nil || sm.Spec.ScrapeClassicHistograms != nil {
				t.Errorf("scrapeProtocols %v, scrapeNativeHistograms %v, scrapeClassicHistograms %v by default: want none set",
					sm.Spec.ScrapeProtocols, sm.Spec.ScrapeNativeHistograms, sm.Spec.ScrapeClassicHistograms)
			}
		}},
		// Native histograms come only in protobuf scrapes: PrometheusProto
		// first, then the text formats for a Prometheus without it; the
		// classic _bucket series the dashboard reads are kept.
		{"native histograms", []string{"serviceMonitor.enabled=true", "serviceMonitor.nativeHistograms=true"}, func(t *testing.T, objs Objects) {
			sm := objs.ServiceMonitors[0].Spec
			isTrue := func(b *bool) bool { return b != nil && *b }
			if len(sm.ScrapeProtocols) < 2 || sm.ScrapeProtocols[0] != monitoringv1.PrometheusProto ||
				!slices.Contains(sm.ScrapeProtocols, monitoringv1.PrometheusText0_0_4) ||
				!isTrue(sm.ScrapeNativeHistograms) || !isTrue(sm.ScrapeClassicHistograms) {
				t.Errorf("scrapeProtocols %v, scrapeNativeHistograms %v, scrapeClassicHistograms %v: want PrometheusProto first and the 0.0.4 text format among them, both true",
					sm.ScrapeProtocols, sm.ScrapeNativeHistograms, sm.ScrapeClassicHistograms)
			}
		}},
		{"native histograms without classic", []string{"serviceMonitor.enabled=true", "serviceMonitor.nativeHistograms=true", "serviceMonitor.scrapeClassicHistograms=false"}, func(t *testing.T, objs Objects) {
			if c := objs.ServiceMonitors[0].Spec.ScrapeClassicHistograms; c == nil || *c {
				t.Errorf("scrapeClassicHistograms %v: want false, as set", c)
			}
		}},
		{"no captures", []string{"captureDir="}, func(t *testing.T, objs Objects) {
			if len(mounts(t, objs.DaemonSets[0])) != 3 {
				t.Errorf("mounts %v: want cgroup, btf and the socket only", mounts(t, objs.DaemonSets[0]))
			}
		}},
		{"always, port 9500, captures in /srv", []string{"agent.syscalls=always", "agent.window=30s", "port=9500", "captureDir=/srv/captures", "agent.extraArgs={--max-containers,50}"}, func(t *testing.T, objs Objects) {
			if ms := mounts(t, objs.DaemonSets[0]); ms["/srv/captures"].Path != "/srv/captures" {
				t.Errorf("mounts %v: want /srv/captures from the host", ms)
			}
			args := agentContainer(t, objs.DaemonSets[0]).Args
			w, _ := flag(args, "--window")
			m, _ := flag(args, "--max-containers")
			if _, duty := flag(args, "--duty-on"); w != "30s" || m != "50" || duty {
				t.Errorf("args %v: want --window 30s, --max-containers 50, no --duty-on", args)
			}
		}},
		{"otlp", []string{"agent.otlpEndpoint=http://otel-collector.monitoring:4318/v1/logs"}, func(t *testing.T, objs Objects) {
			c := agentContainer(t, objs.DaemonSets[0])
			if u, _ := flag(c.Args, "--otlp-endpoint"); u != "http://otel-collector.monitoring:4318/v1/logs" {
				t.Errorf("args %v: want --otlp-endpoint http://otel-collector.monitoring:4318/v1/logs", c.Args)
			}
			// The node's name, set before the variable that refers to it.
			if len(c.Env) != 2 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef == nil ||
				c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" ||
				c.Env[1].Name != "OTEL_RESOURCE_ATTRIBUTES" || !strings.Contains(c.Env[1].Value, "host.name=$(NODE_NAME)") {
				t.Errorf("env %+v: want NODE_NAME from spec.nodeName, then OTEL_RESOURCE_ATTRIBUTES with host.name=$(NODE_NAME)", c.Env)
			}
		}},
		// Credentials for the OTLP receiver: the headers from a Secret's
		// key into OTEL_EXPORTER_OTLP_HEADERS (never an argument, which
		// every process on the node reads), the TLS files from a Secret
		// mounted read-only for root only, each passed by its flag.
		{"otlp with credentials", []string{"agent.otlpEndpoint=https://otel.example.com:4318", "agent.otlp.headersSecret.name=otlp-auth",
			"agent.otlp.tls.secretName=otlp-tls"}, func(t *testing.T, objs Objects) {
			c := agentContainer(t, objs.DaemonSets[0])
			var h *corev1.EnvVar
			for i := range c.Env {
				if c.Env[i].Name == "OTEL_EXPORTER_OTLP_HEADERS" {
					h = &c.Env[i]
				}
			}
			if h == nil || h.Value != "" || h.ValueFrom == nil || h.ValueFrom.SecretKeyRef == nil ||
				h.ValueFrom.SecretKeyRef.Name != "otlp-auth" || h.ValueFrom.SecretKeyRef.Key != "headers" {
				t.Errorf("env %+v: want OTEL_EXPORTER_OTLP_HEADERS from the Secret otlp-auth's key headers", c.Env)
			}
			for flagName, want := range map[string]string{"--otlp-ca-file": "/etc/sysray/otlp/ca.crt",
				"--otlp-client-cert": "/etc/sysray/otlp/tls.crt", "--otlp-client-key": "/etc/sysray/otlp/tls.key"} {
				if v, _ := flag(c.Args, flagName); v != want {
					t.Errorf("args %v: want %s %s", c.Args, flagName, want)
				}
			}
			if _, ok := flag(c.Args, "--otlp-header"); ok {
				t.Errorf("args %v: a header in the arguments", c.Args)
			}
			if m := secretMounts(t, objs.DaemonSets[0]); m["/etc/sysray/otlp"] != "otlp-tls mode 400 readOnly true" {
				t.Errorf("secret mounts %v: want otlp-tls at /etc/sysray/otlp, mode 0400, read-only", m)
			}
		}},
		// A CA only, the headers not set: no client certificate, no
		// variable.
		{"otlp CA only", []string{"agent.otlpEndpoint=https://otel.example.com:4318", "agent.otlp.tls.secretName=otlp-ca",
			"agent.otlp.tls.cert=", "agent.otlp.tls.key=", "agent.otlp.tls.ca=bundle.pem"}, func(t *testing.T, objs Objects) {
			c := agentContainer(t, objs.DaemonSets[0])
			_, cert := flag(c.Args, "--otlp-client-cert")
			_, key := flag(c.Args, "--otlp-client-key")
			if ca, _ := flag(c.Args, "--otlp-ca-file"); ca != "/etc/sysray/otlp/bundle.pem" || cert || key || len(c.Env) != 2 {
				t.Errorf("args %v, env %v: want --otlp-ca-file /etc/sysray/otlp/bundle.pem only, and no headers", c.Args, c.Env)
			}
			if m := secretMounts(t, objs.DaemonSets[0]); m["/etc/sysray/otlp"] != "otlp-ca mode 400 readOnly true" {
				t.Errorf("secret mounts %v", m)
			}
		}},
		{"appArmor", []string{"appArmorUnconfined=true"}, func(t *testing.T, objs Objects) {
			p := agentContainer(t, objs.DaemonSets[0]).SecurityContext.AppArmorProfile
			if p == nil || p.Type != corev1.AppArmorProfileTypeUnconfined {
				t.Errorf("appArmorProfile %v: want Unconfined", p)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc.sets...)
			wiring(t, objs, socks)
			leastPrivilege(t, objs.DaemonSets[0])
			tc.check(t, objs)
		})
	}
}

// Values the agent cannot run with stop the render with a message.
func TestChartRejectsBadValues(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"runtime.type=docker", `runtime.type "docker": containerd or crio`},
		{"agent.syscalls=sometimes", `agent.syscalls "sometimes": duty or always`},
		{"service.enabled=false,serviceMonitor.enabled=true", "serviceMonitor.enabled needs service.enabled"},
		{"agent.otlp.headersSecret.name=otlp-auth", "agent.otlp.headersSecret and agent.otlp.tls need agent.otlpEndpoint"},
		{"agent.otlpEndpoint=http://otel:4318,agent.otlp.tls.secretName=otlp-tls", `agent.otlp.tls needs an https:// agent.otlpEndpoint, not "http://otel:4318"`},
		{"agent.otlpEndpoint=https://otel:4318,agent.otlp.tls.secretName=otlp-tls,agent.otlp.tls.key=", "agent.otlp.tls.cert and agent.otlp.tls.key: both or neither"},
	} {
		_, err := helm(t, "template", "sysray-agent", chart, "--set", tc.set)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %s: %v; want an error with %q", tc.set, err, tc.want)
		}
	}
}

func TestChartLint(t *testing.T) {
	if out, err := helm(t, "lint", "--strict", chart); err != nil {
		t.Errorf("helm lint --strict: %v\n%s", err, out)
	}
}

// The chart's defaults describe the raw manifest's pod, field for field:
// capabilities, hostPID, volumes and mounts, args, seccomp, probes,
// resources, tolerations. Only names and labels differ.
func TestChartMatchesManifest(t *testing.T) {
	raw := readManifests(t)
	objs := render(t, "serviceMonitor.enabled=true")
	rds, cds := raw.DaemonSets[0], objs.DaemonSets[0]
	same(t, "the pod spec", rds.Spec.Template.Spec, cds.Spec.Template.Spec)
	same(t, "the pod annotations", rds.Spec.Template.Annotations, cds.Spec.Template.Annotations)
	same(t, "the update strategy", rds.Spec.UpdateStrategy, cds.Spec.UpdateStrategy)
	rsvc, csvc := raw.Services[0].Spec, objs.Services[0].Spec
	same(t, "the Service's ports", rsvc.Ports, csvc.Ports)
	same(t, "the Service's clusterIP", rsvc.ClusterIP, csvc.ClusterIP)
	same(t, "the ServiceMonitor's endpoints", raw.ServiceMonitors[0].Spec.Endpoints, objs.ServiceMonitors[0].Spec.Endpoints)
	if len(raw.NetworkPolicies) != 1 || len(objs.NetworkPolicies) != 1 {
		t.Fatalf("NetworkPolicies: %d in the manifest, %d in the chart; want 1 each", len(raw.NetworkPolicies), len(objs.NetworkPolicies))
	}
	same(t, "the NetworkPolicy's ingress", raw.NetworkPolicies[0].Spec.Ingress, objs.NetworkPolicies[0].Spec.Ingress)
}

// Only metrics go to the pod's network: the API is on the pod's loopback,
// and a NetworkPolicy lets only the scraper reach the metrics port of the
// agent's pods, in the manifest and in the chart.
func TestAPINotExposed(t *testing.T) {
	for name, objs := range map[string]Objects{"manifest": readManifests(t), "chart": render(t)} {
		args := agentContainer(t, objs.DaemonSets[0]).Args
		api, _ := flag(args, "--api-listen")
		if h, _, err := net.SplitHostPort(api); err != nil || !net.ParseIP(h).IsLoopback() {
			t.Errorf("%s: --api-listen %q, want a loopback address", name, api)
		}
		if len(objs.NetworkPolicies) != 1 {
			t.Fatalf("%s: %d NetworkPolicies, want 1", name, len(objs.NetworkPolicies))
		}
		np := objs.NetworkPolicies[0].Spec
		if !reflect.DeepEqual(np.PodSelector.MatchLabels, objs.DaemonSets[0].Spec.Selector.MatchLabels) {
			t.Errorf("%s: the NetworkPolicy selects %v, the agent's pods are %v", name, np.PodSelector.MatchLabels, objs.DaemonSets[0].Spec.Selector.MatchLabels)
		}
		if len(np.Ingress) != 1 || len(np.Ingress[0].From) != 1 || len(np.Ingress[0].Ports) != 1 {
			t.Fatalf("%s: ingress %+v, want one rule from one peer to one port", name, np.Ingress)
		}
		in := np.Ingress[0]
		if p := in.Ports[0].Port; p == nil || p.IntValue() != int(agentContainer(t, objs.DaemonSets[0]).Ports[0].ContainerPort) {
			t.Errorf("%s: the NetworkPolicy opens port %v, not the metrics port", name, p)
		}
		if f := in.From[0]; f.PodSelector == nil || len(f.PodSelector.MatchLabels) == 0 || f.NamespaceSelector == nil || len(f.NamespaceSelector.MatchLabels) == 0 {
			t.Errorf("%s: the NetworkPolicy lets in %+v, want the scraper's pods in its namespace only", name, f)
		}
	}
	// A web config from a Secret: mounted read-only and passed to the agent.
	objs := render(t, "webConfig.secretName=sysray-web")
	args := agentContainer(t, objs.DaemonSets[0]).Args
	if f, _ := flag(args, "--web.config.file"); f != "/etc/sysray/web/web.yml" {
		t.Errorf("args %v: want --web.config.file /etc/sysray/web/web.yml", args)
	}
	var secret string
	for _, v := range objs.DaemonSets[0].Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			secret = v.Secret.SecretName
		}
	}
	ro := false
	for _, vm := range agentContainer(t, objs.DaemonSets[0]).VolumeMounts {
		ro = ro || vm.MountPath == "/etc/sysray/web" && vm.ReadOnly
	}
	if secret != "sysray-web" || !ro {
		t.Errorf("the web config's Secret %q mounted read-only at /etc/sysray/web: %v; want sysray-web, true", secret, ro)
	}
	// The kubelet's probes carry no credentials: with a web config they
	// check the port, not /healthz.
	c := agentContainer(t, objs.DaemonSets[0])
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p == nil || p.TCPSocket == nil || p.HTTPGet != nil {
			t.Errorf("with a web config, probe %+v: want a tcpSocket probe", p)
		}
	}
	if objs := render(t, "networkPolicy.enabled=false"); len(objs.NetworkPolicies) != 0 {
		t.Error("networkPolicy.enabled=false still renders a NetworkPolicy")
	}
}

// same fails showing where a and b, as YAML, first part.
func same(t *testing.T, what string, a, b any) {
	t.Helper()
	if equality.Semantic.DeepEqual(a, b) {
		return
	}
	ya, _ := yaml.Marshal(a)
	yb, _ := yaml.Marshal(b)
	la, lb := strings.Split(string(ya), "\n"), strings.Split(string(yb), "\n")
	i := 0
	for i < len(la) && i < len(lb) && la[i] == lb[i] {
		i++
	}
	from := max(i-3, 0)
	part := func(l []string) string { return strings.Join(l[from:min(i+4, len(l))], "\n") }
	t.Errorf("%s differs between the manifest and the chart from line %d:\nmanifest:\n%s\nchart:\n%s", what, i+1, part(la), part(lb))
}
