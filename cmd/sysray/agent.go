package main

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
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/agent"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/probe"
)

func newAgent() *cobra.Command {
	var listen string
	var interval, grace time.Duration
	var maxContainers, maxSyscalls, reloadCells, ringMiB int
	var noDoctor, exact bool
	var syscallsMode string
	var dutyOn, dutyPeriod time.Duration
	do := agentDoctorOptions{}
	cmd := &cobra.Command{
		Use:   "agent [flags]",
		Short: "Run on every host: count syscalls, errors, faults and signals in the kernel and serve them to Prometheus",
		Long: `Counts every syscall on the host in the kernel (as stat does), with page
faults, vsyscall emulations and signals, reads the counts every --interval and
serves them at /metrics in Prometheus's format, by container and syscall, with
a bounded number of series (docs/agent.md). GET /api/health says whether the
reads are current. Runs in the foreground and logs JSON lines to stdout;
SIGTERM or SIGINT detaches and exits 0.`,
		Example: `  sysray agent
  sysray agent --listen 0.0.0.0:9437 --max-containers 50`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case interval < 100*time.Millisecond:
				return fmt.Errorf("--interval %s: at least 100ms", interval)
			case maxContainers < 0:
				return fmt.Errorf("--max-containers %d: want 0 or more", maxContainers)
			case maxSyscalls < 1:
				return fmt.Errorf("--max-syscalls %d: want 1 or more", maxSyscalls)
			case grace <= 0:
				return fmt.Errorf("--grace %s: want a positive duration", grace)
			case ringMiB < 1 || ringMiB > 1024:
				return fmt.Errorf("--buffer-size %d: want 1 to 1024 MiB", ringMiB)
			case reloadCells < 1 || reloadCells > statCells:
				return fmt.Errorf("--reload-cells %d: want 1 to %d", reloadCells, statCells)
			case do.window < time.Second:
				return fmt.Errorf("--window %s: at least 1s", do.window)
			case do.flightWindow < time.Second || do.flightBytes < 1<<20:
				return fmt.Errorf("--flight-window %s, --flight-bytes %d: at least 1s and 1 MiB", do.flightWindow, do.flightBytes)
			case do.captureBytes < 1<<20 || do.captureFiles < 1:
				return fmt.Errorf("--capture-max-bytes %d, --capture-max-files %d: at least 1 MiB and 1", do.captureBytes, do.captureFiles)
			case syscallsMode != "duty" && syscallsMode != "always":
				return fmt.Errorf("--syscalls %q: duty or always", syscallsMode)
			case syscallsMode == "duty" && (dutyOn < 100*time.Millisecond || dutyPeriod < 2*dutyOn || dutyPeriod%dutyOn != 0):
				return fmt.Errorf("--duty-on %s, --duty-period %s: on at least 100ms, the period a multiple of it, at least twice", dutyOn, dutyPeriod)
			}
			duty := syscallsMode == "duty"
			if duty {
				// The doctor's window is the duty period: one stretch of
				// traced syscalls each.
				do.window = dutyPeriod
			}
			log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
			if os.Getenv("GOGC") == "" {
				// The agent's live heap is some 40 MiB (kernel symbols,
				// event batches, the flight recorder's encoder) plus
				// what each read of the kernel's tables and each window
				// hold for a moment; its garbage is mostly those reads.
				// Go's default lets the heap double between collections:
				// half that, and a soft limit of the flight recorder's
				// bytes plus 64 MiB, keep the RSS under 150 MiB
				// (docs/agent.md, TestAgentSoak).
				debug.SetGCPercent(50)
			}
			if os.Getenv("GOMEMLIMIT") == "" {
				debug.SetMemoryLimit(64<<20 + do.flightBytes)
			}
			// Listen first: a port already taken is an error before any
			// program is loaded.
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("--listen %s: %w", listen, err)
			}
			defer ln.Close()
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()

			lc := newLiveContainers()
			defer lc.Close()
			agg := agent.New(agent.Options{Arch: event.HostArch(), Name: agentNamer(lc),
				MaxContainers: maxContainers, MaxSyscalls: maxSyscalls, Grace: grace, Settle: settle,
				Reclaim: min(grace, reclaim), Unnamed: whyUnnamed(lc, log)})
			aw := newAuditWatch(log)
			src := &probeSource{lc: lc, agg: agg, log: log, audit: aw, reloadAt: reloadCells, ringMiB: ringMiB, scale: 1, exact: exact}
			if duty {
				src.scale = uint64(dutyPeriod / dutyOn)
			}
			if !noDoctor {
				do.maxContainers, do.grace = maxContainers, grace
				if src.doc, err = newAgentDoctor(log, lc, aw, do); err != nil {
					return fmt.Errorf("--capture-dir %s: %w", do.captureDir, err)
				}
			}
			if err := src.open(); err != nil {
				return err
			}
			defer src.Close()
			ag := agent.NewAgent(agg, src, interval, log)
			if src.doc != nil {
				ag.Findings = src.doc.store
				if src.doc.dir != nil {
					ag.Captures = captures{src.doc}
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
				if !duty {
					go src.doc.run(ctx, src.current)
				}
			}
			aw.run(src.current)
			defer aw.stop()
			if duty {
				go src.dutyCycle(ctx, dutyOn, dutyPeriod)
			}
			srv := &http.Server{Handler: ag.Handler(), ReadHeaderTimeout: 10 * time.Second}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			log.Info("listening", "addr", ln.Addr().String(), "interval", interval.String(),
				"max_containers", maxContainers, "max_syscalls", maxSyscalls, "grace", grace.String())
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
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serving %s: %w", ln.Addr(), err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:9437", "serve /metrics and /api/health on this address (anything but loopback exposes them)")
	f.DurationVar(&interval, "interval", 5*time.Second, "how often to read the kernel's counts")
	f.IntVar(&maxContainers, "max-containers", 20, "containers with series of their own; the rest are folded into container=\"other\"")
	f.IntVar(&maxSyscalls, "max-syscalls", 10, "syscalls with series of their own per container; the rest are folded into syscall=\"other\"")
	f.DurationVar(&grace, "grace", 5*time.Minute, "remove a container's (or syscall's) series after this long without a call")
	// For tests: reload often, to watch the counters across reloads.
	f.IntVar(&reloadCells, "reload-cells", statCells*3/4, "reload the probe when its count table holds this many cells")
	f.MarkHidden("reload-cells")
	f.StringVar(&syscallsMode, "syscalls", "duty", "duty: attach the per-syscall programs --duty-on in every --duty-period and scale their counts; always: exact counts at their full cost")
	f.DurationVar(&dutyOn, "duty-on", time.Second, "with --syscalls duty, how long the per-syscall programs stay attached each period")
	f.DurationVar(&dutyPeriod, "duty-period", 10*time.Second, "with --syscalls duty, the period (a multiple of --duty-on); also the doctor's window")
	f.IntVar(&ringMiB, "buffer-size", agentRingMiB, "event ring per CPU, MiB (drops are counted in sysray_events_dropped_total)")
	f.BoolVar(&noDoctor, "no-doctor", false, "count only: no continuous doctor, no findings, no flight recorder (the least cost)")
	f.BoolVar(&exact, "exact-timing", false, "time every call with the clock (histograms exact to their bucket; counting then costs nearly twice as much per call while attached; docs/stat.md)")
	f.DurationVar(&do.window, "window", 10*time.Second, "run the doctor over windows this long")
	f.StringVar(&do.captureDir, "capture-dir", "/var/lib/sysray/captures", "write flight captures here (\"\" for none)")
	f.Int64Var(&do.captureBytes, "capture-max-bytes", 512<<20, "keep the capture directory under this many bytes, deleting the oldest first")
	f.IntVar(&do.captureFiles, "capture-max-files", 100, "keep at most this many captures, deleting the oldest first")
	f.DurationVar(&do.cooldown, "cooldown", 10*time.Minute, "write at most one capture per finding and container this often")
	f.DurationVar(&do.flightWindow, "flight-window", 30*time.Second, "how far back a flight capture reaches")
	f.Int64Var(&do.flightBytes, "flight-bytes", 16<<20, "memory for the flight recorder's compressed events (1 to 3 million events)")
	return cmd
}

