package agent

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sysray/sysray/internal/audit"
	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/checkup"
	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/flight"
	"github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/probe"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/session"
	"github.com/sysray/sysray/internal/stat"
)

// liveDoctor is the agent's continuous doctor and flight recorder: the
// doctor runs on rolling windows of the live events, its findings are kept
// across windows, and the last seconds of events stay in memory to be
// written out when a finding is new or worse, on SIGUSR1, or on request.
type liveDoctor struct {
	log    *slog.Logger
	lc     *session.Live
	arch   event.Arch
	kernel string
	vsys   string
	procs  *proc.Table
	win    *Windows
	steal  *doctor.StealLog // the CPUs' steal, read from the agent's start (nil in tests that make no agent)
	store  *Findings
	rec    *flight.Recorder
	dir    *flight.Dir // nil: captures off
	cool   *flight.Cooldown
	every  time.Duration
	names  Namer // findings' (findingNamer)
	otlp   *OTLP // nil: findings not sent over OTLP

	// The kernel's audit counters and the tasks asleep in audit_log_start,
	// cut at each window (audit.go).
	audit    *auditWatch
	auditWin atomic.Pointer[audit.Window] // the window being closed
	hz       int
	oom      atomic.Uint64 // the kernel's OOM kills, as last read

	snapMu sync.Mutex // one snapshot at a time: each copies the recorder's blocks
	// saving counts captures being written off the window's goroutine:
	// a capture's header may wait up to 3 s for containers' names, which
	// must not hold up the next window (or duty cycle's attach).
	saving sync.WaitGroup
}

// wait returns once the captures being written are.
func (a *liveDoctor) wait() { a.saving.Wait() }

func newLiveDoctor(log *slog.Logger, lc *session.Live, aw *auditWatch, o Config) (*liveDoctor, error) {
	_, kernel := host.Uname()
	a := &liveDoctor{log: log, lc: lc, audit: aw, arch: event.HostArch(), kernel: kernel, vsys: host.VsyscallMode(), hz: host.HZ(),
		every: o.Window, names: findingNamer(lc), cool: flight.NewCooldown(o.Cooldown),
		rec: flight.New(flight.Config{Window: o.FlightWindow, MaxBytes: o.FlightBytes})}
	// The processes running now, read in the background: each is a few
	// opens, and where the audit backlog is full every open may wait
	// (backlog_wait_time, 60 s by default). The table learns from events
	// meanwhile; on a healthy host the snapshot is in well before 2 s.
	a.procs = proc.NewTable(nil)
	snapped := make(chan struct{})
	go func() {
		snap, _ := proc.Snapshot()
		a.procs.Fill(snap)
		close(snapped)
	}()
	select {
	case <-snapped:
	case <-time.After(2 * time.Second):
		log.Info("still reading the process table in the background")
	}
	// A finding stays active for three windows: one quiet window is not a
	// recovery. It is forgotten after a day without a sign of it.
	a.store = NewFindings(FindingsOptions{ActiveFor: 3 * o.Window, Forget: 24 * time.Hour,
		Name: a.names, MaxContainers: o.MaxContainers, Grace: o.Grace, New: a.found})
	// Growth over hours: one doctor that keeps its state from window to
	// window (docs/agent.md).
	a.win = &Windows{New: a.newDoctor, Store: a.store, Long: doctor.NewLong(a.host(), a.procs)}
	if o.CaptureDir != "" {
		d, err := flight.OpenDir(o.CaptureDir, o.CaptureBytes, o.CaptureFiles)
		if err != nil {
			return nil, err
		}
		a.dir = d
	}
	return a, nil
}

func (a *liveDoctor) newDoctor() *doctor.Doctor { return doctor.New(a.host(), a.procs) }

func (a *liveDoctor) host() doctor.Host {
	return doctor.Host{Arch: a.arch, Kernel: a.kernel, VsyscallMode: a.vsys, Live: true,
		Container: func(pid uint32, cg uint64) string { return session.Describe(a.lc.Container(pid, cg)) },
		OOMKills:  a.oomKills,
		Audit:     a.auditWin.Load,
		// The detectors that read cgroup and /proc files as events come
		// wait there with every audited call while the backlog is full:
		// the agent would stop reading events.
		ReadsStall: a.audit.Stalling,
		Libc:       checkup.Libc}
}

// oomKills is the kernel's count of OOM kills: read now, unless reading a
// file may wait on the audit backlog (the doctor asks as a window starts,
// on the event reader's goroutine), then as last read.
func (a *liveDoctor) oomKills() uint64 {
	if !a.audit.Stalling() {
		a.oom.Store(host.OOMKills())
	}
	return a.oom.Load()
}

