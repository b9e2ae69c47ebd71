// Package otlp tests `sysray agent --otlp-endpoint` against the
// OpenTelemetry Collector's own OTLP receiver (otlpreceiver), on loopback:
// the real agent, live BPF, a real crash, and the records as the
// collector decodes them (plog).
//
// It is a module of its own so that the sysray module does not depend on
// the collector. Run it as root with `cd tests/otlp && go test ./...`; with
// SYSRAY_REQUIRE_BPF=1 (CI) a test that cannot run fails.
package otlp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

func requireBPF(t *testing.T) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "not root"
	} else if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		why = "no kernel BTF"
	}
	if why == "" {
		return
	}
	if os.Getenv("SYSRAY_REQUIRE_BPF") == "1" {
		t.Fatalf("cannot run BPF tests (%s) but SYSRAY_REQUIRE_BPF=1", why)
	}
	t.Skipf("skipping BPF test: %s", why)
}

// build compiles sysray from this checkout and tests/progs/segv.c, once for
// the package's tests: the binaries the tests run are this tree's. They go
// in a directory of the package's own, which TestMain removes. crasher is
// segv under the test's own name: the tests run side by side, each agent
// sees every crash on the host, and the crashes of one program are one
// finding, sent once; so each test crashes a program of its own.
func build(t *testing.T, crasher string) (sysray, segv string) {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "sysray-otlp-")
		if err != nil {
			built.err = err
			return
		}
		built.dir = dir
		sysray, segv := filepath.Join(dir, "sysray"), filepath.Join(dir, "segv")
		b := exec.Command("go", "build", "-o", sysray, "./cmd/sysray")
		b.Dir = "../.."
		b.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := b.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("building sysray: %v\n%s", err, out)
			return
		}
		if out, err := exec.Command("gcc", "-O2", "-static", "-Wall", "-o", segv, "../progs/segv.c").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("compiling segv.c: %v\n%s", err, out)
			return
		}
		built.sysray, built.segv = sysray, segv
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	if crasher == "segv" {
		return built.sysray, built.segv
	}
	// A link, not a copy: a file written while another test forks can
	// be held open for writing in the child until its exec, and then
	// running it fails with "text file busy".
	segv = filepath.Join(built.dir, crasher)
	os.Remove(segv) // -count=2
	if err := os.Link(built.segv, segv); err != nil {
		t.Fatal(err)
	}
	return built.sysray, segv
}

