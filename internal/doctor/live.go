package doctor

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sysray/sysray/internal/audit"
	"github.com/sysray/sysray/internal/container"
	"github.com/sysray/sysray/internal/event"
	hostfacts "github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/probe"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/profile"
	"github.com/sysray/sysray/internal/session"
	"github.com/sysray/sysray/internal/stat"
	"github.com/sysray/sysray/internal/symbol"
)

// Live diagnoses a live run of what sel selects; args is a command to run,
// whose stdout goes to cmdOut (nil: sysray's). It returns the report and
// the command's exit code.
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
func Live(sel *session.Selection, args []string, cmdOut io.Writer) (*Report, int, error) {
	first, auditErr := audit.GetStatus()
	hz := hostfacts.HZ()
	guard := &auditGuard{first: first, hz: hz, warn: os.Stderr}
	frugal := guard.frugal()
	if !guard.begin() && frugal {
		// A second look soon, while the probe loads.
		go func() {
			time.Sleep(150 * time.Millisecond)
			if now, err := audit.GetStatus(); err == nil {
				guard.check(now)
			}
		}()
	}

	// Needed once events come (symbols) or at the report: read in the
	// background, at once or, while audit is on, once tracing has started.
	vsys, oom := make(chan string, 1), make(chan uint64, 1)
	readFacts := sync.OnceFunc(func() {
		go symbol.LoadKernel()
		go func() { vsys <- hostfacts.VsyscallMode() }()
		go func() { oom <- hostfacts.OOMKills() }()
	})
	if !frugal {
		readFacts()
	}
	vsyscallMode := sync.OnceValue(func() string { return <-vsys })
	oomAtStart := sync.OnceValue(func() uint64 { return <-oom })

	var ctrs *session.Live
	if len(sel.Containers) > 0 {
		// --container is resolved against the table before tracing.
		ctrs = session.NewLive()
		defer ctrs.Close()
	}
	opts, flt, err := sel.Build(args, ctrs)
	if err != nil {
		return nil, 0, err
	}
	// The container table, learnt in the background: it reads every
	// process's cgroup. Made once tracing is on, on a host that is not sick.
	var late *session.Late
	var ctrsIf session.Containers
	if ctrs != nil {
		ctrsIf = ctrs
	} else {
		late = session.NewLate()
		defer late.Close()
		ctrsIf = late
		if !frugal {
			late.Start()
		}
	}
	arch := event.HostArch()
	sess := session.New(arch, proc.NewTable(nil), ctrsIf, flt)
	_, kernel := hostfacts.Uname()

	var (
		window  *audit.Window
		running atomic.Pointer[probe.Probe]
	)
	if auditErr != nil {
		first = nil
	}
	watch := audit.NewWatcher(first, hostfacts.Mono, func() []audit.Sleeper { return AuditSleepers(running.Load()) })
	if !frugal {
		watch.Run(time.Second)
	}
	// Sick: the status said so, or, when it cannot be read, the watch
	// found tasks asleep in audit_log_start at its last look.
	sick := func() bool { return guard.sick.Load() || auditErr != nil && watch.Stalling() }
	stopWatch := sync.OnceFunc(func() {
		// The last status read answers at once; the daemon's files may
		// still be on their way on a sick host.
		wait := 1500 * time.Millisecond
		if sick() {
			wait = 500 * time.Millisecond
		}
		window = watch.Stop(wait)
		window.HZ = hz
		if auditErr != nil && window.Err == "" {
			window.Err = auditErr.Error()
		}
	})
	defer stopWatch()

	var series *Series // the kernel's counts over time, without a filter
	newDoctor := sync.OnceValue(func() *Doctor {
		var oomRead atomic.Bool
		d := New(Host{Arch: arch, Kernel: kernel, VsyscallMode: vsyscallMode(), Live: true, Slow: uint64(sel.Slow),
			Container: func(pid uint32, cg uint64) string { return session.Describe(ctrsIf.Container(pid, cg)) },
			// The count at the start, read in the background; then the
			// count now.
			OOMKills: func() uint64 {
				if !oomRead.Swap(true) {
					return oomAtStart()
				}
				return hostfacts.OOMKills()
			},
			Audit: func() *AuditWindow { return window },
			// Reading /proc or /sys on a sick host waits with everyone else.
			ReadsStall: sick,
			Libc:       Libc}, sess.Procs)
		d.ProcsKeptByCaller()
		if series != nil {
			// From the start, so that the processes the doctor forgets
			// leave the series too.
			d.Series(series)
		}
		return d
	})
	opts.Stdout = cmdOut
	opts.Probe.SlowOpens = frugal
	// No detector reads a waker's stack or a slow call's user stack, nor
	// where a call that waits by design briefly waited.
	opts.Probe.LeanStacks = true
	opts.Probe.WaitCalls = WaitCalls(arch)
	// Futex waits and wakes summed by address, for lock-convoy: a
	// contended lock's waits are microseconds, under any slow bar.
	opts.Probe.Futex = true
	// Waits for a CPU, for cpu-wait (detect_cpuwait.go).
	opts.Probe.RunQueue = true
	opts.UserFrames = func() bool { return !sick() }
	opts.Started = func(p *probe.Probe) error {
		running.Store(p)
		if auditErr != nil {
			// The status cannot be read (no CAP_AUDIT_CONTROL): the one
			// early sign of a sick host is a task asleep for room in
			// the backlog, which the probe can now look for.
			go func() {
				if s := AuditSleepers(p); len(s) > 0 {
					guard.asleep(len(s), auditErr)
				}
			}()
		}
		if frugal {
			// Did the backlog fill, or tasks wait for room in it, while
			// sysray started? (The backlog goes up and down around its
			// limit while full: one read can miss it.)
			if now, err := audit.GetStatus(); err == nil {
				watch.Record(now)
				guard.check(now)
			}
			readFacts()
			// The status every few seconds on a sick host: each request
			// makes the kernel put its sender to sleep.
			every := time.Second
			if guard.sick.Load() {
				every = 3 * time.Second
			}
			watch.Run(every)
		}
		if !guard.sick.Load() {
			// Processes that were running before, named by their command
			// line in the report. Not on a sick host: that is an open per
			// process, each waiting and adding to the backlog.
			go session.AddRunning(sess.Procs)
			if late != nil {
				late.Start()
			}
		}
		return nil
	}
	// The kernel counts every syscall; only failures, the call after one,
	// slow calls and one in 64 others (at most one a millisecond per
	// thread) cross over as events. That keeps the doctor's cost near
	// stat's while every detector gets what it needs.
	var ended *stat.Ended // lets go of ended processes' counts (stat/ended.go)
	if flt == nil {
		opts.Probe.Stat = true
		opts.Probe.Sample = 64
		opts.Probe.SampleGap = uint64(time.Millisecond)
		opts.Probe.Firsts = true
		// Budgeted timing, as stat and the agent's doctor time calls: the
		// clock for a thread's first calls of each syscall in each tick,
		// 1 in 16 after that (docs/doctor-internals.md). So a syscall a process makes
		// now and then is timed exactly, however long it runs on the CPU.
		opts.Probe.UseBudget()
		series = NewSeries()
		ended = stat.NewEnded(stat.Settle)
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
			if sampling, err = p.StartSampling(SampleHz); err != nil {
				fmt.Fprintf(os.Stderr, "sysray: on-CPU stacks are off: %v\n", err)
			}
			go readSeries(p.Stats, p.ForgetCells, ended, series, seriesEvery, stop, done)
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
					d.OnCPU(KernelSamples(samples))
				}
			}
			cells, lost, err := p.Stats()
			if err == nil {
				series.Add(hostfacts.Mono(), cells)
				d.Counts(attributed(ended.Merge(cells)))
				d.Uncounted(lost)
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
		if ended != nil && e.Kind == event.KindExit && e.Proc.GroupDead {
			ended.End(e.PID, hostfacts.Mono())
		}
		if sess.Pass(e) {
			newDoctor().Observe(e)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	stopWatch()
	session.ReportDrops(os.Stderr, res)
	return newDoctor().Report(), res.ExitCode, nil
}

// auditGuard decides from the audit status, read at the start and again
// later, whether the host is sick: its backlog full or filling, or tasks
// waiting for room in it. It says so on warn once, as a first finding.
type auditGuard struct {
	first        *audit.Status // nil: audit could not be read
	hz           int
	warn         io.Writer
	sick, warned atomic.Bool
}

// frugal says audit is on with a backlog limit: then every open may wait
// behind the audit daemon, and the doctor reads nothing it can put off
// until tracing has started.
func (g *auditGuard) frugal() bool {
	return g.first != nil && g.first.Enabled != 0 && g.first.BacklogLimit > 0
}

// begin judges the first status read; it says whether the host is sick
// already.
func (g *auditGuard) begin() bool {
	if !filling(g.first) {
		return false
	}
	g.sick.Store(true)
	g.warned.Store(true)
	warnAuditFull(g.warn, g.first, 0, g.hz)
	return true
}

// check judges a later status read. The backlog goes up and down around
// its limit while full (kauditd empties it, the callers fill it again), so
// one read can miss it, but not the waits it caused.
func (g *auditGuard) check(now *audit.Status) {
	if g.first == nil || now == nil {
		return
	}
	waited := now.BacklogWaitTimeActual - g.first.BacklogWaitTimeActual
	if filling(now) || waited != 0 || now.Lost != g.first.Lost {
		g.sick.Store(true)
		if !g.warned.Swap(true) {
			warnAuditFull(g.warn, now, time.Duration(waited)*time.Second/time.Duration(max(g.hz, 1)), g.hz)
		}
	}
}

// asleep judges a look at the tasks when the status could not be read:
// n tasks were asleep in audit_log_start, so the backlog is full.
func (g *auditGuard) asleep(n int, why error) {
	g.sick.Store(true)
	if !g.warned.Swap(true) {
		fmt.Fprintf(g.warn, "sysray: CRITICAL [audit-backlog-stall] %d tasks are asleep in audit_log_start, waiting for room in "+
			"the full audit backlog: every audited syscall on this host waits while it is full (sysray's own too: it may "+
			"run slowly). The audit status could not be read (%v); the report follows.\n", n, why)
	}
}

// filling says the audit backlog is at least half full. A daemon that keeps
// up holds it near empty; past half, it is full or about to be, and every
// open sysray makes may wait and adds to it. (It goes up and down around
// its limit while full: kauditd empties it, the callers fill it again.)
func filling(st *audit.Status) bool {
	return st != nil && st.Enabled != 0 && st.BacklogLimit > 0 && 2*st.Backlog >= st.BacklogLimit
}

// warnAuditFull says on w that the audit backlog is full, as a first
// finding: a user who runs the doctor because the host is slow learns why at
// once, before the doctor's own audited calls wait too (the report, with
// the counters over the run, follows). waited, if not 0, is how long tasks
// waited for room in it while sysray started. The daemon is named by its
// pid: its name would cost an open (the report names it).
func warnAuditFull(w io.Writer, st *audit.Status, waited time.Duration, hz int) {
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
	fmt.Fprintf(w, "sysray: CRITICAL [audit-backlog-stall] the audit backlog is %s: backlog %d, limit %d, lost %d, "+
		"backlog_wait_time %d jiffies%s; %s. Every audited syscall on this host waits in audit_log_start while it is full "+
		"(sysray's own too: it may start slowly); the report follows.\n",
		state, st.Backlog, st.BacklogLimit, st.Lost, st.BacklogWaitTime, waitText(st.BacklogWaitTime, hz), daemon)
}

func waitText(jiffies uint32, hz int) string {
	if hz > 0 {
		return " (" + (time.Duration(jiffies) * time.Second / time.Duration(hz)).String() + ")"
	}
	return ""
}

// attributed drops the cells of ended processes summed under pid 0 past
// stat.KeptMax: every detector that counts does so per process, and
// would take them for one.
func attributed(cells []stat.Cell) []stat.Cell {
	out := cells[:0:0]
	for _, c := range cells {
		if c.PID != 0 {
			out = append(out, c)
		}
	}
	return out
}

// seriesEvery is how often the live doctor reads the kernel's counts.
const seriesEvery = 250 * time.Millisecond

// readSeries adds the kernel's counts (stats, a probe's Stats) to s at
// once and then every every, until stop closes; it closes done when it
// returns. With pr, the cells of processes that ended go from the kernel
// (forget, a probe's ForgetCells) once read, and pr keeps their counts.
func readSeries(stats func() ([]stat.Cell, stat.Lost, error), forget func([]stat.Cell) ([]stat.Cell, error), pr *stat.Ended, s *Series, every time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		began := hostfacts.Mono() // when the read began (stat.Ended.Due)
		if cells, _, err := stats(); err == nil {
			s.Add(hostfacts.Mono(), cells)
			// Nothing goes without pr (LetGo, as Due, is nil-safe).
			gone, _ := pr.LetGo(cells, began, forget)
			s.restart(gone)
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// KernelSamples names the kernel frames of on-CPU samples; nil when the
// kernel's symbols cannot be read.
func KernelSamples(samples []probe.Sample) []CPUSample {
	kernel, err := symbol.LoadKernel()
	if err != nil {
		return nil
	}
	return kernelSamples(samples, func(a uint64) string { return live.FuncName(kernel.Resolve(a)) })
}

func kernelSamples(samples []probe.Sample, name func(addr uint64) string) []CPUSample {
	out := make([]CPUSample, 0, len(samples))
	for _, s := range samples {
		cs := CPUSample{PID: s.PID, Syscall: s.Syscall, Count: s.Count}
		for _, a := range s.Kernel {
			cs.Kernel = append(cs.Kernel, profile.Frame(name(a), a))
		}
		out = append(out, cs)
	}
	return out
}

// Libc names the C library of pid's container, "" when it cannot be read:
// Host.Libc on a live host.
func Libc(pid uint32) string {
	l, err := container.Libc(int(pid))
	if err != nil {
		return ""
	}
	return l.String()
}

// AuditSleepers lists the tasks asleep in audit_log_start, from the
// kernel's list of tasks in uninterruptible sleep (nil until the probe
// runs).
func AuditSleepers(p *probe.Probe) []audit.Sleeper {
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
	return sleepersIn(tasks, event.HostArch(), kernel.Resolve)
}

// sleepersIn keeps the tasks whose kernel stack passes through
// audit_log_start.
func sleepersIn(tasks []probe.Blocked, arch event.Arch, resolve func(uint64) symbol.Frame) []audit.Sleeper {
	var out []audit.Sleeper
	for _, t := range tasks {
		var frames []string
		in := false
		for _, a := range t.Kernel {
			f := resolve(a)
			in = in || f.Func == "audit_log_start"
			frames = append(frames, profile.Frame(live.FrameName(f), a))
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