// agentPoll is how long the event reader sleeps on an idle ring: the
// default 5 ms keeps `trace` prompt and user stacks nameable, and woke an
// idle agent hundreds of times a second.
const agentPoll = 50 * time.Millisecond

// agentRingMiB is the agent's ring per CPU. The agent's events are the
// doctor's (failures, slow calls, one call in 64 at most every 10 ms per
// thread, faults, signals, lifecycle), not every call: 50 busy threads
// send some 5,000 a second, 1 MiB at most, which 4 MiB drains with room
// for bursts. The 64 MiB that record uses would be twice that in the
// agent's RSS (the kernel maps a ring's pages twice), for nothing.
const agentRingMiB = 4

// settle is how long the counts of a new cgroup wait to be named: the
// container table finds new cgroups every 5 s and asks the runtime for
// names within 2 s more.
const settle = 7 * time.Second

// reclaim is how long a slot must be idle for a newcomer to take it.
const reclaim = time.Minute

// agentNamer names containers as stat --by container does, short of the
// image: a series' labels must not change while the container lives.
func agentNamer(lc *liveContainers) agent.Namer {
	return func(pid uint32, cg uint64) (agent.Labels, bool) {
		c := lc.Container(pid, cg)
		if c.ID == "" {
			return agent.Host, false
		}
		name := c.Name
		if name == "" {
			name = c.ID
			if len(name) > 12 {
				name = name[:12]
			}
		}
		// Without the runtime's answer the name is the bare id for now.
		return agent.Labels{Container: name, Pod: c.PodName, Namespace: c.PodNamespace}, c.Name != "" || c.Image != ""
	}
}

