package checkup

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sysray/sysray/internal/audit"
	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/event"
	hostfacts "github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/probe"
	"github.com/sysray/sysray/internal/proc"
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
func Live(sel *session.Selection, args []string, cmdOut io.Writer) (*doctor.Report, int, error) {
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
	epoch := make(chan *proc.CgroupEpoch, 1)
	epochTaken := make(chan struct{})
	readFacts := sync.OnceFunc(func() {
		go symbol.LoadKernel()
		go func() { vsys <- hostfacts.VsyscallMode() }()
		go func() { oom <- hostfacts.OOMKills() }()
		// Taken while the probe loads, or once tracing has started on a
		// sick host: a cgroup made in between counts as older than the
		// trace, its counters read from the doctor's first look.
		go func() { epoch <- proc.TakeCgroupEpoch(); close(epochTaken) }()
	})
	if !frugal {
		readFacts()
	}
	vsyscallMode := sync.OnceValue(func() string { return <-vsys })
	oomAtStart := sync.OnceValue(func() uint64 { return <-oom })
	cgroupEpoch := sync.OnceValue(func() *proc.CgroupEpoch { return <-epoch })

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

	var series *doctor.Series // the kernel's counts over time, without a filter
	newDoctor := sync.OnceValue(func() *doctor.Doctor {
		var oomRead atomic.Bool
		d := doctor.New(doctor.Host{Arch: arch, Kernel: kernel, VsyscallMode: vsyscallMode(), Live: true, Slow: uint64(sel.Slow),
			Container: session.Describer(ctrsIf),
			// The count at the start, read in the background; then the
			// count now.
			OOMKills: func() uint64 {
				if !oomRead.Swap(true) {
					return oomAtStart()
				}
				return hostfacts.OOMKills()
			},
			Audit: func() *doctor.AuditWindow { return window },
			// Reading /proc or /sys on a sick host waits with everyone else.
			ReadsStall: sick,
			CgroupBorn: func(cg string) bool { return cgroupEpoch().Newer(cg) },
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
	mode := Filtered
	if flt == nil {
		mode = Command
	}
	Configure(&opts.Probe, arch, mode)
	opts.Probe.SlowOpens = frugal
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
		// The command starts when this returns. A memory cgroup it makes
		// must number above the epoch's walk, or its counters count from
		// the doctor's first look rather than from zero (page-cache-thrash's
		// refaults). With audit on the walk begins just above, and a
		// command that makes its cgroup at once could race it. The walk
		// takes milliseconds; on a sick host its opens may wait, and the
		// command does not wait long for it.
		select {
		case <-epochTaken:
		case <-time.After(250 * time.Millisecond):
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
	var drain *stat.Drain // lets go of ended processes' counts (stat/drain.go)
	if mode == Command {
		drain = stat.NewDrain(stat.Settle, true, hostfacts.Mono)
		series = doctor.NewSeries()
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
			if sampling, err = p.StartSampling(doctor.SampleHz); err != nil {
				fmt.Fprintf(os.Stderr, "sysray: on-CPU stacks are off: %v\n", err)
			}
			go drain.Run(p, seriesEvery, stop, done, func(r stat.Read) {
				series.Add(hostfacts.Mono(), r.Cells)
				series.Restart(r.Gone)
			})
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
			last, whole, err := drain.Last(p)
			if err == nil {
				series.Add(hostfacts.Mono(), last.Cells)
				d.Counts(whole)
				d.Uncounted(last.Lost)
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
	steal := WatchSteal(sick, nil)
	defer steal.Stop()
	res, err := live.Run(opts, func(e *event.Event) error {
		if drain != nil && e.Kind == event.KindExit && e.Proc.GroupDead {
			drain.End(e.PID, hostfacts.Mono())
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
	newDoctor().Steal(steal.Stop())
	return newDoctor().Report(), res.ExitCode, nil
}

// seriesEvery is how often the live doctor reads the kernel's counts.
const seriesEvery = 250 * time.Millisecond
