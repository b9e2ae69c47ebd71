package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/audit"
	"github.com/sysray/sysray/internal/container"
	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/filter"
	"github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/probe"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/report"
	"github.com/sysray/sysray/internal/symbol"
)

func newDoctor() *cobra.Command {
	var sel selection
	var file, outPath string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor [flags] [-- COMMAND [ARG...]]",
		Short: "Find what went wrong between programs and the kernel, explain it, and say how to fix it",
		Example: `  sysray doctor -- ./server
  sysray doctor --duration 30s
  sysray doctor -r capture.sysray --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var rep *doctor.Report
			code := 0
			var err error
			if file != "" {
				if len(args) > 0 {
					return errors.New("doctor -r reads a capture; it does not run a command")
				}
				rep, err = doctorFile(file)
			} else {
				rep, code, err = doctorLive(&sel, args, nil)
			}
			if err != nil {
				return err
			}
			out, closeOut, err := openOutput(outPath)
			if err != nil {
				return err
			}
			defer closeOut()
			if asJSON {
				err = report.JSON(out, rep)
			} else {
				err = report.Text(out, rep)
			}
			if err != nil {
				return err
			}
			if code != 0 {
				return &exitError{code}
			}
			return nil
		},
	}
	sel.register(cmd)
	durationHelp(cmd)
	cmd.Flags().StringVarP(&file, "read", "r", "", "diagnose a capture file instead of tracing live")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document (docs/doctor.md)")
	cmd.Flags().StringVarP(&outPath, "output", "o", "", "write the report to this file instead of stdout")
	// The doctor needs where slow syscalls slept.
	cmd.Flags().Lookup("stacks").DefValue = "true"
	sel.stacks = true
	return cmd
}

// doctorLive diagnoses a live run; the command's stdout goes to cmdOut (nil: sysray's).
//
// The doctor must work on the host it is asked to diagnose, sick or not. So
// before anything that can wait it reads the audit status over netlink, and
// says at once on stderr when the backlog is full: then every audited call
// waits, sysray's own opens too. While audit is on, nothing is read in the
// background until tracing has started (opens that wait at the same time
// wait for each other's turn: the kernel wakes one waiter each time it
// empties the backlog, and the opens that load the probe come first). Once
// it has, a second status read tells whether the backlog was full or tasks
// waited meanwhile; if so the host is sick, and the doctor reads only what
// the report needs: no process or container tables, no user symbols.
func doctorLive(sel *selection, args []string, cmdOut io.Writer) (*doctor.Report, int, error) {
	first, auditErr := audit.GetStatus()
	hz := host.HZ()
	var sick, warned atomic.Bool
	// sickNow decides from a later status read: the backlog goes up and
	// down around its limit while full (kauditd empties it, the callers
	// fill it again), so one read can miss it, but not the waits it caused.
	sickNow := func(now *audit.Status) {
		if first == nil || now == nil {
			return
		}
		waited := now.BacklogWaitTimeActual - first.BacklogWaitTimeActual
		if filling(now) || waited != 0 || now.Lost != first.Lost {
			sick.Store(true)
			if !warned.Swap(true) {
				warnAuditFull(now, time.Duration(waited)*time.Second/time.Duration(max(hz, 1)))
			}
		}
	}
	frugal := first != nil && first.Enabled != 0 && first.BacklogLimit > 0
	if filling(first) {
		sick.Store(true)
		warned.Store(true)
		warnAuditFull(first, 0)
	} else if frugal {
		// A second look soon, while the probe loads.
		go func() {
			time.Sleep(150 * time.Millisecond)
			if now, err := audit.GetStatus(); err == nil {
				sickNow(now)
			}
		}()
	}

	// Needed once events come (symbols) or at the report: read in the
	// background, at once or, while audit is on, once tracing has started.
	vsys, oom := make(chan string, 1), make(chan uint64, 1)
	readFacts := sync.OnceFunc(func() {
		go symbol.LoadKernel()
		go func() { vsys <- host.VsyscallMode() }()
		go func() { oom <- host.OOMKills() }()
	})
	if !frugal {
		readFacts()
	}
	vsyscallMode := sync.OnceValue(func() string { return <-vsys })
	oomAtStart := sync.OnceValue(func() uint64 { return <-oom })

	var ctrs *liveContainers
	if len(sel.container) > 0 {
		// --container is resolved against the table before tracing.
		ctrs = newLiveContainers()
		defer ctrs.Close()
	}
	opts, flt, err := sel.build(args, ctrs)
	if err != nil {
		return nil, 0, err
	}
	// The container table, learnt in the background: it reads every
	// process's cgroup. Made once tracing is on, on a host that is not sick.
	var late *lateContainers
	var ctrsIf containers
	if ctrs != nil {
		ctrsIf = ctrs
	} else {
		late = newLateContainers()
		defer late.Close()
		ctrsIf = late
		if !frugal {
			late.start()
		}
	}
	arch := event.HostArch()
	procs := proc.NewTable(nil)
	_, kernel := host.Uname()

	var (
		window  *audit.Window
		running atomic.Pointer[probe.Probe]
	)
	if auditErr != nil {
		first = nil
	}
	watch := audit.NewWatcher(first, host.Mono, func() []audit.Sleeper { return auditSleepers(running.Load()) })
	if !frugal {
		watch.Run(time.Second)
	}
	stopWatch := sync.OnceFunc(func() {
		// The last status read answers at once; the daemon's files may
		// still be on their way on a sick host.
		wait := 1500 * time.Millisecond
		if sick.Load() {
			wait = 500 * time.Millisecond
		}
		window = watch.Stop(wait)
		window.HZ = hz
		if auditErr != nil && window.Err == "" {
			window.Err = auditErr.Error()
		}
	})
	defer stopWatch()

	newDoctor := sync.OnceValue(func() *doctor.Doctor {
		var oomRead atomic.Bool
		return doctor.New(doctor.Host{Arch: arch, Kernel: kernel, VsyscallMode: vsyscallMode(), Live: true,
			Container: func(pid uint32, cg uint64) string {
				if ctrsIf == nil {
					return ""
				}
				return describe(ctrsIf.Container(pid, cg))
			},
			// The count at the start, read in the background; then the
			// count now.
			OOMKills: func() uint64 {
				if !oomRead.Swap(true) {
					return oomAtStart()
				}
				return host.OOMKills()
			},
			Audit: func() *doctor.AuditWindow { return window },
			// Reading /proc or /sys on a sick host waits with everyone else.
			ReadsStall: sick.Load,
			Libc: func(pid uint32) string {
				l, err := container.Libc(int(pid))
				if err != nil {
					return ""
				}
				return l.String()
			}}, procs)
	})
	envv := env{arch: arch, procs: procs, ctrs: ctrsIf}
	opts.Stdout = cmdOut
	opts.Probe.SlowOpens = frugal
	opts.UserFrames = func() bool { return !sick.Load() }
	opts.Started = func(p *probe.Probe) error {
		running.Store(p)
		if frugal {
			// Did the backlog fill, or tasks wait for room in it, while
			// sysray started? (The backlog goes up and down around its
			// limit while full: one read can miss it.)
			if now, err := audit.GetStatus(); err == nil {
				watch.Record(now)
				sickNow(now)
			}
			readFacts()
			// The status every few seconds on a sick host: each request
			// makes the kernel put its sender to sleep.
			every := time.Second
			if sick.Load() {
				every = 3 * time.Second
			}
			watch.Run(every)
		}
		if !sick.Load() {
			// Processes that were running before, named by their command
			// line in the report. Not on a sick host: that is an open per
			// process, each waiting and adding to the backlog.
			go snapshotProcs(procs)
			if late != nil {
				late.start()
			}
		}
		return nil
	}
	// The kernel counts every syscall; only failures, the call after one,
	// slow calls and one in 64 others (at most one a millisecond per
	// thread) cross over as events. That keeps the doctor's cost near
	// stat's while every detector gets what it needs.
	if flt == nil {
		opts.Probe.Stat = true
		opts.Probe.Sample = 64
		opts.Probe.SampleGap = uint64(time.Millisecond)
		if hz > 0 {
			// Lean timing: the clock for one call in 64 and for the calls
			// that sleep, jiffies for the rest (docs/doctor.md).
			opts.Probe.TickNS = uint64(time.Second) / uint64(hz)
		}
		series := doctor.NewSeries()
		var (
			sampling *probe.Sampling
			stop     = make(chan struct{})
			done     = make(chan struct{})
		)
		started := opts.Started
		opts.Started = func(p *probe.Probe) error {
			// Where the CPUs are, for the contention detectors: the sampler
			// costs microseconds per sample, not per syscall.
			var err error
			if sampling, err = p.StartSampling(doctorHz); err != nil {
				fmt.Fprintf(os.Stderr, "sysray: on-CPU stacks are off: %v\n", err)
			}
			go readSeries(p, series, stop, done)
			return started(p)
		}
		opts.Finished = func(p *probe.Probe) error {
			close(stop)
			<-done
			stopWatch()
			d := newDoctor()
			if sampling != nil {
				sampling.Close()
				if samples, _, err := p.Samples(); err == nil {
					d.OnCPU(kernelSamples(samples))
				}
			}
			cells, _, err := p.Stats()
			if err == nil {
				series.Add(host.Mono(), cells)
				d.Counts(cells)
				d.Series(series)
			}
			return err
		}
	} else {
		opts.Finished = func(p *probe.Probe) error {
			stopWatch()
			return nil
		}
	}
	res, err := live.Run(opts, func(e *event.Event) error {
		if o, ok := ctrsIf.(interface{ observe(*event.Event) }); ok {
			o.observe(e)
		}
		if flt != nil && e.Kind != event.KindDrop && !flt.Match(e, envv) {
			procs.Update(e)
			return nil
		}
		newDoctor().Observe(e)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	stopWatch()
	reportDrops(res)
	return newDoctor().Report(), res.ExitCode, nil
}

// filling says the audit backlog is at least half full. A daemon that keeps
// up holds it near empty; past half, it is full or about to be, and every
// open sysray makes may wait and adds to it. (It goes up and down around
// its limit while full: kauditd empties it, the callers fill it again.)
func filling(st *audit.Status) bool {
	return st != nil && st.Enabled != 0 && st.BacklogLimit > 0 && 2*st.Backlog >= st.BacklogLimit
}

// lateContainers is the container table, made in the background: even
// making it reads a file, and on a host whose audit backlog is full every
// open waits. Exec events seen before it is ready are handed to it then.
type lateContainers struct {
	mu      sync.Mutex
	l       *liveContainers
	early   []event.Event
	ready   chan struct{}
	waited  sync.Once
	started sync.Once
	began   atomic.Bool
	closed  bool
}

func newLateContainers() *lateContainers {
	return &lateContainers{ready: make(chan struct{})}
}

// start makes the table in the background. Until then (or if never) the
// container of a process is unknown.
func (c *lateContainers) start() {
	c.started.Do(func() {
		c.began.Store(true)
		go c.make()
	})
}

func (c *lateContainers) make() {
	l := &liveContainers{t: container.NewTable(container.Options{}), seen: map[uint64]container.Ref{}}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		l.Close()
		return
	}
	c.l = l
	for i := range c.early {
		l.observe(&c.early[i])
	}
	c.early = nil
	close(c.ready)
}

func (c *lateContainers) observe(e *event.Event) {
	if e.Kind != event.KindExec {
		return
	}
	c.mu.Lock()
	l := c.l
	if l == nil && len(c.early) < 4096 {
		c.early = append(c.early, event.Event{Kind: e.Kind, PID: e.PID, Cgroup: e.Cgroup,
			Proc: event.Proc{CgroupPath: e.Proc.CgroupPath}})
	}
	c.mu.Unlock()
	if l != nil {
		l.observe(e)
	}
}

// Container waits for the table a little, the first time (at the report).
func (c *lateContainers) Container(pid uint32, cg uint64) filter.Container {
	c.waited.Do(func() {
		if !c.began.Load() {
			return // never made: the host was sick
		}
		select {
		case <-c.ready:
		case <-time.After(time.Second):
		}
	})
	c.mu.Lock()
	l := c.l
	c.mu.Unlock()
	if l == nil {
		return filter.Container{}
	}
	return l.Container(pid, cg)
}

func (c *lateContainers) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.l != nil {
		c.l.Close()
	}
}

// warnAuditFull says on stderr that the audit backlog is full, as a first
// finding: a user who runs the doctor because the host is slow learns why at
// once, before the doctor's own audited calls wait too (the report, with
// the counters over the run, follows). waited, if not 0, is how long tasks
// waited for room in it while sysray started. The daemon is named by its
// pid: its name would cost an open (the report names it).
func warnAuditFull(st *audit.Status, waited time.Duration) {
	state := "full"
	if !st.Full() {
		state = "filling up"
	}
	if waited > 0 {
		state += fmt.Sprintf(", tasks waited %s for room in it while sysray started", waited)
	}
	daemon := "no audit daemon is registered"
	if st.PID != 0 {
		daemon = fmt.Sprintf("the registered audit daemon, pid %d, is not draining it", st.PID)
	}
	fmt.Fprintf(os.Stderr, "sysray: CRITICAL [audit-backlog-stall] the audit backlog is %s: backlog %d, limit %d, lost %d, "+
		"backlog_wait_time %d jiffies%s; %s. Every audited syscall on this host waits in audit_log_start while it is full "+
		"(sysray's own too: it may start slowly); the report follows.\n",
		state, st.Backlog, st.BacklogLimit, st.Lost, st.BacklogWaitTime, waitText(st.BacklogWaitTime), daemon)
}

func waitText(jiffies uint32) string {
	if hz := host.HZ(); hz > 0 {
		return " (" + (time.Duration(jiffies) * time.Second / time.Duration(hz)).String() + ")"
	}
	return ""
}

// snapshotProcs adds the processes already running to the table, unless
// events told of them first.
func snapshotProcs(t *proc.Table) {
	snap, _ := proc.Snapshot()
	for _, p := range snap {
		if _, ok := t.Get(p.PID); ok {
			continue
		}
		t.Update(&event.Event{Kind: event.KindExec, PID: p.PID, TID: p.PID, Comm: p.Comm, Cgroup: p.Cgroup,
			Proc: event.Proc{Filename: p.Exe, Argv: p.Cmdline}})
	}
}

// describe names a container for a report: "web (image, pod ns/pod)".
func describe(c filter.Container) string {
	if c.ID == "" {
		return ""
	}
	s := c.Name
	if s == "" {
		s = c.ID
		if len(s) > 12 {
			s = s[:12]
		}
	}
	var more []string
	if c.Image != "" {
		more = append(more, "image "+c.Image)
	}
	if c.PodName != "" {
		more = append(more, "pod "+c.PodNamespace+"/"+c.PodName)
	}
	if len(more) > 0 {
		s += " (" + strings.Join(more, ", ") + ")"
	}
	return s
}

func doctorFile(path string) (*doctor.Report, error) {
	c, err := openCapture(path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	h := c.h
	hostFacts := doctor.Host{Arch: h.Arch, Kernel: h.Meta["kernel"], VsyscallMode: h.Meta["vsyscall_mode"], Meta: h.Meta}
	if hostFacts.Kernel == "" {
		hostFacts.Kernel = h.Kernel
	}
	hostFacts.Container = func(pid uint32, cg uint64) string { return describe(c.ctrs.Container(pid, cg)) }
	d := doctor.New(hostFacts, c.procs)
	if _, err := c.each(func(e *event.Event) error { d.Observe(e); return nil }); err != nil {
		return nil, err
	}
	return d.Report(), nil
}

// doctorHz samples the CPUs often enough to see a kernel path that takes a
// tenth of a CPU within a few seconds.
const doctorHz = 199

// seriesEvery is how often the doctor reads the kernel's counts.
const seriesEvery = 250 * time.Millisecond

// readSeries reads the kernel's counts every seriesEvery until stop closes.
func readSeries(p *probe.Probe, s *doctor.Series, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(seriesEvery)
	defer t.Stop()
	for {
		if cells, _, err := p.Stats(); err == nil {
			s.Add(host.Mono(), cells)
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// kernelSamples names the kernel frames of on-CPU samples.
func kernelSamples(samples []probe.Sample) []doctor.CPUSample {
	kernel, err := symbol.LoadKernel()
	if err != nil {
		return nil
	}
	out := make([]doctor.CPUSample, 0, len(samples))
	for _, s := range samples {
		cs := doctor.CPUSample{PID: s.PID, Syscall: s.Syscall, Count: s.Count}
		for _, a := range s.Kernel {
			cs.Kernel = append(cs.Kernel, name(live.FuncName(kernel.Resolve(a)), a))
		}
		out = append(out, cs)
	}
	return out
}

// auditSleepers lists the tasks asleep in audit_log_start, from the
// kernel's list of tasks in uninterruptible sleep (nil until the probe
// runs).
func auditSleepers(p *probe.Probe) []audit.Sleeper {
	if p == nil {
		return nil
	}
	tasks, err := p.Blocked()
	if err != nil || len(tasks) == 0 {
		return nil
	}
	kernel, err := symbol.LoadKernel()
	if err != nil {
		return nil
	}
	arch := event.HostArch()
	var out []audit.Sleeper
	for _, t := range tasks {
		var frames []string
		in := false
		for _, a := range t.Kernel {
			f := kernel.Resolve(a)
			in = in || f.Func == "audit_log_start"
			frames = append(frames, name(live.FrameName(f), a))
		}
		if !in {
			continue
		}
		s := audit.Sleeper{PID: t.PID, TID: t.TID, Comm: t.Comm, Stack: frames}
		if t.Syscall >= 0 {
			s.Syscall = event.SyscallName(arch, uint32(t.Syscall))
		}
		out = append(out, s)
	}
	return out
}
