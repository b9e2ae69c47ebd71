package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"go.yaml.in/yaml/v2"
	"golang.org/x/sys/unix"
)

// The files an operator installs: deploy/prometheus's rules and
// deploy/grafana's dashboard.
const (
	fleetRules     = "../deploy/prometheus/sysray.rules.yml"
	fleetDashboard = "../deploy/grafana/sysray.json"
)

// promResult is an answer of Prometheus's HTTP API.
type promResult struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	} `json:"data"`
}

func promGet(t *testing.T, addr, path string, params url.Values, into any) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + path + "?" + params.Encode())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v: %s", path, err, b)
	}
	return string(b)
}

// promAlert is one alert of /api/v1/alerts.
type promAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
}

// The fleet view against the real thing: Debian's Prometheus, with
// deploy/prometheus/sysray.rules.yml loaded, scrapes a real agent while a
// containerd container with Kubernetes labels fails a syscall and crashes
// again and again.
// The critical-finding alert fires for that container's pod; every query of
// the dashboard, with its variables set to values Prometheus lists for
// them, returns data; every recording rule has data; every alert's
// expression evaluates, and those that must stay quiet on a healthy agent
// (down, absent, restarting, memory, stale reads) return nothing.
func TestFleetDashboardAndAlerts(t *testing.T) {
	alongside(t)
	requireBPF(t)
	requirePrometheus(t)
	if _, err := exec.LookPath("containerd"); err != nil && os.Getenv("SYSRAY_REQUIRE_BPF") != "1" {
		t.Skip("containerd not installed (tests/containers/setup.sh installs it)")
	}
	start := time.Now()
	deadline := start.Add(85 * time.Second)
	// The BPF run time panel needs the kernel's run-time statistics.
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Fatalf("BPF_ENABLE_STATS: %v", err)
	}
	defer stats.Close()
	// runc alone makes some 60 syscalls in a new container: room for the
	// ones the test reads.
	a := startAgent(t, "--window", "1s", "--grace", "1h", "--max-syscalls", "400")
	rules, err := filepath.Abs(fleetRules)
	if err != nil {
		t.Fatal(err)
	}
	// kube-state-metrics' DaemonSet series, which the coverage panels and
	// SysrayNodesNotCovered read, for the one node of this test: desired
	// 1, ready as the kubelet's readiness probe would find the agent (its
	// /healthz), the names and labels kube-state-metrics writes. There is
	// no cluster here for the real kube-state-metrics to watch.
	ksm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		ready := 0
		if resp, err := http.Get(a.base + "/healthz"); err == nil {
			if resp.StatusCode == http.StatusOK {
				ready = 1
			}
			resp.Body.Close()
		}
		l := `{namespace="sysray",daemonset="sysray-agent"}`
		fmt.Fprintf(w, "kube_daemonset_status_desired_number_scheduled%s 1\nkube_daemonset_status_number_ready%s %d\nkube_daemonset_status_updated_number_scheduled%s 1\n", l, l, ready, l)
	}))
	defer ksm.Close()
	// The job is named as the ServiceMonitor's would be; cluster is a
	// target label, as external or relabelled labels give it, and node
	// the one the chart's ServiceMonitor sets. Native histograms on, so
	// that Prometheus scrapes over protobuf and stores the native series
	// the dashboard's native p99 reads (without, Prometheus asks for text
	// and that panel is empty, its noValue saying why). Scrapes
	// every 2 s, each given 2 s: on this 2-CPU machine under a load of 20
	// (other tests), 1 s scrapes timed out, and a failed scrape is up == 0
	// and every series of the agent stale.
	promAddr, dir := startPrometheus(t, fmt.Sprintf(`
  - job_name: sysray-agent
    scrape_interval: 2s
    scrape_timeout: 2s
    static_configs:
      - targets: [%q]
        labels:
          cluster: fleet-test
          node: fleet-node
  - job_name: kube-state-metrics
    scrape_interval: 2s
    scrape_timeout: 2s
    honor_labels: true
    static_configs:
      - targets: [%q]
        labels:
          cluster: fleet-test
rule_files:
  - %q
`, strings.TrimPrefix(a.base, "http://"), strings.TrimPrefix(ksm.URL, "http://"), rules), "--enable-feature=native-histograms")
	promLog := func() string { b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log")); return string(b) }

	name := fmt.Sprintf("sysray-fleet-%d", time.Now().UnixNano())
	pod, ns, cname := "shop-web-0", "shop", "web"
	// It crashes every second, as a crash-looping process does: the
	// finding stays active (three 1 s windows after the last crash) while
	// the panels showing active findings are asked.
	script := "while [ ! -x /sysray-segv ]; do sleep 0.1; done; /sysray-mmapfail; while :; do /sysray-segv; sleep 1; done"
	out, err := exec.Command("bash", "containers/setup.sh", "run", name, pod, ns, cname, "--", "sh", "-c", script).Output()
	if err != nil {
		t.Fatalf("setup.sh run: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("bash", "containers/teardown.sh", name).CombinedOutput(); err != nil {
			t.Errorf("teardown.sh %s: %v\n%s", name, err, out)
		}
	})
	root := filepath.Join("/proc", strings.TrimSpace(string(out)), "root")
	// Prometheus sees the container under its pod before the crash, so
	// the crash is not the first thing it knows of it.
	sel := fmt.Sprintf(`{cluster="fleet-test", namespace=%q, pod=%q, container=%q}`, ns, pod, cname)
	for {
		if v, _ := promQuery(t, promAddr, "count(sysray_page_faults_total"+sel+")"); v == 1 {
			break
		}
		if time.Now().After(deadline) {
			_, logs := a.stop(t)
			t.Fatalf("Prometheus has no series of %s; the agent's log:\n%s\nPrometheus's log:\n%s", sel, strings.Join(logs, "\n"), promLog())
		}
		time.Sleep(500 * time.Millisecond)
	}
	// segv last: the container waits for it.
	copyIntoContainer(t, root, "mmapfail", "segv")

	// The crash's alert, firing, naming the pod.
	var firing *promAlert
	for firing == nil {
		var r struct {
			Data struct{ Alerts []promAlert } `json:"data"`
		}
		promGet(t, promAddr, "/api/v1/alerts", nil, &r)
		for i, al := range r.Data.Alerts {
			l := al.Labels
			if l["alertname"] == "SysrayCriticalFinding" && l["id"] == "fatal-signal" && l["pod"] == pod && l["namespace"] == ns && l["container"] == cname && al.State == "firing" {
				firing = &r.Data.Alerts[i]
			}
		}
		if firing == nil && time.Now().After(deadline) {
			f, _ := http.Get(a.base + "/api/findings")
			b, _ := io.ReadAll(f.Body)
			t.Fatalf("no firing SysrayCriticalFinding for fatal-signal in %s/%s/%s; alerts: %+v\nthe agent's findings: %s\nPrometheus's log:\n%s", ns, pod, cname, r.Data.Alerts, b, promLog())
		}
		time.Sleep(500 * time.Millisecond)
	}
	fired := time.Since(start)
	if s := firing.Annotations["summary"]; !strings.Contains(s, ns+"/"+pod) || !strings.Contains(s, cname) || !strings.Contains(s, "node fleet-node") {
		t.Errorf("the alert's summary %q does not name the pod %s/%s, container %s and node fleet-node", s, ns, pod, cname)
	}
	// The runbook is the finding's page in this repository.
	const docs = "https://github.com/sysray/sysray/blob/main/"
	if u := firing.Annotations["runbook_url"]; u != docs+"docs/detectors/fatal-signal.md" {
		t.Errorf("the alert's runbook_url %q: want %sdocs/detectors/fatal-signal.md", u, docs)
	} else if _, err := os.Stat(filepath.Join("..", strings.TrimPrefix(u, docs))); err != nil {
		t.Errorf("the alert's runbook %s: %v", u, err)
	}

	// Every dashboard query, its variables set as Grafana would: each
	// variable's label_values query, asked of Prometheus, must list the
	// scenario's value.
	b, err := os.ReadFile(fleetDashboard)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Templating struct {
			List []struct{ Name, Type, Definition string }
		}
		Panels []struct {
			Type, Title string
			Targets     []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cluster": "fleet-test", "namespace": ns, "pod": pod, "container": cname,
		"syscall": "mmap", "instance": strings.TrimPrefix(a.base, "http://")}
	// The panels' rate windows: Grafana's $__rate_interval at this 1 s
	// scrape interval would be 4 s; a minute holds the whole scenario.
	vars := map[string]string{"__rate_interval": "1m"}
	varRef := regexp.MustCompile(`\$(\w+)`)
	subst := func(e string) string {
		return varRef.ReplaceAllStringFunc(e, func(s string) string {
			v, ok := vars[s[1:]]
			if !ok {
				t.Fatalf("%q: variable %s has no value yet", e, s)
			}
			return v
		})
	}
	labelValues := regexp.MustCompile(`^label_values\((.+), (\w+)\)$`)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Fatalf("variable %s: %q is not label_values(selector, label)", v.Name, v.Definition)
		}
		var r struct {
			Status string
			Data   []string
		}
		raw := promGet(t, promAddr, "/api/v1/label/"+m[2]+"/values", url.Values{"match[]": {subst(m[1])}}, &r)
		found := false
		for _, d := range r.Data {
			found = found || d == want[v.Name]
		}
		if r.Status != "success" || !found {
			t.Fatalf("variable %s (%s): Prometheus lists %s, want %q among them", v.Name, subst(m[1]), raw, want[v.Name])
		}
		// Grafana writes a value into a regex matcher escaped, then as a
		// PromQL string.
		vars[v.Name] = strings.ReplaceAll(regexp.QuoteMeta(want[v.Name]), `\`, `\\`)
	}
	query := func(e string) (promResult, string) {
		var r promResult
		raw := promGet(t, promAddr, "/api/v1/query", url.Values{"query": {e}}, &r)
		return r, raw
	}
	// queryData asks until the answer holds data or the deadline passes: a
	// rate needs two scrapes of a series, and one the crash made may have
	// only one yet.
	queryData := func(e string) (promResult, string) {
		r, raw := query(e)
		for r.Status == "success" && len(r.Data.Result) == 0 && time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
			r, raw = query(e)
		}
		return r, raw
	}
	panels := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			panels++
			e := subst(tg.Expr)
			if r, raw := queryData(e); r.Status != "success" || len(r.Data.Result) == 0 {
				_, active := query("sysray_finding_active")
				_, up := query("up")
				t.Errorf("panel %q: %s returns no data: %s\nfindings active: %s\nup: %s", p.Title, e, raw, active, up)
			}
		}
	}

	// The rules: every recording rule has data, every alert evaluates.
	var file struct {
		Groups []struct {
			Rules []struct{ Record, Alert, Expr string }
		}
	}
	b, err = os.ReadFile(fleetRules)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &file); err != nil { // promtool checks the rest of it (deploy/check)
		t.Fatal(err)
	}
	quiet := map[string]bool{"SysrayAgentDown": true, "SysrayAgentAbsent": true, "SysrayAgentRestarting": true,
		"SysrayAgentMemoryHigh": true, "SysrayAgentMemoryNearLimit": true, "SysrayAgentReadsStale": true,
		"SysrayNodesNotCovered": true}
	alerts := 0
	for _, g := range file.Groups {
		for _, rule := range g.Rules {
			switch {
			case rule.Record != "":
				if r, raw := queryData(rule.Record + sel); r.Status != "success" || len(r.Data.Result) == 0 {
					t.Errorf("recording rule %s: no data for %s: %s", rule.Record, sel, raw)
				}
			case rule.Alert != "":
				alerts++
				r, raw := query(rule.Expr)
				if rule.Alert == "SysrayCriticalFinding" {
					r, raw = queryData(rule.Expr)
				}
				switch {
				case r.Status != "success":
					t.Errorf("alert %s: %s does not evaluate: %s", rule.Alert, rule.Expr, raw)
				case rule.Alert == "SysrayCriticalFinding" && len(r.Data.Result) == 0:
					t.Errorf("alert %s: %s returns nothing while it fires", rule.Alert, rule.Expr)
				case quiet[rule.Alert] && len(r.Data.Result) != 0:
					t.Errorf("alert %s: %s returns %s on a healthy agent", rule.Alert, rule.Expr, raw)
				}
			}
		}
	}
	t.Logf("the crash's alert fired %.1f s after the start; %d dashboard queries and %d alert expressions evaluated", fired.Seconds(), panels, alerts)
}
