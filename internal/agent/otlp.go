package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/version"
)

// OTLP sends each new finding to an OpenTelemetry collector as a log
// record, over OTLP/HTTP with protobuf bodies (docs/agent.md, "Findings
// over OTLP"). The doctor's window hands it records through Send, which
// never waits: a queue of otlpQueueLen records takes them, a goroutine posts
// them in batches, and what cannot be queued or sent is counted, logged
// and dropped.
type OTLP struct {
	url    string
	shown  string // url for the logs, without a password
	client *http.Client
	header http.Header // sent with every request: credentials, never logged
	log    *slog.Logger
	res    *resourcepb.Resource
	queue  chan *logspb.LogRecord
	done   chan struct{}
	// backoff between attempts at one batch: len(backoff)+1 attempts.
	backoff []time.Duration

	full atomic.Bool // the queue was full at the last Send

	mu      sync.Mutex
	sent    uint64
	errs    uint64
	dropped map[string]uint64 // by reason
}

// The queue's length: new findings are few (a busy host's first windows
// make one or two dozen, mostly info; after that they come when something
// changes), so a thousand outlasts a collector's restart even at the rate
// of an incident, in a few MiB at most.
const otlpQueueLen = 1000

// otlpBatch bounds one request: the collector's default request limit is
// far above a hundred records of a few KiB each.
const otlpBatch = 100

// OTLPEndpoint is the URL records are posted to: endpoint as given when
// it has a path, else endpoint with /v1/logs (as OTEL_EXPORTER_OTLP_ENDPOINT
// is read). http and https only.
func OTLPEndpoint(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", errors.New("want an http:// or https:// URL with a host, such as http://127.0.0.1:4318/v1/logs")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/logs"
	}
	return u.String(), nil
}

// ResourceAttrs are the records' resource: host.name hostname,
// service.name sysray-agent and the version, then what extra says, in the
// format of OTEL_RESOURCE_ATTRIBUTES (key=value pairs separated by commas,
// values percent-encoded), which wins: in a pod without the node's
// network the host's name is the pod's, and the chart passes the node's.
func ResourceAttrs(hostname, extra string) ([]*commonpb.KeyValue, error) {
	kv := []*commonpb.KeyValue{
		kvString("host.name", hostname),
		kvString("service.name", "sysray-agent"),
		kvString("service.version", version.Version),
	}
	for _, p := range strings.Split(extra, ",") {
		if strings.TrimSpace(p) == "" {
			continue
		}
		k, v, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q: want key=value", p)
		}
		v, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", p, err)
		}
		i := slices.IndexFunc(kv, func(x *commonpb.KeyValue) bool { return x.Key == k })
		if i < 0 {
			kv = append(kv, kvString(k, v))
		} else {
			kv[i] = kvString(k, v)
		}
	}
	return kv, nil
}

