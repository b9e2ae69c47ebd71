package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v2"
)

// The Prometheus Operator labels every target of a ServiceMonitor with the
// namespace, pod and container of the scraped pod: for the agent, its own.
// The agent's series carry labels of those names too (where the calls were
// made). This runs the real Prometheus on three jobs scraping the same
// series, each target labelled as the operator labels it: with the
// shipped ServiceMonitor's relabelings the series keep their labels;
// without them Prometheus renames them to exported_* and every query of
// the rules and the dashboard misses. honor_labels keeps them too, the
// host's empty pod included, because the text format writes pod="" out.
func TestServiceMonitorKeepsAgentLabels(t *testing.T) {
	alongside(t)
	requirePrometheus(t)
	series := `# TYPE sysray_page_faults_total counter
sysray_page_faults_total{container="web",namespace="shop",pod="web-0"} 7
sysray_page_faults_total{container="host",namespace="",pod=""} 3
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, series)
	}))
	defer srv.Close()

	// The shipped ServiceMonitor's relabelings, as Prometheus configuration.
	b, err := os.ReadFile("../deploy/kubernetes/servicemonitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var sm struct {
		Spec struct {
			Endpoints []struct {
				Relabelings []struct {
					SourceLabels []string `yaml:"sourceLabels"`
					TargetLabel  string   `yaml:"targetLabel"`
					Action       string   `yaml:"action"`
					Regex        string   `yaml:"regex"`
				} `yaml:"relabelings"`
			} `yaml:"endpoints"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &sm); err != nil || len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("servicemonitor.yaml: %v", err)
	}
	var relabel strings.Builder
	for _, r := range sm.Spec.Endpoints[0].Relabelings {
		j, _ := json.Marshal(map[string]any{"source_labels": r.SourceLabels, "target_label": r.TargetLabel, "action": r.Action, "regex": r.Regex})
		var m map[string]any
		json.Unmarshal(j, &m)
		for k, v := range m {
			if v == nil || v == "" {
				delete(m, k)
			}
		}
		// __meta_* labels exist only under Kubernetes discovery.
		if src, _ := m["source_labels"].([]any); len(src) > 0 && strings.HasPrefix(src[0].(string), "__meta_kubernetes") {
			continue
		}
		j, _ = json.Marshal(m)
		fmt.Fprintf(&relabel, "      - %s\n", j)
	}
	if relabel.Len() == 0 {
		t.Fatal("the ServiceMonitor has no relabeling that applies outside Kubernetes")
	}
	target := strings.TrimPrefix(srv.URL, "http://")
	job := func(name, extra string) string {
		return fmt.Sprintf(`
  - job_name: %s
    static_configs:
      - targets: [%q]
        labels: {namespace: sysray, pod: sysray-agent-x1, container: agent}
%s`, name, target, extra)
	}
	promAddr, _ := startPrometheus(t, job("shipped", "    relabel_configs:\n"+relabel.String())+
		job("operator-default", "")+job("honor", "    honor_labels: true\n"))

	want := map[string]float64{
		`sysray_page_faults_total{job="shipped",container="web",namespace="shop",pod="web-0"}`:                              7,
		`sysray_page_faults_total{job="shipped",container="host",namespace="",pod=""}`:                                      3,
		`sysray_page_faults_total{job="operator-default",container="agent",exported_container="web",pod="sysray-agent-x1"}`: 7,
		`sysray_page_faults_total{job="honor",container="host",pod="",namespace=""}`:                                        3,
	}
	for q, w := range want {
		var got float64
		var raw string
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			got, raw = promQuery(t, promAddr, q)
			if got == w || time.Now().After(deadline) {
				break
			}
		}
		if got != w {
			t.Errorf("%s = %v, want %v: %s", q, got, w, raw)
		}
	}
	// The shipped job keeps nothing of the operator's labels.
	var r promResult
	promGet(t, promAddr, "/api/v1/query", url.Values{"query": {`{job="shipped", __name__="sysray_page_faults_total"}`}}, &r)
	for _, s := range r.Data.Result {
		if strings.Contains(string(s), "exported_") || strings.Contains(string(s), "sysray-agent-x1") {
			t.Errorf("the shipped relabelings leave %s", s)
		}
	}
}
