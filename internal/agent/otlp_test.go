package agent

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sysray/sysray/internal/doctor"
)

// New is told of each finding once per key: the same finding window after
// window, worded with other numbers, or risen in severity, is not new; the
// same key in another container is.
func TestFindingsNewOncePerKey(t *testing.T) {
	type call struct {
		key  string
		pids []uint32
	}
	var calls []call
	s := NewFindings(FindingsOptions{ActiveFor: 30 * time.Second, Forget: time.Hour, Name: testNamer, MaxContainers: 10,
		New: func(f *Finding, procs []doctor.ProcRef) {
			c := call{key: f.Key}
			for _, p := range procs {
				c.pids = append(c.pids, p.PID)
			}
			if f.Occurrences != 1 || f.FirstSeen.IsZero() {
				t.Errorf("new finding %s: occurrences %d, first seen %v", f.Key, f.Occurrences, f.FirstSeen)
			}
			calls = append(calls, c)
		}})
	t0 := time.Unix(1_700_000_000, 0)
	s.Merge([]doctor.Finding{finding("slow-syscall", doctor.Info, "3 slow write", 101)}, t0)
	s.Merge([]doctor.Finding{finding("slow-syscall", doctor.Warning, "7 slow write", 102)}, t0.Add(10*time.Second))
	s.Merge([]doctor.Finding{finding("slow-syscall", doctor.Info, "2 slow write", 201),
		finding("slow-syscall", doctor.Info, "2 slow write", 103)}, t0.Add(20*time.Second))
	want := []call{{"slow-syscall:# slow write|shop/web-1/web", []uint32{101}}, {"slow-syscall:# slow write|//db", []uint32{201}}}
	if len(calls) != len(want) {
		t.Fatalf("calls %+v, want %+v", calls, want)
	}
	for i := range want {
		if calls[i].key != want[i].key || len(calls[i].pids) != 1 || calls[i].pids[0] != want[i].pids[0] {
			t.Errorf("call %d: %+v, want %+v", i, calls[i], want[i])
		}
	}
}

func attrs(kvs []*commonpb.KeyValue) map[string]*commonpb.AnyValue {
	m := map[string]*commonpb.AnyValue{}
	for _, kv := range kvs {
		if _, dup := m[kv.Key]; dup {
			panic("attribute twice: " + kv.Key)
		}
		m[kv.Key] = kv.Value
	}
	return m
}

