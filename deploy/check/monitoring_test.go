package check

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"
)

const (
	rulesFile     = "../prometheus/sysray.rules.yml"
	ruleTests     = "../prometheus/tests"
	dashboardFile = "../grafana/sysray.json"
)

// promtool runs Prometheus's promtool. Without it the test is skipped, or
// fails where CI demands every test (Debian's prometheus package has it).
func promtool(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("SYSRAY_REQUIRE_BPF") == "1" {
			t.Fatal("promtool is needed to check the rules (apt-get install prometheus): " + err.Error())
		}
		t.Skip("no promtool in PATH")
	}
	return exec.Command(bin, args...).CombinedOutput()
}

// The rule file is valid Prometheus rules, and its unit tests (each alert
// fires on a series that should fire it and stays quiet on a near miss)
// pass.
func TestPrometheusRules(t *testing.T) {
	if out, err := promtool(t, "check", "rules", rulesFile); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	tests, err := filepath.Glob(filepath.Join(ruleTests, "*.yml"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no rule tests in %s: %v", ruleTests, err)
	}
	out, err := promtool(t, append([]string{"test", "rules"}, tests...)...)
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	// Every alert of the file has a test that makes it fire.
	var file monitoringv1.PrometheusRuleSpec
	b, _ := os.ReadFile(rulesFile)
	if err := unmarshalStrict(b, &file); err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, f := range tests {
		b, _ := os.ReadFile(f)
		all = append(all, b...)
	}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if !regexp.MustCompile(`alertname: ` + r.Alert + `\n\s+exp_alerts:\n\s+- exp_labels`).Match(all) {
				t.Errorf("alert %s: no test expects it to fire", r.Alert)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("alert %s has no %s", r.Alert, a)
				}
			}
		}
	}
}

// The chart's copies are the files under deploy/prometheus and
// deploy/grafana: one source for both.
func TestChartCopiesTheSources(t *testing.T) {
	for src, cp := range map[string]string{rulesFile: chart + "/files/sysray.rules.yml", dashboardFile: chart + "/files/sysray.json"} {
		a, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(cp)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from %s: cp %s %s", cp, src, "deploy/"+strings.TrimPrefix(src, "../"), "deploy/"+strings.TrimPrefix(cp, "../"))
		}
	}
}

// With prometheusRule and grafanaDashboard on, the chart renders a
// PrometheusRule holding exactly the rule file's groups (valid for promtool
// as rendered) and a ConfigMap for Grafana's sidecar holding the dashboard;
// with the defaults, neither.
func TestChartMonitoring(t *testing.T) {
	if objs := render(t); len(objs.PrometheusRules) != 0 || len(objs.ConfigMaps) != 0 {
		t.Errorf("by default %d PrometheusRules and %d ConfigMaps: clusters without the CRD would refuse the release", len(objs.PrometheusRules), len(objs.ConfigMaps))
	}
	if out, err := helm(t, "lint", "--strict", chart, "--set", "prometheusRule.enabled=true,grafanaDashboard.enabled=true"); err != nil {
		t.Errorf("helm lint --strict with the rules and the dashboard: %v\n%s", err, out)
	}
	objs := render(t, "prometheusRule.enabled=true", "prometheusRule.labels.release=prometheus",
		"grafanaDashboard.enabled=true", "grafanaDashboard.annotations.grafana_folder=sysray", "grafanaDashboard.namespace=monitoring")
	wiring(t, objs, agentSockets(t))
	if len(objs.PrometheusRules) != 1 || len(objs.ConfigMaps) != 1 {
		t.Fatalf("%d PrometheusRules, %d ConfigMaps; want 1 each", len(objs.PrometheusRules), len(objs.ConfigMaps))
	}
	pr := objs.PrometheusRules[0]
	if pr.Labels["release"] != "prometheus" || pr.Namespace != objs.DaemonSets[0].Namespace {
		t.Errorf("PrometheusRule labels %v in %q: want release=prometheus, in the release's namespace", pr.Labels, pr.Namespace)
	}
	var file monitoringv1.PrometheusRuleSpec
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := unmarshalStrict(b, &file); err != nil {
		t.Fatalf("%s as a PrometheusRule's spec: %v", rulesFile, err)
	}
	if len(file.Groups) == 0 {
		t.Fatalf("%s: no groups", rulesFile)
	}
	same(t, "the PrometheusRule's groups (file, chart)", file.Groups, pr.Spec.Groups)
	// The rendered rules, as the operator hands them to Prometheus.
	y, err := yaml.Marshal(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "rendered.rules.yml")
	os.WriteFile(p, y, 0o600)
	if out, err := promtool(t, "check", "rules", p); err != nil {
		t.Errorf("promtool check rules on the chart's PrometheusRule: %v\n%s", err, out)
	}

	// The rules select the agent's scrape job and its DaemonSet by name,
	// job=~".*sysray-agent" and daemonset=~".*sysray-agent": the names the
	// chart gives them, whatever the release is called.
	agentName := regexp.MustCompile(`^.*sysray-agent$`)
	for _, release := range []string{"sysray-agent", "prod", "sysray"} {
		out, err := helm(t, "template", release, chart, "--namespace", "sysray")
		if err != nil {
			t.Fatal(err)
		}
		var o Objects
		if err := Decode("helm template "+release, out, &o); err != nil {
			t.Fatal(err)
		}
		if !agentName.MatchString(o.DaemonSets[0].Name) || !agentName.MatchString(o.Services[0].Name) {
			t.Errorf("release %s: DaemonSet %q, Service %q; the rules select .*sysray-agent", release, o.DaemonSets[0].Name, o.Services[0].Name)
		}
	}
	for _, sel := range []string{`job=~".*sysray-agent"`, `daemonset=~".*sysray-agent"`} {
		if !strings.Contains(string(b), sel) {
			t.Errorf("%s: no rule selects %s", rulesFile, sel)
		}
	}

	cm := objs.ConfigMaps[0]
	if cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "sysray" || cm.Namespace != "monitoring" {
		t.Errorf("ConfigMap labels %v, annotations %v, namespace %q: want grafana_dashboard=1, grafana_folder=sysray, monitoring", cm.Labels, cm.Annotations, cm.Namespace)
	}
	want, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["sysray.json"]; got != strings.TrimRight(string(want), "\n") {
		t.Errorf("the ConfigMap's sysray.json (%d bytes) is not %s (%d bytes)", len(got), dashboardFile, len(want))
	}
	if !json.Valid([]byte(cm.Data["sysray.json"])) {
		t.Error("the ConfigMap's sysray.json is not JSON")
	}
}

