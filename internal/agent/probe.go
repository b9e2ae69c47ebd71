package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/sysray/sysray/internal/checkup"
	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/filter"
	"github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/probe"
	"github.com/sysray/sysray/internal/session"
	"github.com/sysray/sysray/internal/stat"
)

// readerPoll is how long the event reader sleeps on a ring while the
// per-syscall programs are paused (duty cycling): the rest emit per
// process, fault or signal, and a reader that finds a ring filling sleeps
// less (probe.readRing), so it only delays their events. The default 5 ms
// keeps `trace` prompt and user stacks nameable, and woke an idle agent
// hundreds of times a second; 50 ms still made the readers and the merger
// they wake most of an idle agent's CPU (220 ms in 20 s against 145 ms at
// 250 ms, each woken goroutine costing Go's scheduler more than its work).
const readerPoll = 250 * time.Millisecond

// DefaultRingMiB is the agent's ring per CPU. The agent's events are the
// doctor's (failures, slow calls, one call in 64 at most every 10 ms per
// thread, faults, signals, lifecycle), not every call: 50 busy threads
// send some 5,000 a second, 1 MiB at most, which 4 MiB drains with room
// for bursts. The 64 MiB that record uses would be twice that in the
// agent's RSS (the kernel maps a ring's pages twice), for nothing.
const DefaultRingMiB = 4

// settle is how long the counts of a new cgroup wait to be named: the
// container table finds new cgroups every 5 s and asks the runtime for
// names within 2 s more.
const settle = 7 * time.Second

// reclaim is how long a slot must be idle for a newcomer to take it.
const reclaim = time.Minute

// namer names containers as stat --by container does, short of the
// image: a series' labels must not change while the container lives.
func namer(lc *session.Live) Namer {
	return func(pid uint32, cg uint64) (Labels, bool) { return labelsOf(lc.Container(pid, cg)) }
}

// findingWait bounds how long the names of one window's findings wait,
// all together, for the runtime to name a container and for processes
// the container table has not placed yet to be read from /proc. A
// finding's labels are part of its key and name its flight capture: a
// process the table's probe queue had not reached (a busy host, a
// container started in the window) would otherwise be the host's.
const findingWait = time.Second

// findingNamer names the containers of findings: as namer, but placing a
// process at once and waiting, up to findingWait for all the questions of
// one window's close, for a name the runtime has not given yet.
func findingNamer(lc *session.Live) Namer {
	var mu sync.Mutex
	var until time.Time
	return func(pid uint32, cg uint64) (Labels, bool) {
		mu.Lock()
		if now := time.Now(); now.After(until.Add(findingWait)) {
			until = now.Add(findingWait) // a new window's questions
		}
		deadline := until
		mu.Unlock()
		return labelsOf(lc.ContainerBy(pid, cg, deadline))
	}
}

// labelsOf is a container's labels; sure says the runtime named it.
func labelsOf(c filter.Container) (Labels, bool) {
	if c.ID == "" {
		return Host, false
	}
	name := c.Name
	if name == "" {
		name = c.ID
		if len(name) > 12 {
			name = name[:12]
		}
	}
	// Without the runtime's answer the name is the bare id for now.
	return Labels{Container: name, Pod: c.PodName, Namespace: c.PodNamespace}, c.Name != "" || c.Image != ""
}

