package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/sysray/sysray/internal/checkup"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/session"
)

// Config is what `sysray agent` is told (docs/agent.md has each flag).
type Config struct {
	Listen        string        // address of /metrics and health (and the API if private or protected)
	APIListen     string        // address of the API; "" for Listen when that may carry it, else DefaultAPISocket
	WebConfig     string        // --web.config.file: TLS and authentication, as Prometheus exporters take them
	Interval      time.Duration // between reads of the kernel's counts
	MaxContainers int           // containers with series of their own
	MaxSyscalls   int           // syscalls with series of their own per container
	Grace         time.Duration // a container's series go after this long without a call
	ReloadCells   int           // reload the probe when its count table holds this many cells
	RingMiB       int           // event ring per CPU
	NoDoctor      bool          // counts only
	Exact         bool          // time every call with the clock (docs/stat.md)

	// Duty cycling: the per-syscall programs attached DutyOn in every
	// DutyPeriod, their counts scaled; Always: attached all the time.
	Always             bool
	DutyOn, DutyPeriod time.Duration

	Window       time.Duration // the doctor's (the duty period when duty cycling)
	Cooldown     time.Duration // between two captures of one finding and container
	CaptureDir   string        // "" for no flight captures
	CaptureBytes int64
	CaptureFiles int
	FlightWindow time.Duration // how far back a flight capture reaches
	FlightBytes  int64         // the flight recorder's memory

	OTLPEndpoint string   // "" for none: else each new finding goes there as an OTLP log record (otlp.go)
	OTLPAuth     OTLPAuth // its headers and TLS files (otlpauth.go)
}

// Defaults are the agent's settings unless told otherwise.
var Defaults = Config{
	Listen: "127.0.0.1:9437", Interval: 5 * time.Second, MaxContainers: 20, MaxSyscalls: 10,
	Grace: 5 * time.Minute, ReloadCells: statCells * 3 / 4, RingMiB: DefaultRingMiB,
	// Half a second in ten: attached, the per-syscall programs cost a
	// syscall-heavy server about what stat does (a fifth of redis's
	// throughput); 1 s in 10 cost it about 4%, 0.5 s 1.5% (bench/HISTORY.md),
	// within the 2% an always-on agent may take. The window stays 10 s.
	DutyOn: 500 * time.Millisecond, DutyPeriod: 10 * time.Second,
	Window: 10 * time.Second, Cooldown: 10 * time.Minute, CaptureDir: "/var/lib/sysray/captures",
	CaptureBytes: 512 << 20, CaptureFiles: 100, FlightWindow: 30 * time.Second, FlightBytes: 16 << 20,
}

// Check says what is wrong with c, in the flags' words.
func (c *Config) Check() error {
	switch {
	case c.Interval < 100*time.Millisecond:
		return fmt.Errorf("--interval %s: at least 100ms", c.Interval)
	case c.MaxContainers < 0:
		return fmt.Errorf("--max-containers %d: want 0 or more", c.MaxContainers)
	case c.MaxSyscalls < 1:
		return fmt.Errorf("--max-syscalls %d: want 1 or more", c.MaxSyscalls)
	case c.Grace <= 0:
		return fmt.Errorf("--grace %s: want a positive duration", c.Grace)
	case c.RingMiB < 1 || c.RingMiB > 1024:
		return fmt.Errorf("--buffer-size %d: want 1 to 1024 MiB", c.RingMiB)
	case c.ReloadCells < 1 || c.ReloadCells > statCells:
		return fmt.Errorf("--reload-cells %d: want 1 to %d", c.ReloadCells, statCells)
	case c.Cooldown < 0:
		return fmt.Errorf("--cooldown %s: want 0 or a positive duration", c.Cooldown)
	case c.Window < time.Second:
		return fmt.Errorf("--window %s: at least 1s", c.Window)
	case c.FlightWindow < time.Second || c.FlightBytes < 1<<20:
		return fmt.Errorf("--flight-window %s, --flight-bytes %d: at least 1s and 1 MiB", c.FlightWindow, c.FlightBytes)
	case c.CaptureBytes < 1<<20 || c.CaptureFiles < 1:
		return fmt.Errorf("--capture-max-bytes %d, --capture-max-files %d: at least 1 MiB and 1", c.CaptureBytes, c.CaptureFiles)
	case !c.Always && (c.DutyOn < 100*time.Millisecond || c.DutyPeriod < 2*c.DutyOn || c.DutyPeriod%c.DutyOn != 0):
		return fmt.Errorf("--duty-on %s, --duty-period %s: on at least 100ms, the period a multiple of it, at least twice", c.DutyOn, c.DutyPeriod)
	}
	if c.OTLPEndpoint != "" {
		if c.NoDoctor {
			return fmt.Errorf("--otlp-endpoint sends the doctor's findings: not with --no-doctor")
		}
		u, err := OTLPEndpoint(c.OTLPEndpoint)
		if err != nil {
			return fmt.Errorf("--otlp-endpoint %s: %w", c.OTLPEndpoint, err)
		}
		// The files and variables read now: a mistake in them stops the
		// agent at start, not its first finding's record.
		if _, err := c.OTLPAuth.resolve(u, os.Getenv); err != nil {
			return err
		}
	} else if a := c.OTLPAuth; len(a.Headers) > 0 || a.HeadersFile != "" || a.CAFile != "" || a.ClientCert != "" || a.ClientKey != "" {
		return errors.New("--otlp-header, --otlp-headers-file, --otlp-ca-file, --otlp-client-cert and --otlp-client-key are for --otlp-endpoint")
	}
	return nil
}