var built struct {
	once              sync.Once
	dir, sysray, segv string
	err               error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// receive starts the collector's OTLP receiver, HTTP only, on a free
// loopback port, and returns its /v1/logs URL and what it consumes.
func receive(t *testing.T) (string, *consumertest.LogsSink) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = addr
	sink := new(consumertest.LogsSink)
	r, err := f.CreateLogs(context.Background(), receivertest.NewNopSettings(f.Type()), cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	return "http://" + addr + "/v1/logs", sink
}

type agent struct {
	cmd  *exec.Cmd
	base string
	done chan error

	mu  sync.Mutex
	out []string // the lines it logged
}

func startAgent(t *testing.T, sysray string, args ...string) *agent {
	t.Helper()
	return startAgentEnv(t, sysray, nil, args...)
}

// startAgentEnv starts the agent with env added to the test's
// environment.
func startAgentEnv(t *testing.T, sysray string, env []string, args ...string) *agent {
	t.Helper()
	cmd := exec.Command(sysray, append([]string{"agent", "--listen", "127.0.0.1:0", "--interval", "500ms",
		"--capture-dir", "", "--syscalls", "always", "--window", "1s"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &agent{cmd: cmd, done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			a.mu.Lock()
			a.out = append(a.out, sc.Text())
			a.mu.Unlock()
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "listening" {
				addr <- m["addr"].(string)
			}
			if testing.Verbose() && json.Valid(sc.Bytes()) && !strings.Contains(sc.Text(), `"level":"INFO"`) {
				fmt.Fprintln(os.Stderr, "agent:", sc.Text())
			}
		}
		a.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-a.done
		}
	})
	select {
	case x := <-addr:
		a.base = "http://" + x
	case err := <-a.done:
		t.Fatalf("the agent exited before listening: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the agent did not say where it listens")
	}
	for i := 0; ; i++ {
		resp, err := http.Get(a.base + "/api/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if i > 150 {
			t.Fatalf("the agent's health never became ok: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return a
}

func (a *agent) stop(t *testing.T) {
	t.Helper()
	a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-a.done:
		if err != nil {
			t.Errorf("the agent exited: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("the agent did not exit within 30 s of SIGTERM")
	}
}

// apiFinding is a finding as /api/findings serves it, numbers as JSON
// spells them.
type apiFinding struct {
	ID          string                     `json:"id"`
	Severity    string                     `json:"severity"`
	Title       string                     `json:"title"`
	Summary     string                     `json:"summary"`
	Fix         string                     `json:"fix"`
	Key         string                     `json:"key"`
	StoreKey    string                     `json:"store_key"`
	Syscalls    []string                   `json:"syscalls"`
	FirstSeen   time.Time                  `json:"first_seen"`
	Occurrences int                        `json:"occurrences"`
	Evidence    map[string]json.RawMessage `json:"evidence"`
}

func (a *agent) findings(t *testing.T) []apiFinding {
	t.Helper()
	resp, err := http.Get(a.base + "/api/findings")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Findings []apiFinding }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Findings
}

// metrics are the agent's series whose names start with prefix, by their
// text (name and labels).
func (a *agent) metrics(t *testing.T, prefix string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(a.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, prefix) {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", l, err)
		}
		out[l[:i]] = v
	}
	return out
}

// settled waits, up to 5 s, for the agent's count of records sent to
// reach what the receiver holds (held), and returns its OTLP metrics and
// that count: a receiver stores a request's records before it answers,
// and the agent counts them once the answer is back, so the two can be
// read between.
func (a *agent) settled(t *testing.T, held func() int) (map[string]float64, int) {
	t.Helper()
	var m map[string]float64
	n := 0
	for i := 0; i < 50; i++ {
		n = held()
		m = a.metrics(t, "sysray_otlp_")
		if m["sysray_otlp_records_sent_total"] == float64(n) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return m, n
}

// crash runs segv, whose child dies of SIGSEGV, and returns the child's pid.
func crash(t *testing.T, segv string) int {
	t.Helper()
	out, err := exec.Command(segv).Output()
	var pid, signaled, sig int
	if _, serr := fmt.Sscanf(string(out), "child %d signaled=%d sig=%d", &pid, &signaled, &sig); err != nil || serr != nil || sig != 11 {
		t.Fatalf("segv: %v %v %q", err, serr, out)
	}
	return pid
}

// cgroup2 is where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup,
// or /sys/fs/cgroup/unified on a hybrid host).
func cgroup2(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		// "... mountpoint opts - fstype source superopts"
		pre, post, ok := strings.Cut(l, " - ")
		if f := strings.Fields(pre); ok && strings.HasPrefix(post, "cgroup2 ") && len(f) > 4 {
			return f[4]
		}
	}
	t.Fatal("no cgroup v2 hierarchy mounted")
	return ""
}

// record is a log record the receiver got, with its resource.
type record struct {
	res pcommon.Map
	plog.LogRecord
}

func records(sink *consumertest.LogsSink) []record {
	var out []record
	for _, ld := range sink.AllLogs() {
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			rl := ld.ResourceLogs().At(i)
			for j := 0; j < rl.ScopeLogs().Len(); j++ {
				lrs := rl.ScopeLogs().At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					out = append(out, record{rl.Resource().Attributes(), lrs.At(k)})
				}
			}
		}
	}
	return out
}

func str(m pcommon.Map, k string) string {
	v, ok := m.Get(k)
	if !ok {
		return "<absent>"
	}
	return v.AsString()
}

// A process that dies of SIGSEGV under the agent is one log record at the
// receiver: severity ERROR ("critical"), the finding's summary as body,
// its id, keys and evidence equal to what /api/findings says, the crashed
// process's pid and comm, and the agent's host and service as resource.
// The same crash again is the same finding: no second record; in a
// container it is another, with the container's id and name. The agent's
// counters agree with what the receiver holds.
func TestFindingsOverOTLP(t *testing.T) {
	requireBPF(t)
	t.Parallel()
	sysray, segv := build(t, "segv")
	url, sink := receive(t)
	a := startAgent(t, sysray, "--otlp-endpoint", url)

	pid := crash(t, segv)
	var got *record
	for i := 0; i < 100 && got == nil; i++ {
		time.Sleep(200 * time.Millisecond)
		for _, r := range records(sink) {
			if str(r.Attributes(), "sysray.finding.id") == "fatal-signal" && str(r.Attributes(), "process.pid") == strconv.Itoa(pid) {
				got = &r
			}
		}
	}
	if got == nil {
		t.Fatalf("no fatal-signal record for segv's child %d after 20 s; the receiver got %d records", pid, sink.LogRecordCount())
	}
	// The API, right away: the window after the next would have the same
	// finding's words from that window.
	var f *apiFinding
	for _, x := range a.findings(t) {
		if x.StoreKey == str(got.Attributes(), "sysray.finding.store_key") {
			f = &x
		}
	}
	if f == nil {
		t.Fatalf("the record's store key %q is not in /api/findings: %+v", str(got.Attributes(), "sysray.finding.store_key"), a.findings(t))
	}
	at := got.Attributes()
	if got.SeverityNumber() != plog.SeverityNumberError || got.SeverityText() != "critical" || f.Severity != "critical" {
		t.Errorf("severity %v %q; the API's %q", got.SeverityNumber(), got.SeverityText(), f.Severity)
	}
	if got.Body().Str() != f.Summary || f.Summary == "" {
		t.Errorf("body %q, the API's summary %q", got.Body().Str(), f.Summary)
	}
	if got.EventName() != "sysray.finding" || !got.Timestamp().AsTime().Equal(f.FirstSeen) {
		t.Errorf("event name %q, time %v; first seen %v", got.EventName(), got.Timestamp().AsTime(), f.FirstSeen)
	}
	want := map[string]string{"sysray.finding.id": f.ID, "sysray.finding.key": f.Key, "sysray.finding.title": f.Title,
		"sysray.finding.fix": f.Fix, "process.pid": strconv.Itoa(pid), "process.executable.name": "segv"}
	for k, v := range want {
		if s := str(at, k); s != v {
			t.Errorf("%s = %q, want %q", k, s, v)
		}
	}
	// A process on the host: no container.
	for _, k := range []string{"container.id", "container.name", "k8s.pod.name"} {
		if _, ok := at.Get(k); ok {
			t.Errorf("%s on a host process's record: %s", k, str(at, k))
		}
	}
	// Every number of the evidence, exact (as the JSON spells it), and its
	// strings.
	nums := 0
	for k, raw := range f.Evidence {
		v, ok := at.Get("sysray.evidence." + k)
		var s string
		switch {
		case json.Unmarshal(raw, &s) == nil:
			if !ok || v.Type() != pcommon.ValueTypeStr || v.Str() != s {
				t.Errorf("evidence %s: %s, want %s", k, v.AsString(), raw)
			}
		case raw[0] >= '0' && raw[0] <= '9' || raw[0] == '-':
			nums++
			if !ok || (v.Type() != pcommon.ValueTypeInt && v.Type() != pcommon.ValueTypeDouble) || v.AsString() != string(raw) {
				t.Errorf("evidence %s: %v (%s), want %s", k, v.AsString(), v.Type(), raw)
			}
		}
	}
	if nums < 3 || str(at, "sysray.evidence.pid") != strconv.Itoa(pid) || str(at, "sysray.evidence.exit_status") != "139" {
		t.Errorf("evidence: %d numbers, pid %s, exit_status %s; the API's: %v", nums, str(at, "sysray.evidence.pid"),
			str(at, "sysray.evidence.exit_status"), f.Evidence)
	}
	host, _ := os.Hostname()
	if str(got.res, "host.name") != host || str(got.res, "service.name") != "sysray-agent" {
		t.Errorf("resource: %v", got.res.AsRaw())
	}

	// The same crash again: the store's finding seen twice, and still one
	// record of it.
	pid2 := crash(t, segv)
	twice := false
	for i := 0; i < 100 && !twice; i++ {
		time.Sleep(200 * time.Millisecond)
		for _, x := range a.findings(t) {
			twice = twice || x.StoreKey == f.StoreKey && x.Occurrences >= 2
		}
	}
	if !twice {
		t.Fatalf("the second crash (%d) is not the first finding seen again: %+v", pid2, a.findings(t))
	}

	// The same crash as the first process of a new container (a
	// Docker-style cgroup scope, named by its id while no runtime
	// answers): the same doctor key, another store key, so a record of its
	// own, with the container's id and name.
	id := fmt.Sprintf("c7%014x", time.Now().UnixNano()&(1<<56-1)) + strings.Repeat("6b", 24)
	dir := filepath.Join(cgroup2(t), "sysray-otlp-test", "docker-"+id+".scope")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("creating cgroup: %v", err)
	}
	t.Cleanup(func() {
		// segv and its child have exited: the scope is empty.
		if err := errors.Join(os.Remove(dir), os.Remove(filepath.Dir(dir))); err != nil {
			t.Errorf("removing the test's cgroup: %v", err)
		}
	})
	script := fmt.Sprintf("echo 0 > %s/cgroup.procs && exec %s", dir, segv)
	out, err := exec.Command("/bin/sh", "-c", script).Output()
	var pid3, signaled, sig int
	if _, serr := fmt.Sscanf(string(out), "child %d signaled=%d sig=%d", &pid3, &signaled, &sig); err != nil || serr != nil || sig != 11 {
		t.Fatalf("segv in %s: %v %v %q", dir, err, serr, out)
	}
	var inCtr *record
	for i := 0; i < 100 && inCtr == nil; i++ {
		time.Sleep(200 * time.Millisecond)
		for _, r := range records(sink) {
			if str(r.Attributes(), "process.pid") == strconv.Itoa(pid3) {
				inCtr = &r
			}
		}
	}
	if inCtr == nil {
		for _, r := range records(sink) {
			if str(r.Attributes(), "sysray.finding.id") == "fatal-signal" {
				t.Logf("record: %v", r.Attributes().AsRaw())
			}
		}
		for _, x := range a.findings(t) {
			if x.ID == "fatal-signal" {
				t.Logf("finding: %s %s %d", x.StoreKey, x.Title, x.Occurrences)
			}
		}
		t.Fatalf("no record for the crash in container %s (pid %d) after 20 s", id[:12], pid3)
	}
	ca := inCtr.Attributes()
	if str(ca, "container.id") != id || str(ca, "container.name") != id[:12] || str(ca, "sysray.finding.key") != f.Key ||
		str(ca, "sysray.finding.store_key") == f.StoreKey || str(ca, "sysray.finding.id") != "fatal-signal" {
		t.Errorf("the container's crash: %v; want container.id %s, name %s, key %s", ca.AsRaw(), id, id[:12], f.Key)
	}
	if _, ok := ca.Get("k8s.pod.name"); ok {
		t.Errorf("k8s.pod.name for a container no runtime knows: %v", ca.AsRaw())
	}

	time.Sleep(2 * time.Second) // a window or two for a record that should not come
	m, held := a.settled(t, func() int { return len(records(sink)) })
	perKey := map[string]int{}
	rs := records(sink)
	for _, r := range rs {
		perKey[str(r.Attributes(), "sysray.finding.store_key")]++
	}
	for k, n := range perKey {
		if n != 1 {
			t.Errorf("%d records of finding %q, want 1", n, k)
		}
	}
	// What the agent counted is what the receiver holds.
	if m["sysray_otlp_records_sent_total"] != float64(held) || m["sysray_otlp_export_errors_total"] != 0 ||
		m[`sysray_otlp_records_dropped_total{reason="queue_full"}`] != 0 || m[`sysray_otlp_records_dropped_total{reason="export_failed"}`] != 0 {
		t.Errorf("the receiver holds %d records; the agent says %v", held, m)
	}
	var ids []string
	for _, r := range rs {
		ids = append(ids, str(r.Attributes(), "sysray.finding.id")+"/"+r.SeverityText())
	}
	t.Logf("records: %d, of %d findings (%s); the crash's: pid %d, %d evidence numbers", len(rs), len(perKey), strings.Join(ids, " "), pid, nums)
	a.stop(t)
}