// whyUnnamed logs why a container's counts went under its bare id: the
// runtime's error (down, slow, no such container) or that it answered late.
// Once per container in ten minutes: the Aggregator tells of each cgroup,
// and of processes seen by their faults alone.
func whyUnnamed(lc *session.Live, log *slog.Logger) func(pid uint32, cg uint64, l Labels) {
	told := map[Labels]time.Time{} // the Aggregator calls with its lock held
	return func(pid uint32, cg uint64, l Labels) {
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
	lc       *session.Live
	agg      *Aggregator
	log      *slog.Logger
	reloadAt int  // cells
	ringMiB  int  // per CPU
	exact    bool // time every call with the clock, not budgeted timing (docs/stat.md)

	doc   *liveDoctor // nil: counts only
	audit *auditWatch
	scale uint64 // Snapshot.Scale: duty period over on time, 1 when always attached

	// evMu serialises event: for a reload's grace two loads' readers
	// deliver events (handover).
	evMu sync.Mutex
	// readMu serialises Read, which lets mu go for a reload's grace.
	readMu sync.Mutex

	mu   sync.Mutex
	gen  uint64
	load *load
	off  bool // duty cycling has the syscall programs off now
	// reloads and untraced, for Snapshot: the reloads so far and the
	// time between each one's last read and the next load's attach.
	reloads  uint64
	untraced time.Duration
	inFlight uint64 // calls lost in handovers (Snapshot.InFlight)
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
	final    Snapshot // read after the last event, before the programs went
	finalErr error
	// handoverLost: its calls still in flight when it stopped, after a
	// handover (probe.Probe.HandoverLost).
	handoverLost uint64
	sampling     *probe.Sampling // the doctor's on-CPU samples
	// drain reads the count table and lets the cells of processes that
	// ended forgetAfter ago go (stat/drain.go).
	drain *stat.Drain
}

// open loads and attaches a probe; callers hold mu, or own s alone.
func (s *probeSource) open() error {
	ld, err := s.start(nil)
	if err == nil {
		s.load = ld
	}
	return err
}

// start loads and attaches a probe of generation s.gen, to take over
// from after if it is not nil (probe.Config.After); callers hold mu, or
// own s alone.
func (s *probeSource) start(after *probe.Probe) (*load, error) {
	ld := &load{gen: s.gen, stop: make(chan struct{}), done: make(chan struct{}),
		drain: stat.NewDrain(uint64(forgetAfter), false, host.Mono)}
	ready := make(chan *probe.Probe, 1)
	opts := live.Options{
		// Nothing the agent does needs events within milliseconds.
		Probe: probe.Config{Stat: true, Poll: readerPoll, RingSize: s.ringMiB << 20, After: after},
		Stop:  ld.stop,
		Warn:  func(m string) { s.log.Warn(m) },
		Started: func(p *probe.Probe) error {
			if s.doc != nil {
				var err error
				if ld.sampling, err = p.StartSampling(doctor.SampleHz); err != nil {
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
			ld.final, ld.finalErr = s.snapshot(ld, p)
			ld.final.Final = true
			if n, err := p.HandoverLost(); err == nil {
				ld.handoverLost = n
			}
			return nil
		},
	}
	if !s.exact {
		// As stat: a thread's first calls of a syscall each tick and 1 in
		// 16 after that are timed; on redis that is most of the counting
		// cost of the attached stretches (bench/HISTORY.md). Sampled calls
		// and records cross over only from the timed calls.
		opts.Probe.UseBudget()
	}
	if s.doc != nil {
		// The doctor's mode for the agent (checkup.Configure): every call
		// counted in the kernel, failures, slow calls with their sleep
		// stacks and a sample of the others crossing over as events,
		// timed as stat times them, so the histograms stand for every
		// call, as /metrics' must.
		checkup.Configure(&opts.Probe, event.HostArch(), checkup.Agent)
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
		if s.off {
			ld.p.PauseSyscalls() // loaded while duty cycling has them off
			if ld.sampling != nil {
				ld.sampling.Pause()
			}
		}
		return ld, nil
	case <-ld.done:
		if ld.runErr == nil {
			ld.runErr = errors.New("the probe stopped as it started")
		}
		return nil, ld.runErr
	}
}

func (s *probeSource) event(e *event.Event) error {
	s.evMu.Lock()
	defer s.evMu.Unlock()
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

// snapshot reads ld's probe p: the fault counts first, then the syscall
// counts, after which the cells (and fault counts) of processes that
// ended long enough ago go from the kernel: this snapshot has their last
// counts.
func (s *probeSource) snapshot(ld *load, p *probe.Probe) (Snapshot, error) {
	pc, err := p.ProcCounts()
	if err != nil {
		return Snapshot{}, fmt.Errorf("reading the fault counts: %w", err)
	}
	r, err := ld.drain.Read(p)
	if err != nil {
		return Snapshot{}, fmt.Errorf("reading the syscall counts: %w", err)
	}
	if len(r.Ended) > 0 {
		// Processes seen only by their faults have no cells to go with.
		bare := map[uint32]bool{}
		for pid := range r.Ended {
			if _, ok := pc[pid]; ok {
				bare[pid] = true
			}
		}
		for i := range r.Cells {
			delete(bare, r.Cells[i].PID)
		}
		if _, err := p.Forget(bare); err != nil {
			s.log.Warn("forgetting exited processes' counts", "error", err.Error())
		}
	}
	snap := Snapshot{Gen: ld.gen, Cells: r.Cells, Lost: r.Lost, Procs: make(map[uint32]ProcCounts, len(pc)), Scale: s.scale}
	for pid, c := range pc {
		snap.Procs[pid] = ProcCounts{Faults: c.Faults, Vsyscalls: c.Vsyscalls}
	}
	if per, err := p.Drops(); err == nil {
		for _, n := range per {
			snap.RingDrops += n
		}
	}
	// The sysctl says whether an operator turned the kernel's timing on;
	// a program holding BPF_ENABLE_STATS turns it on without the sysctl
	// showing it, but then the run times grow.
	// Only this probe's programs: another sysray on the host has programs
	// of the same names. The sysctl is a file, not read while the audit
	// backlog is full (an open may wait then, and the counts must not).
	m := p.RunTimes()
	var any time.Duration
	for _, d := range m {
		any += d
	}
	if any > 0 || !s.audit.Stalling() && BPFStatsOn() {
		snap.BPF = m
	}
	return snap, nil
}

// Read implements Source.
func (s *probeSource) Read() (Snapshot, error) {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, err := s.read()
	snap.Reloads, snap.Untraced, snap.InFlight = s.reloads, s.untraced, s.inFlight
	return snap, err
}

// read is Read, with s.mu held.
func (s *probeSource) read() (Snapshot, error) {
	if s.load == nil {
		if err := s.open(); err != nil {
			return Snapshot{}, fmt.Errorf("reloading the probe: %w", err)
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
			return Snapshot{}, errors.New("tracing stopped")
		}
		return ld.final, nil
	default:
	}
	snap, err := s.snapshot(ld, ld.p)
	if err == nil {
		s.ended(ld, snap)
	}
	if err != nil || !s.filling(snap) {
		return snap, err
	}
	// The tables are filling up with processes long gone: an empty
	// load takes over, and this one's last counts go out.
	s.gen++
	if s.handover(ld) {
		if ld.finalErr != nil {
			return snap, nil
		}
		return ld.final, nil
	}
	start := time.Now()
	close(ld.stop)
	<-ld.done
	s.load = nil
	err = s.open()
	// Counted whether or not the load took: the host went untraced from
	// the last read until now, and a failed load stays untraced until the
	// next read loads anew (not counted: the log says it failed).
	gap := time.Since(start)
	s.reloads++
	s.untraced += gap
	if err != nil {
		s.log.Error("reloading the probe failed; will retry", "error", err.Error())
	} else {
		s.log.Info("reloaded the probe with empty tables", "cells", len(snap.Cells), "processes", len(snap.Procs),
			"gap_ms", gap.Milliseconds())
	}
	if ld.finalErr != nil {
		return snap, nil
	}
	return ld.final, nil
}

// handoverGrace is how long a load that handed over stays attached to
// finish the calls it saw enter: calls in flight across a reload that
// outlast it are counted by neither load. A second covers the sleeps of
// a polling loop and most waits for a peer; the cost of the two loads
// attached side by side for that long is a second of a table lookup at
// each exit.
const handoverGrace = time.Second

// handover loads the next probe beside ld's, hands tracing over to it
// with nothing lost or counted twice (probe.Config.After), and detaches
// ld's once the calls it saw enter have ended: ld.final then holds its
// last counts (unless ld.finalErr says why not). False if the next probe
// would not load: ld is as it was. Callers hold mu and readMu; mu is let
// go for the grace.
func (s *probeSource) handover(ld *load) bool {
	start := time.Now()
	next, err := s.start(ld.p)
	if err == nil {
		if err = next.p.Take(); err != nil {
			close(next.stop)
			<-next.done
		}
	}
	if err != nil {
		s.log.Warn("loading the next probe beside this one failed; reloading with a gap", "error", err.Error())
		return false
	}
	loaded := time.Since(start)
	s.load = next
	s.reloads++
	// The grace without mu: duty cycling and the doctor's windows go on
	// with the new load meanwhile (the old one takes no new calls, so
	// there is nothing of it to pause).
	s.mu.Unlock()
	time.Sleep(handoverGrace)
	close(ld.stop)
	<-ld.done
	s.mu.Lock()
	s.inFlight += ld.handoverLost
	s.log.Info("reloaded the probe with empty tables", "cells", len(ld.final.Cells), "processes", len(ld.final.Procs),
		"gap_ms", 0, "load_ms", loaded.Milliseconds(), "in_flight_lost", ld.handoverLost)
	return true
}

// forgetAfter is how long the counts of an exited process stay in the
// kernel. The read that first finds it gone may precede its last calls,
// and the aggregator leaves the counts of a process it cannot name yet
// in the kernel for up to settle (7 s); 30 s covers both with reads to
// spare at the default --interval of 5 s.
const forgetAfter = 30 * time.Second

// ended tells ld's drain which processes of snap have exited, and which
// run again (a reused pid): their cells go forgetAfter after the first read
// that found them gone. Looking in /proc, rather than waiting for exit
// events, also catches an end whose event was dropped.
func (s *probeSource) ended(ld *load, snap Snapshot) {
	now := host.Mono()
	seen := map[uint32]bool{}
	check := func(pid uint32) {
		if seen[pid] {
			return
		}
		seen[pid] = true
		if _, err := os.Stat("/proc/" + strconv.FormatUint(uint64(pid), 10)); err == nil {
			ld.drain.Alive(pid)
		} else {
			ld.drain.End(pid, now)
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
func (s *probeSource) filling(snap Snapshot) bool {
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