// found hands a finding new to the store to OTLP, if on (otlp.go).
func (a *liveDoctor) found(f *Finding, procs []doctor.ProcRef) {
	if a.otlp == nil {
		return
	}
	ps := make([]FindingProc, 0, min(len(procs), otlpMaxProcs))
	for _, p := range procs[:min(len(procs), otlpMaxProcs)] {
		fp := FindingProc{PID: p.PID, Labels: Host}
		// An exited process stays in the table for a few windows: the
		// one a crash finding names is still there.
		if in, ok := a.procs.Get(p.PID); ok {
			fp.Comm = in.Comm
		}
		if c := a.lc.Container(p.PID, p.Cgroup); c.ID != "" {
			fp.ContainerID = c.ID
			fp.Labels, _ = a.names(p.PID, p.Cgroup)
		}
		ps = append(ps, fp)
	}
	a.otlp.Send(FindingRecord(f, ps, len(procs), time.Now()))
}

// observe takes one live event (the event reader's goroutine).
func (a *liveDoctor) observe(e *event.Event) {
	a.win.Observe(e)
	a.rec.Add(e)
}

// run closes a window every a.every until ctx ends. p returns the probe
// loaded now (nil between loads).
func (a *liveDoctor) run(ctx context.Context, p func() *probe.Probe) {
	t := time.NewTicker(a.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.closeWindow(p(), [2]uint64{})
	}
}

// closeWindow ends the doctor's window; traced, if not zero, is when the
// per-syscall programs were attached during it (duty cycling).
func (a *liveDoctor) closeWindow(p *probe.Probe, traced [2]uint64) {
	var cells []stat.Cell
	var samples []doctor.CPUSample
	if p != nil {
		cells, _, _ = p.Stats()
		if s, _, err := p.Samples(); err == nil {
			samples = checkup.KernelSamples(s)
		}
	}
	a.auditWin.Store(a.audit.Cut(a.hz))
	now := time.Now()
	rep, news := a.win.Close(now, cells, samples, traced)
	// Exited processes are named in findings for a few windows, then
	// forgotten: the table would otherwise grow with every process the
	// host ever ran.
	if now, keep := host.Mono(), uint64(3*a.every); now > keep {
		a.procs.Prune(now - keep)
	}
	// The steal the next window's calls can ask about: theirs, and that
	// of a call that began up to a window before (a call is the window's
	// it ended in).
	if now, keep := host.Mono(), uint64(2*a.every); a.steal != nil && now > keep {
		a.steal.Trim(now - keep)
	}
	type capture struct{ id, ctr, reason string }
	var todo []capture
	for _, f := range news {
		a.log.Warn("finding", "id", f.ID, "severity", f.Severity.String(), "title", f.Title,
			"containers", labelNames(f.Labels), "first_seen", f.FirstSeen, "occurrences", f.Occurrences)
		if a.dir == nil {
			continue
		}
		for _, l := range f.Labels {
			if a.cool.Allow(string(f.ID)+"/"+l.Container, now) {
				todo = append(todo, capture{string(f.ID), l.Container, "finding " + string(f.ID) + ": " + f.Title})
			}
		}
	}
	if len(todo) > 0 {
		a.saving.Add(1)
		go func() {
			defer a.saving.Done()
			for _, c := range todo {
				if _, err := a.save(now, c.id, c.ctr, c.reason); err != nil {
					a.log.Error("writing a flight capture failed", "finding", c.id, "error", err.Error())
				}
			}
		}()
	}
	if rep.Drops > 0 {
		a.log.Warn("events lost in the last window", "drops", rep.Drops)
	}
}

func labelNames(ls []Labels) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Container
	}
	return out
}

// save writes the flight recorder's events into the capture directory.
func (a *liveDoctor) save(at time.Time, finding, ctr, reason string) (flight.Entry, error) {
	a.snapMu.Lock()
	defer a.snapMu.Unlock()
	e, sum, err := a.dir.Save(a.rec, a.header(), at, finding, ctr, reason)
	if err != nil {
		return e, err
	}
	a.log.Info("wrote a flight capture", "name", e.Name, "bytes", e.Size, "events", sum.Events, "reason", reason)
	return e, nil
}

// header describes the host for a capture, as record does, with the
// processes known now (those that exited recently included). The agent's
// doctor traces with sleeps and kernel stacks on, at the probe's default
// threshold (go).
func (a *liveDoctor) header() *capture.Header {
	return session.Header(a.arch, a.procs.All(), a.lc.Snapshot(), true, true, uint64(event.DefaultSlow))
}

// flightCaptures serves the flight recorder to the HTTP API.
type flightCaptures struct{ a *liveDoctor }

func (c flightCaptures) List() ([]flight.Entry, error)      { return c.a.dir.List() }
func (c flightCaptures) Open(name string) (*os.File, error) { return c.a.dir.Open(name) }
func (c flightCaptures) Snapshot(reason string) (flight.Entry, error) {
	return c.a.save(time.Now(), "snapshot", strings.ReplaceAll(reason, " ", "-"), reason)
}