// A receiver that is not there holds nothing up: the finding is in the
// API as ever, the agent stays healthy, and the failed requests and the
// dropped record are counted.
func TestOTLPReceiverAway(t *testing.T) {
	requireBPF(t)
	t.Parallel()
	sysray, segv := build(t, "segv-away")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() // no path: /v1/logs is added
	ln.Close()
	a := startAgent(t, sysray, "--otlp-endpoint", url)
	pid := crash(t, segv)
	var found bool
	var m map[string]float64
	dropped := `sysray_otlp_records_dropped_total{reason="export_failed"}`
	// Three attempts, 2 s and 4 s apart.
	for i := 0; i < 100 && !(found && m[dropped] >= 1); i++ {
		time.Sleep(200 * time.Millisecond)
		for _, x := range a.findings(t) {
			found = found || x.ID == "fatal-signal" && strings.Contains(x.Title, fmt.Sprintf("%s[%d]", filepath.Base(segv), pid))
		}
		m = a.metrics(t, "sysray_otlp_")
	}
	if !found || m[dropped] < 1 || m["sysray_otlp_export_errors_total"] < 3 || m["sysray_otlp_records_sent_total"] != 0 {
		t.Errorf("crash found %v; the agent's counts %v", found, m)
	}
	resp, err := http.Get(a.base + "/api/health")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("health with the receiver away: %v %v", err, resp)
	}
	a.stop(t)
}