// NewOTLP returns an exporter posting to endpoint (see OTLPEndpoint) with
// resource res (ResourceAttrs), the headers and TLS settings of auth and
// the environment (OTLPAuth.resolve). Start it with Run.
func NewOTLP(endpoint string, auth OTLPAuth, res []*commonpb.KeyValue, log *slog.Logger) (*OTLP, error) {
	u, err := OTLPEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	conn, err := auth.resolve(u, os.Getenv)
	if err != nil {
		return nil, err
	}
	pu, _ := url.Parse(u)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if conn.tls != nil {
		tr.TLSClientConfig = conn.tls
	}
	attrs := []any{"endpoint", pu.Redacted()}
	if len(conn.names) > 0 {
		attrs = append(attrs, "headers", conn.names, "headers_from", conn.from)
	}
	if conn.tls != nil {
		attrs = append(attrs, "tls_ca", conn.ca, "tls_client_cert", conn.cert)
	}
	log.Info("sending findings over OTLP", attrs...)
	return &OTLP{url: u, shown: pu.Redacted(), log: log, header: conn.header, queue: make(chan *logspb.LogRecord, otlpQueueLen), done: make(chan struct{}),
		// A collector's deadline is seconds; a request that takes longer
		// than this is not coming back.
		client: &http.Client{Timeout: 10 * time.Second, Transport: tr,
			// A redirect is an error, not followed: it could take the
			// headers (a vendor's key in a header of its own, which Go
			// forwards to any host) elsewhere, or an https endpoint's
			// records to http.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		// Three attempts over some 6 s: long enough for a collector's
		// restart or a dropped connection, short enough that one batch
		// does not hold the queue for long.
		backoff: []time.Duration{2 * time.Second, 4 * time.Second},
		res:     &resourcepb.Resource{Attributes: res},
		dropped: map[string]uint64{}}, nil
}

// Send queues r, or counts it dropped when the queue is full. It never
// waits.
func (o *OTLP) Send(r *logspb.LogRecord) {
	select {
	case o.queue <- r:
		o.full.Store(false)
	default:
		o.drop("queue_full", 1)
		// Once for each time it fills: the counter has the rest.
		if !o.full.Swap(true) {
			o.log.Warn("OTLP queue full: dropping findings' log records until it has room", "queue", otlpQueueLen)
		}
	}
}

// Run posts queued records until ctx ends, then makes one last attempt at
// what is queued, within a few seconds, and returns.
func (o *OTLP) Run(ctx context.Context) {
	defer close(o.done)
	for {
		select {
		case <-ctx.Done():
			o.flush(nil)
			return
		case first := <-o.queue:
			if b := o.export(ctx, o.batch(first)); b != nil {
				o.flush(b)
				return
			}
		}
	}
}

// Done is closed when Run has returned.
func (o *OTLP) Done() <-chan struct{} { return o.done }

// batch is first and what else is queued, up to otlpBatch records.
func (o *OTLP) batch(first *logspb.LogRecord) []*logspb.LogRecord {
	return o.fill([]*logspb.LogRecord{first})
}

// fill adds what is queued to b, up to otlpBatch records.
func (o *OTLP) fill(b []*logspb.LogRecord) []*logspb.LogRecord {
	for len(b) < otlpBatch {
		select {
		case r := <-o.queue:
			b = append(b, r)
		default:
			return b
		}
	}
	return b
}

// flush posts b and what is queued once, with a short deadline: the
// agent is stopping.
func (o *OTLP) flush(b []*logspb.LogRecord) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for {
		if b = o.fill(b); len(b) == 0 {
			return
		}
		if o.post(ctx, b) {
			o.drop("export_failed", len(b))
		}
		b = nil
	}
}

// export posts b, again after a backoff while the failure may pass (the
// collector unreachable, overloaded or restarting), and drops it after
// the last attempt or a refusal that would not change. It returns b if
// ctx ended before b was through, for flush's last attempt.
func (o *OTLP) export(ctx context.Context, b []*logspb.LogRecord) []*logspb.LogRecord {
	for i := 0; ; i++ {
		if !o.post(ctx, b) {
			return nil
		}
		if ctx.Err() != nil {
			return b
		}
		if i == len(o.backoff) {
			o.drop("export_failed", len(b))
			return nil
		}
		select {
		case <-ctx.Done():
			return b
		case <-time.After(o.backoff[i]):
		}
	}
}

// post sends b once. It counts and logs what went wrong, and says whether
// another attempt may go better.
func (o *OTLP) post(ctx context.Context, b []*logspb.LogRecord) (retry bool) {
	// LogsData is ExportLogsServiceRequest on the wire (field 1, repeated
	// ResourceLogs, in both): the collector service's package would link
	// in gRPC gateway code the agent does not use.
	body, err := proto.Marshal(&logspb.LogsData{ResourceLogs: []*logspb.ResourceLogs{{
		Resource: o.res,
		ScopeLogs: []*logspb.ScopeLogs{{
			Scope:      &commonpb.InstrumentationScope{Name: "github.com/sysray/sysray/internal/agent", Version: version.Version},
			LogRecords: b,
		}},
	}}})
	if err != nil {
		o.fail("encoding", err)
		o.drop("export_failed", len(b))
		return false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url, bytes.NewReader(body))
	if err != nil {
		o.fail("request", err)
		o.drop("export_failed", len(b))
		return false
	}
	for k, v := range o.header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "sysray-agent/"+version.Version)
	}
	resp, err := o.client.Do(req)
	if err != nil {
		if !errors.Is(err, context.Canceled) { // not the agent stopping
			o.fail("post", err)
		}
		return true
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusOK:
		rejected, msg := partialSuccess(rb)
		o.mu.Lock()
		o.sent += uint64(len(b)) - uint64(min(rejected, int64(len(b))))
		o.mu.Unlock()
		if rejected > 0 {
			o.drop("rejected", int(min(rejected, int64(len(b)))))
			o.log.Warn("the OTLP receiver rejected findings' log records", "rejected", rejected, "message", msg)
		}
		return false
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusBadGateway ||
		resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout:
		// The codes OTLP/HTTP says to retry.
		o.fail("post", fmt.Errorf("%s", resp.Status))
		return true
	default:
		o.fail("post", fmt.Errorf("%s: %.200s", resp.Status, rb))
		o.drop("export_failed", len(b))
		return false
	}
}