// whyUnnamed logs why a container's counts went under its bare id: the
// runtime's error (down, slow, no such container) or that it answered late.
// Once per container in ten minutes: the Aggregator tells of each cgroup,
// and of processes seen by their faults alone.
func whyUnnamed(lc *liveContainers, log *slog.Logger) func(pid uint32, cg uint64, l agent.Labels) {
	told := map[agent.Labels]time.Time{} // the Aggregator calls with its lock held
	return func(pid uint32, cg uint64, l agent.Labels) {
		now := time.Now()
		for k, at := range told {
			if now.Sub(at) > 10*time.Minute {
				delete(told, k)
			}
		}
		if _, ok := told[l]; ok {
			return
		}
		told[l] = now
		go func() {
			r := lc.Ref(pid, cg)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			why := "the runtime answered too late"
			if _, err := lc.MetaWait(ctx, r); err != nil {
				why = err.Error()
			}
			log.Warn("counting a container under its id: its runtime did not name it in time",
				"container", l.Container, "id", r.ID, "runtime", r.Runtime, "error", why)
		}()
	}
}

// Sizes of the kernel's tables in stat mode (bpf/sysray.bpf.c): counts
// per (process, cgroup, syscall), per (process, syscall, errno) and faults
// per process. None is ever emptied by the kernel, so a host that starts
// processes fills them; the probe is reloaded with empty ones before then.
const (
	statCells  = 32768
	errnoCells = 16384
	procCells  = 16384
)

// probeSource reads an always-attached stat-mode probe over the whole
// host, reloading it when its table fills up (a new generation).
type probeSource struct {
	lc       *liveContainers
	agg      *agent.Aggregator
	log      *slog.Logger
	reloadAt int  // cells
	ringMiB  int  // per CPU
	exact    bool // time every call with the clock, not budgeted timing (docs/stat.md)

	doc   *agentDoctor // nil: counts only
	audit *auditWatch
	scale uint64 // Snapshot.Scale: duty period over on time, 1 when always attached

	mu   sync.Mutex
	gen  uint64
	load *load
	// gone: processes of the current load's cells found exited, and when.
	gone    map[uint32]time.Time
	goneGen uint64
	off     bool // duty cycling has the syscall programs off now
}

// current is the probe loaded now; nil between loads.
func (s *probeSource) current() *probe.Probe {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.load == nil {
		return nil
	}
	return s.load.p
}

// load is one load of the probe: its programs attached, until reloaded or closed.
type load struct {
	p        *probe.Probe
	gen      uint64
	stop     chan struct{}
	done     chan struct{}
	runErr   error
	final    agent.Snapshot // read after the last event, before the programs went
	finalErr error
	sampling *probe.Sampling // the doctor's on-CPU samples
}

