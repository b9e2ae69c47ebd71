// Package live runs a probe for a command, a set of processes or the whole
// host, and hands every event to one consumer until the command exits, the
// time is up or the user interrupts.
package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/launch"
	"github.com/sysray/sysray/internal/probe"
	"github.com/sysray/sysray/internal/symbol"
)

// Options says what to trace and for how long.
type Options struct {
	Probe   probe.Config
	Command []string // run and follow this command; stop when it exits
	// Duration stops the run after this long (0: until interrupted or the
	// command exits). A command still running then is ended: SIGTERM, and
	// SIGKILL if it has not exited killGrace later or sysray is
	// interrupted meanwhile.
	Duration time.Duration
	// Warn receives problems that do not stop the run (missing features, drops).
	Warn func(string)
	// Started, if set, is called once tracing is on and before the command runs.
	Started func(p *probe.Probe) error
	// Finished, if set, is called after the last event, before the probe closes.
	Finished func(p *probe.Probe) error
	// Stop, if set, ends the run when closed.
	Stop <-chan struct{}
	// Abort, if set, ends the run at once with the error it yields: the
	// command is killed, and Run returns that error. An error from the
	// consumer does the same: sysray cannot report what it traces, and a
	// command it traces must not go on untraced without it.
	Abort <-chan error
	// Out, if set, is where the consumer writes. When it is a pipe whose
	// reader has gone (sysray trace | head), the run aborts with EPIPE
	// without waiting for an event to write, and a write to it fails
	// with EPIPE instead of killing sysray with SIGPIPE.
	Out *os.File
	// Stdout, if set, receives the command's standard output, so that it
	// does not mix with a report on sysray's.
	Stdout io.Writer
	// Symbols, if set, names user frames (with Probe.Stacks); the caller
	// keeps it, so Run does not forget processes that exit.
	Symbols *symbol.Resolver
	// UserFrames, if set, says whether to name user frames at all (asked
	// once tracing is on): naming them reads each process's maps and
	// binaries, which a host whose audit backlog is full makes wait.
	UserFrames func() bool
}

type namerResult struct {
	nm  *namer
	err error
}

// namerWait is how long a command waits for the kernel's symbols to be read.
const namerWait = 500 * time.Millisecond

// stillRunningAfter is how long a command may outlive the interrupt
// passed to it before sysray says it is still waiting and how to stop it:
// a command that ignores SIGINT would otherwise keep sysray running with
// no word.
const stillRunningAfter = 2 * time.Second

// killGrace is how long a command ended by the run's Duration has to exit
// after SIGTERM before it is killed: time to clean up (the scenarios undo
// what they changed to the host), as docker stop gives.
const killGrace = 10 * time.Second

// Result is how a run ended.
type Result struct {
	ExitCode int    // the command's status as a shell reports it; 0 without a command or when Duration ended it
	Drops    uint64 // events lost in the kernel, all CPUs
	PerCPU   []uint64
	Unseen   uint64 // sleeps whose end no program saw (Probe.Unseen)
}