// partialSuccess reads ExportLogsServiceResponse's partial_success (field
// 1: rejected_log_records, 1; error_message, 2). A body it cannot read
// says nothing was rejected: the status said the request was taken.
func partialSuccess(b []byte) (rejected int64, msg string) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, ""
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return 0, ""
			}
			b = b[n:]
			continue
		}
		ps, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, ""
		}
		b = b[n:]
		for len(ps) > 0 {
			num, typ, n := protowire.ConsumeTag(ps)
			if n < 0 {
				return rejected, msg
			}
			ps = ps[n:]
			switch {
			case num == 1 && typ == protowire.VarintType:
				v, m := protowire.ConsumeVarint(ps)
				if m < 0 {
					return rejected, msg
				}
				rejected, n = int64(v), m
			case num == 2 && typ == protowire.BytesType:
				v, m := protowire.ConsumeBytes(ps)
				if m < 0 {
					return rejected, msg
				}
				msg, n = string(v), m
			default:
				n = protowire.ConsumeFieldValue(num, typ, ps)
				if n < 0 {
					return rejected, msg
				}
			}
			ps = ps[n:]
		}
	}
	return rejected, msg
}

func (o *OTLP) fail(what string, err error) {
	o.mu.Lock()
	o.errs++
	o.mu.Unlock()
	o.log.Warn("sending findings over OTLP failed", "endpoint", o.shown, "step", what, "error", err.Error())
}

func (o *OTLP) drop(reason string, n int) {
	o.mu.Lock()
	o.dropped[reason] += uint64(n)
	o.mu.Unlock()
}

var (
	descOTLPSent = prometheus.NewDesc("sysray_otlp_records_sent_total",
		"Findings' log records the OTLP receiver accepted.", nil, nil)
	descOTLPErrors = prometheus.NewDesc("sysray_otlp_export_errors_total",
		"Requests to the OTLP receiver that failed: not sent, refused, or answered with an error status.", nil, nil)
	descOTLPDropped = prometheus.NewDesc("sysray_otlp_records_dropped_total",
		"Findings' log records never delivered, by reason: queue_full (the queue was full), export_failed (the last attempt failed, or the receiver refused the request), rejected (the receiver said it rejected them).",
		[]string{"reason"}, nil)
)

// Describe implements prometheus.Collector.
func (o *OTLP) Describe(ch chan<- *prometheus.Desc) {
	ch <- descOTLPSent
	ch <- descOTLPErrors
	ch <- descOTLPDropped
}

// Collect implements prometheus.Collector. Every reason has a series from
// the start, so a rate over it needs no absent().
func (o *OTLP) Collect(ch chan<- prometheus.Metric) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descOTLPSent, prometheus.CounterValue, float64(o.sent))
	ch <- prometheus.MustNewConstMetric(descOTLPErrors, prometheus.CounterValue, float64(o.errs))
	for _, r := range []string{"queue_full", "export_failed", "rejected"} {
		ch <- prometheus.MustNewConstMetric(descOTLPDropped, prometheus.CounterValue, float64(o.dropped[r]), r)
	}
}

// FindingProc is what a finding's log record says of one of its
// processes.
type FindingProc struct {
	PID         uint32
	Comm        string // the kernel's name of it; "" when unknown
	ContainerID string // "" on the host
	Labels             // its container's, Host on the host
}

// otlpMaxProcs bounds the processes a record lists: a finding about a
// thousand forks needs not list each.
const otlpMaxProcs = 20