// A Grafana dashboard in the classic JSON model, the parts this test reads.
type dashboard struct {
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			Definition string `json:"definition"`
			AllValue   string `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		Expr   string `json:"expr"`
		Format string `json:"format"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			NoValue string `json:"noValue"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

var dashVar = regexp.MustCompile(`\$(\w+)`)

// The dashboard has the variables and panels the issue asks for, every
// panel reads the datasource variable, and every query (variables as
// Grafana substitutes them) is PromQL that promtool accepts. That the
// queries return data is tests/fleet_test.go's, against a real agent.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"__rate_interval": "5m", "__interval": "1m"}
	var exprs []string
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			if v.Query != "prometheus" {
				t.Errorf("datasource variable %s queries %v, want prometheus", v.Name, v.Query)
			}
		case "query":
			m := regexp.MustCompile(`^label_values\((.+), (\w+)\)$`).FindStringSubmatch(v.Definition)
			if m == nil || m[2] != v.Name || v.AllValue != ".*" {
				t.Errorf("variable %s: %q, allValue %q; want label_values(selector, %s) and .*", v.Name, v.Definition, v.AllValue, v.Name)
				continue
			}
			exprs = append(exprs, m[1])
			vars[v.Name] = ".*"
		}
	}
	for _, want := range []string{"datasource", "cluster", "namespace", "pod", "container", "syscall"} {
		if _, ok := vars[want]; !ok && want != "datasource" {
			t.Errorf("no %s variable", want)
		}
	}
	ids := map[int]bool{}
	var types []string
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W < 1 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H < 1 {
			t.Errorf("panel %q: gridPos %+v outside the 24 columns", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		types = append(types, p.Type)
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %v, %d targets; want ${datasource} and a query", p.Title, p.Datasource, len(p.Targets))
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	if !slices.Contains(types, "heatmap") {
		t.Error("no heatmap panel")
	}
	// The fleet's coverage, and the native histogram's p99, which says why
	// it is empty where Prometheus stores no native histograms.
	for _, want := range []struct{ title, query string }{
		{"Nodes covered", "kube_daemonset_status_desired_number_scheduled"},
		{"Agents up", `up{job=~".*sysray-agent"`},
		{"p99 latency by container (native histogram)", "sysray_syscall_duration_nanoseconds"},
	} {
		i := slices.IndexFunc(d.Panels, func(p panel) bool { return p.Title == want.title })
		if i < 0 || len(d.Panels[i].Targets) == 0 || !strings.Contains(d.Panels[i].Targets[0].Expr, want.query) {
			t.Errorf("no panel %q querying %s", want.title, want.query)
		} else if d.Panels[i].FieldConfig.Defaults.NoValue == "" {
			t.Errorf("panel %q: no noValue text to say why it may be empty", want.title)
		}
	}
	// promtool parses each query as a recording rule's expression.
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range exprs {
		e = dashVar.ReplaceAllStringFunc(e, func(s string) string {
			v, ok := vars[s[1:]]
			if !ok {
				t.Errorf("%q: no variable %s", e, s)
			}
			return v
		})
		j, _ := json.Marshal(e)
		fmt.Fprintf(&rules, "      - record: dashboard_query_%d\n        expr: %s\n", i, j)
	}
	p := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	os.WriteFile(p, []byte(rules.String()), 0o600)
	if out, err := promtool(t, "check", "rules", p); err != nil {
		t.Errorf("the dashboard's queries: %v\n%s", err, out)
	}
}