func TestFindingRecord(t *testing.T) {
	first := time.Unix(1_700_000_000, 5)
	f := &Finding{Finding: doctor.Finding{ID: "fatal-signal", Severity: doctor.Critical, Title: "segv[7] was killed by SIGSEGV",
		Summary: "segv[7] was killed by SIGSEGV after a write at 0x10.", Fix: "Look at the code.", Key: "fatal-signal:segv",
		Syscalls: []string{"write", "exit"},
		Evidence: map[string]any{"pid": uint32(7), "cgroup": uint64(1<<63 + 1), "exit_status": 139, "ratio": 0.25,
			"core_dumped": false, "signal": "SIGSEGV", "last_syscalls": []string{"write(1) = 3"},
			"nested": map[string]int{"a": 1}, "dur": 3 * time.Millisecond}},
		Key: "fatal-signal:segv|shop/web-1/web", FirstSeen: first}
	procs := []FindingProc{{PID: 7, Comm: "segv", ContainerID: "abc123", Labels: Labels{Container: "web", Pod: "web-1", Namespace: "shop"}},
		{PID: 8, Comm: "helper", Labels: Host}, {PID: 9, Comm: "db", ContainerID: "def", Labels: Labels{Container: "db"}}}
	r := FindingRecord(f, procs, 30, first.Add(time.Second))
	if r.SeverityNumber != logspb.SeverityNumber_SEVERITY_NUMBER_ERROR || r.SeverityText != "critical" ||
		r.TimeUnixNano != uint64(first.UnixNano()) || r.ObservedTimeUnixNano != uint64(first.Add(time.Second).UnixNano()) ||
		r.Body.GetStringValue() != f.Summary || r.EventName != "sysray.finding" {
		t.Errorf("record: %v", r)
	}
	a := attrs(r.Attributes)
	str := map[string]string{"sysray.finding.id": "fatal-signal", "sysray.finding.key": "fatal-signal:segv",
		"sysray.finding.store_key": "fatal-signal:segv|shop/web-1/web", "sysray.finding.title": f.Title, "sysray.finding.fix": "Look at the code.",
		"container.id": "abc123", "container.name": "web", "k8s.pod.name": "web-1", "k8s.namespace.name": "shop",
		"process.executable.name": "segv", "sysray.evidence.signal": "SIGSEGV",
		// Past int64: the digits.
		"sysray.evidence.cgroup": "9223372036854775809"}
	for k, v := range str {
		if got := a[k].GetStringValue(); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	ints := map[string]int64{"process.pid": 7, "sysray.evidence.pid": 7, "sysray.evidence.exit_status": 139,
		"sysray.evidence.dur": 3e6, "sysray.process.count": 30}
	for k, v := range ints {
		if x, ok := a[k].GetValue().(*commonpb.AnyValue_IntValue); !ok || x.IntValue != v {
			t.Errorf("%s = %v, want int %d", k, a[k], v)
		}
	}
	if a["sysray.evidence.ratio"].GetDoubleValue() != 0.25 {
		t.Errorf("ratio: %v", a["sysray.evidence.ratio"])
	}
	if x, ok := a["sysray.evidence.core_dumped"].GetValue().(*commonpb.AnyValue_BoolValue); !ok || x.BoolValue {
		t.Errorf("core_dumped: %v", a["sysray.evidence.core_dumped"])
	}
	if _, ok := a["sysray.evidence.nested"]; ok {
		t.Errorf("a nested table became an attribute: %v", a["sysray.evidence.nested"])
	}
	list := func(k string) []string {
		var out []string
		for _, v := range a[k].GetArrayValue().GetValues() {
			if s, ok := v.GetValue().(*commonpb.AnyValue_StringValue); ok {
				out = append(out, s.StringValue)
			} else {
				out = append(out, "#"+v.String())
			}
		}
		return out
	}
	for k, want := range map[string]string{"sysray.syscalls": "write,exit", "sysray.evidence.last_syscalls": "write(1) = 3",
		"sysray.process.comms": "segv,helper,db", "sysray.containers": "web,db"} {
		if got := strings.Join(list(k), ","); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if p := a["sysray.process.pids"].GetArrayValue().GetValues(); len(p) != 3 || p[2].GetIntValue() != 9 {
		t.Errorf("pids: %v", p)
	}

	// On the host, alone: no container attributes, no lists.
	f.Severity = doctor.Warning
	r = FindingRecord(f, []FindingProc{{PID: 8, Comm: "helper", Labels: Host}}, 1, first)
	a = attrs(r.Attributes)
	for _, k := range []string{"container.id", "container.name", "k8s.pod.name", "sysray.containers", "sysray.process.pids", "sysray.process.count"} {
		if _, ok := a[k]; ok {
			t.Errorf("%s on a host finding of one process: %v", k, a[k])
		}
	}
	if r.SeverityNumber != logspb.SeverityNumber_SEVERITY_NUMBER_WARN || otlpSeverity(doctor.Info) != logspb.SeverityNumber_SEVERITY_NUMBER_INFO {
		t.Errorf("severities: %v %v", r.SeverityNumber, otlpSeverity(doctor.Info))
	}
}

func TestOTLPEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4318":            "http://127.0.0.1:4318/v1/logs",
		"http://127.0.0.1:4318/":           "http://127.0.0.1:4318/v1/logs",
		"https://otel.example:4318/custom": "https://otel.example:4318/custom",
		"127.0.0.1:4318":                   "",
		"grpc://x:4317":                    "",
		"http:///v1/logs":                  "",
	} {
		got, err := OTLPEndpoint(in)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("OTLPEndpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// receiver is an OTLP/HTTP endpoint that answers each request with the
// status codes in order (200 once they run out) and keeps the records of
// the requests it answered 200.
type receiver struct {
	mu       sync.Mutex
	codes    []int
	requests int
	records  []*logspb.LogRecord
	res      [][]*commonpb.KeyValue
	reject   int64
	block    chan struct{}
	blocked  atomic.Int32 // requests held at block
	header   http.Header  // the last request's
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rc.block != nil {
		rc.blocked.Add(1)
		<-rc.block
	}
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.requests++
	rc.header = r.Header.Clone()
	if r.URL.Path != "/v1/logs" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		w.WriteHeader(http.StatusUnsupportedMediaType)
		return
	}
	if len(rc.codes) > 0 {
		c := rc.codes[0]
		rc.codes = rc.codes[1:]
		if c != 200 {
			w.WriteHeader(c)
			return
		}
	}
	var d logspb.LogsData
	if err := proto.Unmarshal(b, &d); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	for _, rl := range d.ResourceLogs {
		rc.res = append(rc.res, rl.Resource.Attributes)
		for _, sl := range rl.ScopeLogs {
			rc.records = append(rc.records, sl.LogRecords...)
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	if rc.reject > 0 {
		// ExportLogsServiceResponse{partial_success: {rejected_log_records, error_message}}
		var ps []byte
		ps = protowire.AppendTag(ps, 1, protowire.VarintType)
		ps = protowire.AppendVarint(ps, uint64(rc.reject))
		ps = protowire.AppendTag(ps, 2, protowire.BytesType)
		ps = protowire.AppendString(ps, "too old")
		var out []byte
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendBytes(out, ps)
		w.Write(out)
	}
}

func (rc *receiver) got() (int, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.requests, len(rc.records)
}

func record(i int) *logspb.LogRecord {
	return &logspb.LogRecord{SeverityNumber: logspb.SeverityNumber_SEVERITY_NUMBER_WARN,
		Attributes: []*commonpb.KeyValue{kvInt("i", int64(i))}}
}

func newTestOTLP(t *testing.T, url string) (*OTLP, context.CancelFunc) {
	t.Helper()
	res, err := ResourceAttrs("node-1", "")
	if err != nil {
		t.Fatal(err)
	}
	o, err := NewOTLP(url, OTLPAuth{}, res, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	o.backoff = []time.Duration{10 * time.Millisecond, 10 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	go o.Run(ctx)
	t.Cleanup(func() { cancel(); <-o.Done() })
	return o, cancel
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for i := 0; i < 500 && !ok(); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if !ok() {
		t.Fatalf("after 5 s, still not: %s", what)
	}
}

const otlpMetrics = "sysray_otlp_records_sent_total sysray_otlp_export_errors_total sysray_otlp_records_dropped_total"

// Records arrive with the resource; a 503 is tried again and counted; a
// 400 is not tried again, and its records are dropped; a receiver's
// partial success counts the records it rejected.
func TestOTLPExport(t *testing.T) {
	rc := &receiver{codes: []int{503, 200, 400}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	o, _ := newTestOTLP(t, srv.URL)

	o.Send(record(1))
	waitFor(t, "one record after a 503", func() bool { _, n := rc.got(); return n == 1 })
	o.Send(record(2)) // 400
	waitFor(t, "the 400", func() bool { r, _ := rc.got(); return r == 3 })
	rc.mu.Lock()
	rc.reject = 1
	rc.mu.Unlock()
	o.Send(record(3))
	waitFor(t, "the partial success", func() bool { _, n := rc.got(); return n == 2 })
	waitFor(t, "the counts", func() bool {
		return testutil.CollectAndCount(o) == 5 && value(o, "sysray_otlp_records_sent_total", "") == 1
	})
	want := `
# HELP sysray_otlp_export_errors_total Requests to the OTLP receiver that failed: not sent, refused, or answered with an error status.
# TYPE sysray_otlp_export_errors_total counter
sysray_otlp_export_errors_total 2
# HELP sysray_otlp_records_dropped_total Findings' log records never delivered, by reason: queue_full (the queue was full), export_failed (the last attempt failed, or the receiver refused the request), rejected (the receiver said it rejected them).
# TYPE sysray_otlp_records_dropped_total counter
sysray_otlp_records_dropped_total{reason="export_failed"} 1
sysray_otlp_records_dropped_total{reason="queue_full"} 0
sysray_otlp_records_dropped_total{reason="rejected"} 1
# HELP sysray_otlp_records_sent_total Findings' log records the OTLP receiver accepted.
# TYPE sysray_otlp_records_sent_total counter
sysray_otlp_records_sent_total 1
`
	if err := testutil.CollectAndCompare(o, strings.NewReader(want), strings.Fields(otlpMetrics)...); err != nil {
		t.Error(err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.records[0].Attributes[0].Value.GetIntValue() != 1 || rc.records[1].Attributes[0].Value.GetIntValue() != 3 {
		t.Errorf("records: %v", rc.records)
	}
	a := attrs(rc.res[0])
	if a["host.name"].GetStringValue() != "node-1" || a["service.name"].GetStringValue() != "sysray-agent" {
		t.Errorf("resource: %v", rc.res[0])
	}
}

// value is o's series name, with reason="reason" if reason is set.
func value(o *OTLP, name, reason string) float64 {
	reg := prometheus.NewRegistry()
	reg.MustRegister(o)
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			if reason == "" || len(m.Label) == 1 && m.Label[0].GetValue() == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// A receiver that does not answer holds no one up: Send returns at once,
// the queue takes otlpQueueLen records while one batch is out, and the
// rest are counted dropped. A receiver that is away is tried three times.
func TestOTLPNeverBlocks(t *testing.T) {
	rc := &receiver{block: make(chan struct{})}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	defer close(rc.block)
	o, _ := newTestOTLP(t, srv.URL)
	o.Send(record(0))
	// The first batch is out once the receiver holds its request: until
	// then the sender may still be filling the batch from the queue.
	waitFor(t, "the first batch out", func() bool { return rc.blocked.Load() == 1 })
	start := time.Now()
	n := otlpQueueLen + 50
	for i := range n {
		o.Send(record(i + 1))
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("%d sends took %s", n, d)
	}
	if got := value(o, "sysray_otlp_records_dropped_total", "queue_full"); got != 50 {
		t.Errorf("dropped: %v, want 50", got)
	}

	away := httptest.NewServer(http.NotFoundHandler())
	url := away.URL
	away.Close()
	o2, _ := newTestOTLP(t, url)
	o2.Send(record(1))
	waitFor(t, "three attempts, then a drop", func() bool {
		return value(o2, "sysray_otlp_export_errors_total", "") == 3 && value(o2, "sysray_otlp_records_dropped_total", "export_failed") == 1
	})
}

// OTEL_RESOURCE_ATTRIBUTES adds to the resource and wins over the
// agent's own attributes.
func TestResourceAttrs(t *testing.T) {
	kv, err := ResourceAttrs("sysray-agent-x7k2p", "host.name=node-3, k8s.node.name=node-3,deployment.environment=prod%2Ceu")
	if err != nil {
		t.Fatal(err)
	}
	a := attrs(kv)
	for k, want := range map[string]string{"host.name": "node-3", "k8s.node.name": "node-3", "service.name": "sysray-agent",
		"deployment.environment": "prod,eu"} {
		if got := a[k].GetStringValue(); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if len(kv) != 5 {
		t.Errorf("%d attributes: %v", len(kv), kv)
	}
	for _, bad := range []string{"host.name", "=x", "a=%zz"} {
		if _, err := ResourceAttrs("h", bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// An https endpoint is posted to over TLS (the test's client trusts the
// test server's certificate; the agent's trusts the system's CAs).
func TestOTLPHTTPS(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewTLSServer(rc)
	defer srv.Close()
	res, _ := ResourceAttrs("node-1", "")
	o, err := NewOTLP(srv.URL, OTLPAuth{}, res, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	o.client = srv.Client()
	ctx, cancel := context.WithCancel(context.Background())
	go o.Run(ctx)
	defer func() { cancel(); <-o.Done() }()
	o.Send(record(1))
	waitFor(t, "the record over TLS", func() bool { _, n := rc.got(); return n == 1 })
}

// Stopping while a batch waits to be tried again: the last attempt takes
// it with what is queued, and the stop is not counted as a failure.
func TestOTLPFlushOnStop(t *testing.T) {
	rc := &receiver{codes: []int{503}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	res, _ := ResourceAttrs("node-1", "")
	o, err := NewOTLP(srv.URL, OTLPAuth{}, res, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	o.backoff = []time.Duration{time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	go o.Run(ctx)
	o.Send(record(1))
	waitFor(t, "the 503", func() bool { r, _ := rc.got(); return r == 1 })
	o.Send(record(2))
	cancel()
	select {
	case <-o.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5 s of the stop")
	}
	if r, n := rc.got(); r != 2 || n != 2 {
		t.Errorf("%d requests, %d records: want the 503, then both records in one", r, n)
	}
	if e, d, s := value(o, "sysray_otlp_export_errors_total", ""), value(o, "sysray_otlp_records_dropped_total", "export_failed"),
		value(o, "sysray_otlp_records_sent_total", ""); e != 1 || d != 0 || s != 2 {
		t.Errorf("errors %v, dropped %v, sent %v: want 1, 0, 2", e, d, s)
	}
}