// open loads and attaches a probe; callers hold mu, or own s alone.
func (s *probeSource) open() error {
	ld := &load{gen: s.gen, stop: make(chan struct{}), done: make(chan struct{})}
	ready := make(chan *probe.Probe, 1)
	opts := live.Options{
		// Nothing the agent does needs events within milliseconds.
		Probe: probe.Config{Stat: true, Poll: agentPoll, RingSize: s.ringMiB << 20},
		Stop:  ld.stop,
		Warn:  func(m string) { s.log.Warn(m) },
		Started: func(p *probe.Probe) error {
			if s.doc != nil {
				var err error
				if ld.sampling, err = p.StartSampling(doctorHz); err != nil {
					s.log.Warn("on-CPU stacks are off", "error", err.Error())
				}
			}
			ready <- p
			return nil
		},
		Finished: func(p *probe.Probe) error {
			if ld.sampling != nil {
				ld.sampling.Close()
			}
			ld.final, ld.finalErr = s.snapshot(p, ld.gen)
			ld.final.Final = true
			return nil
		},
	}
	if !s.exact {
		// As stat: a thread's first calls of a syscall each tick and 1 in
		// 16 after that are timed; on redis that is most of the counting
		// cost of the attached stretches (BENCHMARKS.md). Sampled calls
		// and records cross over only from the timed calls.
		opts.Probe.UseBudget()
	}
	if s.doc != nil {
		// The doctor's mode, as `sysray doctor` runs it: every call
		// counted in the kernel, failures, slow calls with their sleep
		// stacks and one call in 64 (at most one a millisecond per thread)
		// crossing over as events (docs/doctor.md). Not its lean timing,
		// whose histograms hold only the 1 in 64 timed: budgeted timing's
		// stand for every call, as /metrics' must.
		opts.Probe.Sample = 64
		// Ten times the doctor's gap: on a server of 50 busy threads the
		// doctor's 1 ms let 50,000 sampled calls a second cross over,
		// which the agent then decoded, diagnosed and recorded on the
		// server's own CPUs. Failures and slow calls still all cross.
		opts.Probe.SampleGap = uint64(10 * time.Millisecond)
		opts.Probe.Stacks = true
		// User frames would mean reading every process's maps on a busy
		// host, all the time; the kernel's frames say where calls waited.
		opts.UserFrames = func() bool { return false }
	}
	go func() {
		defer close(ld.done)
		_, ld.runErr = live.Run(opts, s.event)
	}()
	select {
	case ld.p = <-ready:
		s.load = ld
		if s.off {
			ld.p.PauseSyscalls() // loaded while duty cycling has them off
			if ld.sampling != nil {
				ld.sampling.Pause()
			}
		}
		return nil
	case <-ld.done:
		if ld.runErr == nil {
			ld.runErr = errors.New("the probe stopped as it started")
		}
		return ld.runErr
	}
}

func (s *probeSource) event(e *event.Event) error {
	s.lc.Observe(e)
	if s.doc != nil {
		s.doc.observe(e)
	}
	// Counted where they arrive: the delivery runs in the receiving
	// thread, so its cgroup names the container even when the sender was
	// elsewhere, and it fires for fatal default actions too.
	if e.Kind == event.KindSignalDeliver {
		s.agg.Signal(e.PID, e.Cgroup, int(e.Signal.Sig))
	}
	return nil
}

func (s *probeSource) snapshot(p *probe.Probe, gen uint64) (agent.Snapshot, error) {
	cells, lost, err := p.Stats()
	if err != nil {
		return agent.Snapshot{}, fmt.Errorf("reading the syscall counts: %w", err)
	}
	pc, err := p.ProcCounts()
	if err != nil {
		return agent.Snapshot{}, fmt.Errorf("reading the fault counts: %w", err)
	}
	snap := agent.Snapshot{Gen: gen, Cells: cells, Lost: lost, Procs: make(map[uint32]agent.ProcCounts, len(pc)), Scale: s.scale}
	for pid, c := range pc {
		snap.Procs[pid] = agent.ProcCounts{Faults: c.Faults, Vsyscalls: c.Vsyscalls}
	}
	if per, err := p.Drops(); err == nil {
		for _, n := range per {
			snap.RingDrops += n
		}
	}
	// The sysctl says whether an operator turned the kernel's timing on;
	// a program holding BPF_ENABLE_STATS turns it on without the sysctl
	// showing it, but then the run times grow.
	// Not while the audit backlog is full: it reads a file per descriptor,
	// and the counts must not wait for them.
	if s.audit.Stalling() {
		return snap, nil
	}
	if m, err := agent.OwnBPFRunTime(); err == nil {
		var any time.Duration
		for _, d := range m {
			any += d
		}
		if any > 0 || agent.BPFStatsOn() {
			snap.BPF = m
		}
	}
	return snap, nil
}