// FindingRecord is f, found first at f.FirstSeen, as an OTLP log record:
// severity, the summary as body, and attributes naming the finding, its
// containers and processes, its syscalls and its evidence
// (docs/agent.md lists them). procs are its processes, described, the
// first otlpMaxProcs of nprocs.
func FindingRecord(f *Finding, procs []FindingProc, nprocs int, now time.Time) *logspb.LogRecord {
	r := &logspb.LogRecord{
		TimeUnixNano:         uint64(f.FirstSeen.UnixNano()),
		ObservedTimeUnixNano: uint64(now.UnixNano()),
		SeverityNumber:       otlpSeverity(f.Severity),
		SeverityText:         f.Severity.String(),
		EventName:            "sysray.finding",
		Body:                 &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: f.Summary}},
	}
	a := []*commonpb.KeyValue{
		kvString("sysray.finding.id", string(f.ID)),
		kvString("sysray.finding.key", f.Finding.Key),
		kvString("sysray.finding.store_key", f.Key),
		kvString("sysray.finding.title", f.Title),
	}
	if f.Fix != "" {
		a = append(a, kvString("sysray.finding.fix", f.Fix))
	}
	// The first process in a container names the record's container (the
	// semantic conventions' one container per record); a finding across
	// containers lists them all in sysray.containers.
	var ctr *FindingProc
	var ctrs []string
	seen := map[Labels]bool{}
	for i := range procs {
		p := &procs[i]
		if p.ContainerID == "" {
			continue
		}
		if ctr == nil {
			ctr = p
		}
		if !seen[p.Labels] {
			seen[p.Labels] = true
			ctrs = append(ctrs, p.Container)
		}
	}
	if ctr != nil {
		a = append(a, kvString("container.id", ctr.ContainerID), kvString("container.name", ctr.Container))
		if ctr.Pod != "" {
			a = append(a, kvString("k8s.pod.name", ctr.Pod), kvString("k8s.namespace.name", ctr.Namespace))
		}
		if len(ctrs) > 1 {
			a = append(a, kvStrings("sysray.containers", ctrs))
		}
	}
	if len(procs) > 0 {
		a = append(a, kvInt("process.pid", int64(procs[0].PID)))
		if procs[0].Comm != "" {
			a = append(a, kvString("process.executable.name", procs[0].Comm))
		}
	}
	if nprocs > 1 {
		var pids []*commonpb.AnyValue
		var comms []string
		for _, p := range procs[:min(len(procs), otlpMaxProcs)] {
			pids = append(pids, &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: int64(p.PID)}})
			comms = append(comms, p.Comm)
		}
		a = append(a, &commonpb.KeyValue{Key: "sysray.process.pids", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: pids}}}},
			kvStrings("sysray.process.comms", comms), kvInt("sysray.process.count", int64(nprocs)))
	}
	if len(f.Syscalls) > 0 {
		a = append(a, kvStrings("sysray.syscalls", f.Syscalls))
	}
	names := make([]string, 0, len(f.Evidence))
	for k := range f.Evidence {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if v := anyValue(f.Evidence[k]); v != nil {
			a = append(a, &commonpb.KeyValue{Key: "sysray.evidence." + k, Value: v})
		}
	}
	r.Attributes = a
	return r
}

// otlpSeverity maps the doctor's severities onto OpenTelemetry's. A
// critical finding is ERROR, not FATAL: FATAL is the emitting program's
// own end, and the agent goes on; a critical finding is another program's
// error that needs a person now, which is what ERROR and above alert on.
func otlpSeverity(s doctor.Severity) logspb.SeverityNumber {
	switch s {
	case doctor.Critical:
		return logspb.SeverityNumber_SEVERITY_NUMBER_ERROR
	case doctor.Warning:
		return logspb.SeverityNumber_SEVERITY_NUMBER_WARN
	default:
		return logspb.SeverityNumber_SEVERITY_NUMBER_INFO
	}
}

// anyValue is an evidence value as an attribute value: numbers, booleans,
// strings, and lists of them; nil for what is none of these (a nested
// table), which the finding's JSON in /api/findings still has.
func anyValue(v any) *commonpb.AnyValue {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: rv.Int()}}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := rv.Uint()
		if u > math.MaxInt64 {
			// OTLP's integers are signed: the decimal digits keep it exact.
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: strconv.FormatUint(u, 10)}}
		}
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: int64(u)}}
	case reflect.Float32, reflect.Float64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: rv.Float()}}
	case reflect.Bool:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: rv.Bool()}}
	case reflect.String:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: rv.String()}}
	case reflect.Slice, reflect.Array:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			return nil // bytes: not evidence a person reads
		}
		vals := make([]*commonpb.AnyValue, 0, rv.Len())
		for i := 0; i < rv.Len(); i++ {
			e := anyValue(rv.Index(i).Interface())
			if e == nil || e.GetArrayValue() != nil {
				return nil
			}
			vals = append(vals, e)
		}
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}}}
	}
	return nil
}

func kvString(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func kvInt(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}

func kvStrings(k string, v []string) *commonpb.KeyValue {
	vals := make([]*commonpb.AnyValue, len(v))
	for i, s := range v {
		vals[i] = &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
	}
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}}}}
}
