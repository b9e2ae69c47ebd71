package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/agent"
)

func newAgent() *cobra.Command {
	c := agent.Defaults
	syscallsMode := "duty"
	cmd := &cobra.Command{
		Use:   "agent [flags]",
		Short: "Run on every host: count syscalls, errors, faults and signals in the kernel and serve them to Prometheus",
		Long: `Counts every syscall on the host in the kernel (as stat does), with page
faults, vsyscall emulations and signals, reads the counts every --interval and
serves them at /metrics in Prometheus's format, by container and syscall, with
a bounded number of series (docs/agent.md). GET /api/health says whether the
reads are current. The doctor's findings and flight captures (/api/...) hold
other processes' command lines and paths: they are served only on loopback, a
unix socket, or behind the TLS and authentication of --web.config.file, and
credentials in command lines are redacted unless --keep-secrets. Runs in the foreground and logs JSON lines to stdout;
SIGTERM or SIGINT detaches and exits 0.`,
		Example: `  sysray agent
  sysray agent --listen 0.0.0.0:9437 --max-containers 50      # metrics to the network, the API on ` + agent.DefaultAPISocket + `
  sysray agent --listen 0.0.0.0:9437 --web.config.file web.yml  # all of it, over TLS with authentication`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if syscallsMode != "duty" && syscallsMode != "always" {
				return fmt.Errorf("--syscalls %q: duty or always", syscallsMode)
			}
			c.Always = syscallsMode == "always"
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return agent.Run(ctx, c, slog.New(slog.NewJSONHandler(os.Stdout, nil)))
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.Listen, "listen", c.Listen, "serve /metrics and /api/health on this address (host:port, or unix:PATH); the API too when it is loopback, a unix socket, or protected by --web.config.file")
	f.StringVar(&c.APIListen, "api-listen", "", "serve /api/findings, /api/captures and /api/snapshot here (they hold other processes' command lines); default: with --listen when that is loopback or protected, else "+agent.DefaultAPISocket+"; an address beyond loopback needs --web.config.file")
	f.StringVar(&c.WebConfig, "web.config.file", "", "TLS and authentication for the listeners (basic auth with bcrypt, client certificates), in the format of Prometheus exporters (docs/agent.md)")
	f.DurationVar(&c.Interval, "interval", c.Interval, "how often to read the kernel's counts")
	f.IntVar(&c.MaxContainers, "max-containers", c.MaxContainers, "containers with series of their own; the rest are folded into container=\"other\"")
	f.IntVar(&c.MaxSyscalls, "max-syscalls", c.MaxSyscalls, "syscalls with series of their own per container; the rest are folded into syscall=\"other\"")
	f.DurationVar(&c.Grace, "grace", c.Grace, "remove a container's (or syscall's) series after this long without a call")
	// For tests: reload often, to watch the counters across reloads.
	f.IntVar(&c.ReloadCells, "reload-cells", c.ReloadCells, "reload the probe when its count table holds this many cells")
	f.MarkHidden("reload-cells")
	f.StringVar(&syscallsMode, "syscalls", syscallsMode, "duty: attach the per-syscall programs --duty-on in every --duty-period and scale their counts; always: exact counts at their full cost")
	f.DurationVar(&c.DutyOn, "duty-on", c.DutyOn, "with --syscalls duty, how long the per-syscall programs stay attached each period")
	f.DurationVar(&c.DutyPeriod, "duty-period", c.DutyPeriod, "with --syscalls duty, the period (a multiple of --duty-on); also the doctor's window")
	f.IntVar(&c.RingMiB, "buffer-size", c.RingMiB, "event ring per CPU, MiB (drops are counted in sysray_events_dropped_total)")
	f.BoolVar(&c.NoDoctor, "no-doctor", false, "count only: no continuous doctor, no findings, no flight recorder (the least cost)")
	f.BoolVar(&c.Exact, "exact-timing", false, "time every call with the clock (histograms exact to their bucket; counting then costs nearly twice as much per call while attached; docs/stat.md)")
	f.DurationVar(&c.Window, "window", c.Window, "run the doctor over windows this long")
	f.StringVar(&c.CaptureDir, "capture-dir", c.CaptureDir, "write flight captures here (\"\" for none)")
	f.Int64Var(&c.CaptureBytes, "capture-max-bytes", c.CaptureBytes, "keep the capture directory under this many bytes, deleting the oldest first")
	f.IntVar(&c.CaptureFiles, "capture-max-files", c.CaptureFiles, "keep at most this many captures, deleting the oldest first")
	f.DurationVar(&c.Cooldown, "cooldown", c.Cooldown, "write at most one capture per finding and container this often")
	f.DurationVar(&c.FlightWindow, "flight-window", c.FlightWindow, "how far back a flight capture reaches")
	f.Int64Var(&c.FlightBytes, "flight-bytes", c.FlightBytes, "memory for the flight recorder's compressed events (1 to 3 million events)")
	f.StringVar(&c.OTLPEndpoint, "otlp-endpoint", "", "send each new finding as an OpenTelemetry log record, OTLP/HTTP with protobuf, to this URL (http://HOST:4318/v1/logs; /v1/logs is added to a URL without a path; https for TLS)")
	f.StringArrayVar(&c.OTLPAuth.Headers, "otlp-header", nil, "with --otlp-endpoint, send this header, Name=Value (repeatable); every user can read a process's arguments: for credentials use --otlp-headers-file or OTEL_EXPORTER_OTLP_HEADERS")
	f.StringVar(&c.OTLPAuth.HeadersFile, "otlp-headers-file", "", "with --otlp-endpoint, send the headers of this file, one \"Name: Value\" or Name=Value a line; it must be readable by its owner only")
	f.StringVar(&c.OTLPAuth.CAFile, "otlp-ca-file", "", "with an https --otlp-endpoint, trust the CA certificates of this PEM file instead of the system's (else OTEL_EXPORTER_OTLP_CERTIFICATE)")
	f.StringVar(&c.OTLPAuth.ClientCert, "otlp-client-cert", "", "with an https --otlp-endpoint, present this PEM client certificate (mutual TLS; needs --otlp-client-key)")
	f.StringVar(&c.OTLPAuth.ClientKey, "otlp-client-key", "", "the PEM private key of --otlp-client-cert")
	return cmd
}