// Run runs the agent until ctx ends (docs/agent.md): it listens, loads the
// probe, serves the metrics and the API, and, unless told NoDoctor, runs
// the continuous doctor and its flight recorder. log takes its JSON lines.
func Run(ctx context.Context, c Config, log *slog.Logger) error {
	if err := c.Check(); err != nil {
		return err
	}
	if !c.Always {
		// The doctor's window is the duty period: one stretch of traced
		// syscalls each.
		c.Window = c.DutyPeriod
	}
	if os.Getenv("GOGC") == "" {
		// The agent's live heap is some 40 MiB (kernel symbols, event
		// batches, the flight recorder's encoder) plus what each read of
		// the kernel's tables and each window hold for a moment; its
		// garbage is mostly those reads. Go's default lets the heap double
		// between collections: half that, and a soft limit of the flight
		// recorder's bytes plus 64 MiB, keep the RSS under 150 MiB
		// (docs/agent.md, TestAgentSoak).
		debug.SetGCPercent(50)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(64<<20 + c.FlightBytes)
	}
	// Listen first: a port already taken, or an API that would be open
	// to the network, is an error before any program is loaded.
	wc := webConfig{path: c.WebConfig}
	if err := web.Validate(wc.path); err != nil {
		return fmt.Errorf("--web.config.file %s: %w", wc.path, err)
	}
	ln, err := listen(c.Listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", c.Listen, err)
	}
	defer ln.Close()
	apiLn, err := apiListener(c, ln, wc)
	if err != nil {
		return err
	}
	if apiLn != nil {
		defer apiLn.Close()
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()

	lc := session.NewLive()
	defer lc.Close()
	agg := New(Options{Arch: event.HostArch(), Name: namer(lc),
		MaxContainers: c.MaxContainers, MaxSyscalls: c.MaxSyscalls, Grace: c.Grace, Settle: settle,
		Reclaim: min(c.Grace, reclaim), Unnamed: whyUnnamed(lc, log)})
	aw := newAuditWatch(log, !c.NoDoctor)
	src := &probeSource{lc: lc, agg: agg, log: log, audit: aw, reloadAt: c.ReloadCells, ringMiB: c.RingMiB, scale: 1, exact: c.Exact}
	if !c.Always {
		src.scale = uint64(c.DutyPeriod / c.DutyOn)
	}
	if !c.NoDoctor {
		if src.doc, err = newLiveDoctor(log, lc, aw, c); err != nil {
			return fmt.Errorf("--capture-dir %s: %w", c.CaptureDir, err)
		}
	}
	var otlp *OTLP
	if c.OTLPEndpoint != "" {
		hostname, _ := os.Hostname()
		res, err := ResourceAttrs(hostname, os.Getenv("OTEL_RESOURCE_ATTRIBUTES"))
		if err != nil {
			return fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
		}
		if otlp, err = NewOTLP(c.OTLPEndpoint, c.OTLPAuth, res, log); err != nil {
			return fmt.Errorf("--otlp-endpoint %s: %w", c.OTLPEndpoint, err)
		}
		src.doc.otlp = otlp
		go otlp.Run(ctx)
		// Its last attempt at what is queued: ctx ends first.
		defer func() { stop(); <-otlp.Done() }()
	}
	if err := src.open(); err != nil {
		return err
	}
	defer src.Close()
	ag := NewAgent(agg, src, c.Interval, log)
	if src.doc != nil {
		// The CPUs' steal, which slow-syscall takes out of a call's own
		// time; not read while the audit backlog makes opens wait, and
		// seldom while the syscall programs are paused.
		steal := checkup.WatchSteal(src.doc.audit.Stalling, src.quiet)
		defer steal.Stop()
		src.doc.steal = steal.Log()
		src.doc.win.SetSteal(src.doc.steal)
		ag.Findings = src.doc.store
		if otlp != nil {
			ag.Collectors = append(ag.Collectors, otlp)
		}
		if src.doc.dir != nil {
			ag.Captures = flightCaptures{src.doc}
			usr1 := make(chan os.Signal, 1)
			signal.Notify(usr1, syscall.SIGUSR1)
			defer signal.Stop(usr1)
			go func() {
				for {
					select {
					case <-ctx.Done():
						return
					case <-usr1:
						if _, err := ag.Captures.Snapshot("SIGUSR1"); err != nil {
							log.Error("writing a flight capture failed", "reason", "SIGUSR1", "error", err.Error())
						}
					}
				}
			}()
		}
		if c.Always {
			go src.doc.run(ctx, src.current)
		}
	}
	aw.run(src.current)
	defer aw.stop()
	if !c.Always {
		go src.dutyCycle(ctx, c.DutyOn, c.DutyPeriod)
	}
	apiAt := where(ln)
	if apiLn != nil {
		apiAt = where(apiLn)
	}
	// The server's own complaints (a TLS handshake that failed) are log
	// lines like the rest, not bare text on stderr.
	errLog := slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	srv := &http.Server{Handler: ag.handler(func(h http.Handler) http.Handler { return apiGuard(h, ln, wc, apiAt) }),
		ReadHeaderTimeout: 10 * time.Second, ErrorLog: errLog}
	served := make(chan error, 2)
	go func() { served <- serve(srv, ln, wc, log) }()
	var apiSrv *http.Server
	if apiLn != nil {
		apiSrv = &http.Server{Handler: ag.handler(func(h http.Handler) http.Handler { return apiGuard(h, apiLn, wc, "") }),
			ReadHeaderTimeout: 10 * time.Second, ErrorLog: errLog}
		go func() { served <- serve(apiSrv, apiLn, wc, log) }()
	}
	log.Info("listening", "addr", ln.Addr().String(), "api", apiAt, "web_config", wc.path, "interval", c.Interval.String(),
		"max_containers", c.MaxContainers, "max_syscalls", c.MaxSyscalls, "grace", c.Grace.String())
	reading := make(chan struct{})
	go func() { ag.Run(ctx); close(reading) }()
	select {
	case <-ctx.Done():
	case err = <-served:
		stop()
	}
	<-reading
	if src.doc != nil {
		src.doc.wait() // captures being written
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	if apiSrv != nil {
		apiSrv.Shutdown(sctx)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving %s: %w", ln.Addr(), err)
	}
	return nil
}

// apiListener opens the API's own listener, or returns nil when the API
// goes on ln: when ln is private or the web config protects it, unless
// told otherwise. An API address open to the network without that
// protection is refused.
func apiListener(c Config, ln net.Listener, wc webConfig) (net.Listener, error) {
	prot, err := wc.protected()
	if err != nil {
		return nil, fmt.Errorf("--web.config.file %s: %w", wc.path, err)
	}
	addr := c.APIListen
	if addr == "" || addr == c.Listen {
		if private(ln) || prot {
			return nil, nil
		}
		if addr != "" {
			return nil, fmt.Errorf("--api-listen %s: the API holds other processes' command lines; serve it on loopback or a unix socket, or give --web.config.file with TLS and basic auth or client certificates", addr)
		}
		addr = DefaultAPISocket
	}
	api, err := listen(addr)
	if err != nil {
		return nil, fmt.Errorf("--api-listen %s: %w", addr, err)
	}
	if !private(api) && !prot {
		api.Close()
		return nil, fmt.Errorf("--api-listen %s: the API holds other processes' command lines; serve it on loopback or a unix socket, or give --web.config.file with TLS and basic auth or client certificates", addr)
	}
	return api, nil
}
