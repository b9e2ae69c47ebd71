package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/sysray/sysray/internal/version"
)

// Agent reads a Source every Interval into an Aggregator and serves it.
// Make one with NewAgent.
type Agent struct {
	Agg      *Aggregator
	Src      Source
	Interval time.Duration
	Log      *slog.Logger
	// Findings, if set, is served at /api/findings and in /metrics.
	Findings *Findings
	// Captures, if set, serves the flight recorder's captures and takes
	// snapshots on request.
	Captures Captures
	// Collectors are served in /metrics with the agent's own.
	Collectors []prometheus.Collector

	start    time.Time
	mu       sync.Mutex
	reads    uint64
	failures uint64
	lastErr  string
	lastOK   time.Time
}

// NewAgent returns an Agent that has not read yet.
func NewAgent(agg *Aggregator, src Source, interval time.Duration, log *slog.Logger) *Agent {
	return &Agent{Agg: agg, Src: src, Interval: interval, Log: log, start: time.Now()}
}

// Run reads at once and then every Interval until ctx ends.
func (a *Agent) Run(ctx context.Context) {
	t := time.NewTicker(a.Interval)
	defer t.Stop()
	for {
		a.ReadOnce()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ReadOnce reads the Source and folds what it says.
func (a *Agent) ReadOnce() {
	s, err := a.Src.Read()
	now := time.Now()
	a.mu.Lock()
	a.reads++
	if err != nil {
		a.failures++
		a.lastErr = err.Error()
		a.mu.Unlock()
		a.Log.Warn("reading the kernel's counts failed", "error", err.Error())
		return
	}
	a.lastOK = now
	a.mu.Unlock()
	a.Agg.Fold(now, s)
}

// Health is the body of GET /api/health.
type Health struct {
	Status            string  `json:"status"` // ok, starting or stale
	UptimeSeconds     float64 `json:"uptime_seconds"`
	LastReadAgeSecs   float64 `json:"last_read_age_seconds,omitempty"`
	Reads             uint64  `json:"reads"`
	ReadFailures      uint64  `json:"read_failures"`
	LastError         string  `json:"last_error,omitempty"`
	SyscallSeries     int     `json:"syscall_series"`
	Containers        int     `json:"containers"`
	KernelCells       int     `json:"kernel_cells"`
	EventsDropped     uint64  `json:"events_dropped"`
	SyscallsUncounted uint64  `json:"syscalls_uncounted"`
}

func (a *Agent) health() (Health, int) {
	a.mu.Lock()
	h := Health{Status: "ok", Reads: a.reads, ReadFailures: a.failures, LastError: a.lastErr,
		UptimeSeconds: time.Since(a.start).Seconds()}
	last := a.lastOK
	a.mu.Unlock()
	v := a.Agg.View()
	h.SyscallSeries, h.Containers, h.KernelCells = len(v.Syscalls), len(v.Containers), v.Cells
	h.EventsDropped, h.SyscallsUncounted = v.RingDrops, v.Lost.Total()+v.InFlight
	code := http.StatusOK
	switch {
	case last.IsZero():
		h.Status, code = "starting", http.StatusServiceUnavailable
	case time.Since(last) > 3*a.Interval:
		h.Status, code = "stale", http.StatusServiceUnavailable
	}
	if !last.IsZero() {
		h.LastReadAgeSecs = time.Since(last).Seconds()
	}
	return h, code
}

// Handler serves /metrics (the agent's series, Go runtime and process
// collectors), /api/health and /healthz, and with Findings and Captures
// set /api/findings, /api/captures[/NAME] and POST /api/snapshot, to
// anyone who reaches it: for a private listener.
func (a *Agent) Handler() http.Handler {
	return a.handler(func(h http.Handler) http.Handler { return h })
}

// handler is Handler with guard in front of the API (web.go).
func (a *Agent) handler(guard func(http.Handler) http.Handler) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.Agg, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo())
	if a.Findings != nil {
		reg.MustRegister(a.Findings)
	}
	reg.MustRegister(a.Collectors...)
	mux := http.NewServeMux()
	a.api(mux, guard)
	opts := promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(a.Log.Handler(), slog.LevelWarn)}
	classic := promhttp.HandlerFor(reg, opts)
	native := prometheus.NewRegistry()
	native.MustRegister(nativeCollector{a.Agg})
	withNative := promhttp.HandlerFor(prometheus.Gatherers{reg, native}, opts)
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		// promhttp negotiates the same way (OpenMetrics off), so the
		// format chosen here is the one it writes.
		switch expfmt.Negotiate(r.Header).FormatType() {
		case expfmt.TypeProtoDelim, expfmt.TypeProtoText, expfmt.TypeProtoCompact:
			withNative.ServeHTTP(w, r)
		default:
			classic.ServeHTTP(w, r)
		}
	})
	mux.HandleFunc("GET /api/health", func(w http.ResponseWriter, r *http.Request) {
		h, code := a.health()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(h)
	})
	// The same verdict in one word, for probes that only read the status.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		h, code := a.health()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(code)
		io.WriteString(w, h.Status+"\n")
	})
	return mux
}

// buildInfo is sysray_build_info, 1, with the build's version in its labels,
// as Prometheus's own exporters say theirs: a query can join it to any
// series to ask which agents run which build.
func buildInfo() prometheus.Collector {
	in := version.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sysray_build_info",
		Help:        "Which sysray this agent is: version, git revision and Go toolchain; always 1.",
		ConstLabels: prometheus.Labels{"version": in.Version, "revision": in.Revision, "goversion": in.Go}})
	g.Set(1)
	return g
}