// Run traces until done and calls fn for each event in time order.
func Run(opts Options, fn func(*event.Event) error) (Result, error) {
	var res Result
	warn := opts.Warn
	if warn == nil {
		warn = func(s string) { fmt.Fprintln(os.Stderr, "sysray: "+s) }
	}
	cfg := opts.Probe
	if len(opts.Command) > 0 {
		cfg.Launch = true
	}
	// Naming stack frames needs the kernel's symbols, which take a while to
	// read: read them while the probe loads, or with Probe.SlowOpens once it
	// has (opens that wait in parallel wait for each other's turn); then the
	// command does not wait for them.
	var names chan namerResult
	namerStarted := false
	startNamer := func() {
		namerStarted = true
		go func() {
			users := opts.UserFrames == nil || opts.UserFrames()
			nm, err := newNamer(opts.Symbols, users)
			names <- namerResult{nm, err}
		}()
	}
	if cfg.Stacks {
		names = make(chan namerResult, 1)
		if !cfg.SlowOpens {
			startNamer()
		}
	}
	p, err := probe.Open(cfg)
	if err != nil {
		if namerStarted {
			go func() {
				if r := <-names; r.nm != nil {
					r.nm.close()
				}
			}()
		}
		return res, err
	}
	if cfg.SlowOpens {
		// Unloading a BPF program is audited, which makes the close that
		// unloads it wait like an open while the audit backlog is full.
		// Tracing stops when Run detaches; the programs go when the
		// process exits, with no syscall left to wait.
		defer p.CloseMaps()
	} else {
		defer p.Close()
	}
	for _, w := range p.Warnings {
		warn(w)
	}
	if opts.Started != nil {
		if err := opts.Started(p); err != nil {
			return res, err
		}
	}
	if cfg.Stacks && cfg.SlowOpens {
		startNamer()
	}
	if len(opts.Command) == 0 && len(cfg.PIDs) > 0 {
		// As strace -p says: from here on nothing the processes do is missed.
		until := "stopping when it exits or on Ctrl-C"
		if len(cfg.PIDs) > 1 {
			until = "stopping when they have all exited or on Ctrl-C"
		}
		if cfg.Children {
			until = "and what they start; stopping on Ctrl-C"
		}
		warn(fmt.Sprintf("attached to pid %s; %s", pidList(cfg.PIDs), until))
	}

	// Ready before the command runs if it can be (events wait for it, and
	// a short-lived process's maps may be gone by then), but the command
	// does not wait long for it.
	consume := fn
	if cfg.Stacks {
		var nm *namer
		got := false
		take := func(r namerResult) {
			got, nm = true, r.nm
			if r.err != nil {
				warn("stack frames will not be named: " + r.err.Error())
			}
		}
		if !cfg.SlowOpens {
			select {
			case r := <-names:
				take(r)
			case <-time.After(namerWait):
			}
		}
		defer func() {
			if !got {
				take(<-names)
			}
			if nm != nil {
				nm.close()
			}
		}()
		var fw *fwFacts
		if cfg.FaultWait && !cfg.SlowOpens {
			fw = newFwFacts()
		}
		consume = func(e *event.Event) error {
			if !got {
				take(<-names)
			}
			if nm != nil {
				nm.name(e)
			}
			if fw != nil {
				fw.decorate(e)
			}
			return fn(e)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	// The first error of the consumer, the output or the caller ends the
	// run.
	failed := make(chan struct{})
	var failErr error
	var failOnce sync.Once
	// hasFailed is failed for the consumer, which checks it for every
	// event: a select on the channel there was 1% of record's CPU.
	var hasFailed atomic.Bool
	fail := func(err error) {
		failOnce.Do(func() { failErr = err; hasFailed.Store(true); close(failed) })
	}
	if len(opts.Command) > 0 || opts.Out != nil {
		// Go would end sysray with SIGPIPE on a write to a closed
		// stdout, in the middle of an event: the write fails with EPIPE
		// instead, and the run ends as on any error, the command killed
		// and what is written closed.
		pipe := make(chan os.Signal, 1)
		signal.Notify(pipe, syscall.SIGPIPE)
		defer signal.Stop(pipe)
	}
	if opts.Out != nil {
		go watchReader(ctx, opts.Out, fail)
	}
	if opts.Abort != nil {
		go func() {
			select {
			case err := <-opts.Abort:
				fail(err)
			case <-ctx.Done():
			}
		}()
	}
	inner := consume
	consume = func(e *event.Event) error {
		if hasFailed.Load() {
			return failErr // what is left after the cut goes nowhere
		}
		if err := inner(e); err != nil {
			fail(err)
			return err
		}
		return nil
	}

	var cmd *exec.Cmd
	done := make(chan struct{})
	timedOut := make(chan struct{}) // closed when the Duration ended a command's run
	// The signal whose second coming killed the command. sysray then
	// exits as a shell reports a program that signal ended (130 for
	// Ctrl-C), not with the command's SIGKILL, which sysray chose.
	var killedBy atomic.Int32
	if len(opts.Command) > 0 {
		cmd, err = startCommand(opts.Command, opts.Stdout, p)
		if err != nil {
			return res, err
		}
		go func() {
			cmd.Wait()
			close(done)
		}()
	}
	// Processes given by pid and not followed into their children end the
	// run when they have all exited.
	var gone <-chan struct{}
	if cmd == nil && len(cfg.PIDs) > 0 && !cfg.Children {
		gone = whenGone(cfg.PIDs, ctx.Done())
	}
	go func() {
		stop := opts.Stop
		var interrupted string     // the signal passed on to the command, once it has been
		var nudge <-chan time.Time // says the command outlived the interrupt
		var timeout <-chan time.Time
		if opts.Duration > 0 {
			t := time.NewTimer(opts.Duration)
			defer t.Stop()
			timeout = t.C
		}
		for {
			select {
			case <-done:
				cancel()
				return
			case <-gone:
				cancel()
				return
			case <-timeout:
				// The time asked for is up: tracing stops now, not when
				// the command is done; the command is ended once it has.
				if cmd != nil {
					close(timedOut)
				}
				cancel()
				return
			case s := <-sigs:
				if cmd != nil && interrupted == "" {
					// The command decides how to end; we follow it to
					// its exit. A second interrupt means the user will
					// not wait for it.
					cmd.Process.Signal(s)
					interrupted = "SIGINT"
					if s == syscall.SIGTERM {
						interrupted = "SIGTERM"
					}
					t := time.NewTimer(stillRunningAfter)
					defer t.Stop()
					nudge = t.C
					continue
				}
				if cmd != nil {
					warn(fmt.Sprintf("interrupted again: killing the command (pid %d) and stopping", cmd.Process.Pid))
					killedBy.Store(int32(s.(syscall.Signal)))
					cmd.Process.Kill()
					continue
				}
				cancel()
				return
			case <-nudge:
				warn(fmt.Sprintf("the command (pid %d) is still running after %s; interrupt again to kill it",
					cmd.Process.Pid, interrupted))
			case <-stop:
				if cmd != nil {
					cmd.Process.Signal(syscall.SIGTERM)
					stop = nil // closed: it would fire again at once
					continue
				}
				cancel()
				return
			case <-failed:
				if cmd != nil {
					cmd.Process.Kill()
				}
				cancel()
				return
			case <-ctx.Done():
				return
			}
		}
	}()

	var total uint64
	err = p.Run(ctx, consume, func(cpu int, n uint64) {
		total += n
		warn(fmt.Sprintf("lost %d events on CPU %d (ring buffer full; %d lost so far)", n, cpu, total))
	})
	if per, derr := p.Drops(); derr == nil {
		res.PerCPU = per
		for _, n := range per {
			res.Drops += n
		}
	}
	if n, uerr := p.Unseen(); uerr == nil {
		res.Unseen = n
	}
	if cmd != nil {
		select {
		case <-timedOut:
			// A command the run ended, as asked, gives no status: only
			// one that exited on its own as the time ran out does.
			if !endCommand(cmd, done, sigs, opts.Duration, warn) {
				res.ExitCode = launch.ExitCode(cmd.ProcessState)
			}
		default:
			<-done
			res.ExitCode = launch.ExitCode(cmd.ProcessState)
			if sig := killedBy.Load(); sig != 0 {
				res.ExitCode = 128 + int(sig)
			}
		}
	}
	select {
	case <-failed:
		return res, failErr
	default:
	}
	if err == nil && opts.Finished != nil {
		err = opts.Finished(p)
	}
	return res, err
}

// watchReader calls fail with EPIPE when out is a pipe or socket whose
// reader has gone, as GNU tail -f watches its output: a traced command that
// is quiet for a long time would otherwise keep the run going until the
// next event fails to be written.
func watchReader(ctx context.Context, out *os.File, fail func(error)) {
	var st unix.Stat_t
	if err := unix.Fstat(int(out.Fd()), &st); err != nil {
		return
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO && st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return
	}
	// No events asked for: poll reports only POLLERR (a pipe's readers
	// are gone) and POLLHUP (a socket's peer shut down).
	fds := []unix.PollFd{{Fd: int32(out.Fd())}}
	for ctx.Err() == nil {
		n, err := unix.Poll(fds, 200)
		if err != nil && err != unix.EINTR {
			return
		}
		if n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
			fail(&os.PathError{Op: "write", Path: out.Name(), Err: syscall.EPIPE})
			return
		}
	}
}

// endCommand ends a command still running when the run's time is up, as
// perf stat --timeout and timeout(1) do: SIGTERM, then SIGKILL if it has
// not exited within killGrace, or at once if sysray is interrupted while
// it waits. It reports whether it had to (false: the command exited on its
// own as the time ran out). Only the command is signalled: its children
// are its to end.
func endCommand(cmd *exec.Cmd, done <-chan struct{}, sigs <-chan os.Signal, d time.Duration, warn func(string)) bool {
	select {
	case <-done:
		return false
	default:
	}
	pid := cmd.Process.Pid
	warn(fmt.Sprintf("stopped tracing after %s; ending the command (pid %d) with SIGTERM", d, pid))
	cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(killGrace)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		warn(fmt.Sprintf("the command (pid %d) did not exit within %s of SIGTERM; killing it", pid, killGrace))
	case <-sigs:
		warn(fmt.Sprintf("interrupted; killing the command (pid %d)", pid))
	}
	cmd.Process.Kill()
	<-done
	return true
}

// startCommand forks and execs argv; the kernel selects the child from its
// execve on, with its descendants (probe.StartChild), so nothing of the fork
// is traced and the execve is. No helper process waits in between: on a
// host where every open waits (a full audit backlog), a second start of
// sysray's own binary costs seconds before the command even runs.
func startCommand(argv []string, stdout io.Writer, p *probe.Probe) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, errors.New("no command to run")
	}
	// Resolved here so "not found" is a clear error.
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, fmt.Errorf("cannot run %s: %w", argv[0], err)
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		// The command ends with sysray, however sysray ends (SIGKILL
		// included): left running, it would go on untraced, reparented
		// to init. The kernel sends the signal when the thread that
		// forked exits; Go ends a thread only when a goroutine locked
		// to it exits, and no caller of Run locks its goroutine.
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if err := p.StartChild(cmd.Start); err != nil {
		return nil, err
	}
	return cmd, nil
}

func pidList(pids []uint32) string {
	var b strings.Builder
	for i, p := range pids {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, p)
	}
	return b.String()
}