// Read implements agent.Source.
func (s *probeSource) Read() (agent.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.load == nil {
		if err := s.open(); err != nil {
			return agent.Snapshot{}, fmt.Errorf("reloading the probe: %w", err)
		}
	}
	ld := s.load
	select {
	case <-ld.done:
		// The probe stopped by itself (a signal on the way to shutdown, or
		// a failure): hand over its last counts; the next read loads anew.
		s.load = nil
		s.gen++
		if ld.runErr != nil {
			s.log.Error("tracing stopped", "error", ld.runErr.Error())
		}
		if ld.finalErr != nil || ld.final.Cells == nil {
			return agent.Snapshot{}, errors.New("tracing stopped")
		}
		return ld.final, nil
	default:
	}
	snap, err := s.snapshot(ld.p, ld.gen)
	if err == nil {
		s.forget(ld, snap, time.Now())
	}
	if err != nil || !s.filling(snap) {
		return snap, err
	}
	// The tables are filling up with processes long gone: take
	// the last counts of this load and start an empty one.
	start := time.Now()
	close(ld.stop)
	<-ld.done
	s.load = nil
	s.gen++
	if err := s.open(); err != nil {
		s.log.Error("reloading the probe failed; will retry", "error", err.Error())
	} else {
		s.log.Info("reloaded the probe with empty tables", "cells", len(snap.Cells), "processes", len(snap.Procs),
			"gap_ms", time.Since(start).Milliseconds())
	}
	if ld.finalErr != nil {
		return snap, nil
	}
	return ld.final, nil
}

// forgetAfter is how long the counts of an exited process stay in the
// kernel. The read that first finds it gone may precede its last calls,
// and the aggregator leaves the counts of a process it cannot name yet
// in the kernel for up to settle (7 s); 30 s covers both with reads to
// spare at the default --interval of 5 s.
const forgetAfter = 30 * time.Second

// forget deletes from the kernel the counts of processes that exited at
// least forgetAfter ago, so the tables hold the living rather than
// filling with the dead until a reload (and every read, window and
// delta carries fewer cells). A pid that came back (reused) is kept.
func (s *probeSource) forget(ld *load, snap agent.Snapshot, now time.Time) {
	if s.gone == nil || s.goneGen != ld.gen {
		s.gone, s.goneGen = map[uint32]time.Time{}, ld.gen
	}
	alive := func(pid uint32) bool {
		_, err := os.Stat("/proc/" + strconv.FormatUint(uint64(pid), 10))
		return err == nil
	}
	due := map[uint32]bool{}
	for pid, t := range s.gone {
		switch {
		case alive(pid):
			delete(s.gone, pid)
		case now.Sub(t) >= forgetAfter:
			due[pid] = true
			delete(s.gone, pid)
		}
	}
	if _, err := ld.p.Forget(due); err != nil {
		s.log.Warn("forgetting exited processes' counts", "error", err.Error())
	}
	seen := map[uint32]bool{}
	check := func(pid uint32) {
		if seen[pid] || due[pid] {
			return
		}
		seen[pid] = true
		if _, ok := s.gone[pid]; !ok && !alive(pid) {
			s.gone[pid] = now
		}
	}
	for i := range snap.Cells {
		check(snap.Cells[i].PID)
	}
	for pid := range snap.Procs {
		check(pid)
	}
}

// filling says whether one of the kernel's tables is three quarters full
// (the count table: as --reload-cells says).
func (s *probeSource) filling(snap agent.Snapshot) bool {
	if len(snap.Cells) >= s.reloadAt || len(snap.Procs) >= procCells*3/4 {
		return true
	}
	// Each (process, syscall) pair's errnos ride on each of its cells.
	seen := map[[2]uint32]bool{}
	n := 0
	for i := range snap.Cells {
		c := &snap.Cells[i]
		if k := [2]uint32{c.PID, c.Nr}; !seen[k] {
			seen[k] = true
			n += len(c.Errnos)
		}
	}
	return n >= errnoCells*3/4
}

// Close detaches the probe.
func (s *probeSource) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.load != nil {
		close(s.load.stop)
		<-s.load.done
		s.load = nil
	}
}
