package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/session"
)

// recordPoll is how long record's readers sleep between drains of the
// rings when they name no stack frames. The 5 ms default is there so that
// frames are named while their process still lives; without stacks nothing
// is read from /proc as events arrive, and every wakeup costs the reader a
// batch, a hand-off to the merger and Go's scheduler on both sides. On
// redis under redis-benchmark (about 650,000 events a second) 20 ms took
// record's CPU from 362-383 to 315-329 ns an event, and 50 ms did no better
// (bench/HISTORY.md). A ring filling fast is still drained sooner: a
// reader never sleeps longer than a quarter of its ring takes to fill.
const recordPoll = 20 * time.Millisecond

func newRecord() *cobra.Command { return newRecordTo(nil) }

// newRecordTo is record with the traced command's standard output sent to
// cmdOut (nil: sysray's own), for a caller whose output is on stdout.
func newRecordTo(cmdOut io.Writer) *cobra.Command {
	var sel session.Selection
	var path string
	var allProcs, cpuWait bool
	cmd := &cobra.Command{
		Use:   "record -w FILE [flags] [-- COMMAND [ARG...]]",
		Short: "Write events to a capture file for later reading",
		Example: `  sysray record -w ls.sysray -- ls /
  sysray record -w host.sysray --duration 30s`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if path == "" {
				return fmt.Errorf("record needs -w FILE")
			}
			ctrs := session.NewLive()
			defer ctrs.Close()
			opts, flt, err := sel.Build(args, ctrs)
			if err != nil {
				return err
			}
			if cmdOut != nil {
				opts.Stdout = cmdOut
			}
			opts.Probe.RunQueue = cpuWait
			// Direct compaction and reclaim, which `doctor -r` reads
			// (compaction-stall); their tracepoints fire only when free
			// memory runs short or fragmented.
			opts.Probe.Compaction = true
			if !opts.Probe.Stacks && opts.Probe.Poll == 0 {
				opts.Probe.Poll = recordPoll
			}
			// A capture for `doctor -r` keeps the futex sums the live
			// doctor reads (lock-convoy): the kernel adds every wait's
			// time asleep, which a quick call's event does not carry.
			opts.Probe.Futex = opts.Probe.Stacks
			arch := event.HostArch()
			snap, err := proc.Snapshot()
			if err != nil {
				return err
			}
			s := session.New(arch, proc.NewTable(snap), ctrs, flt)
			if !allProcs {
				snap = session.Selected(snap, opts.Probe.PIDs, opts.Probe.Children, opts.Probe.Cgroups, len(opts.Command) > 0)
			}
			hdr := session.Header(arch, snap, ctrs.Snapshot(), opts.Probe.Stacks, opts.Probe.LeanStacks, opts.Probe.SlowNS())
			var w *capture.Writer
			if path == "-" {
				w, err = capture.NewWriter(os.Stdout, hdr)
				// The capture has standard output to itself.
				opts.Stdout = os.Stderr
			} else {
				// Written beside path; path is left as it was until the
				// first event, so a run that fails before tracing
				// anything (no such command, no privileges) keeps the
				// capture that was there.
				w, err = capture.CreatePending(path, hdr)
			}
			if err != nil {
				return err
			}
			var n uint64
			var refused error // path could not be taken: nothing more is written
			lastFlush := host.Mono()
			res, err := live.Run(opts, func(e *event.Event) error {
				if refused != nil {
					// The run goes on to the command's end after an
					// error; a later Commit must not succeed once the
					// writer holding path is done.
					return refused
				}
				if !s.Pass(e) {
					return nil
				}
				if n == 0 {
					// From here a sysray killed leaves what it wrote at
					// path, readable up to its last flushed block.
					if err := w.Commit(); err != nil {
						refused = err
						return err
					}
				}
				n++
				if err := w.Write(e); err != nil {
					return err
				}
				// Keep what is written readable if sysray is killed.
				if n%1024 == 0 {
					if now := host.Mono(); now-lastFlush > uint64(time.Second) {
						lastFlush = now
						return w.Flush()
					}
				}
				return nil
			})
			if err != nil && n == 0 {
				w.Abort()
				return err
			}
			cerr := w.Close(&capture.Trailer{Events: n, Drops: res.PerCPU, End: time.Now().UnixNano()})
			if err != nil {
				return err
			}
			if cerr != nil {
				return cerr
			}
			to := path
			if path == "-" {
				to = "standard output"
			}
			fmt.Fprintf(os.Stderr, "sysray: wrote %d events to %s\n", n, to)
			session.ReportDrops(os.Stderr, res)
			if res.ExitCode != 0 {
				return &exitError{res.ExitCode}
			}
			return nil
		},
	}
	registerSelection(cmd, &sel)
	durationHelp(cmd)
	cmd.Flags().StringVarP(&path, "write", "w", "", "capture file to write (created 0600; - for stdout)")
	cmd.Flags().BoolVar(&cpuWait, "cpu-wait", false, "also record time threads spent runnable without a CPU (long waits, who held the CPU, and each thread's totals); in syscalls with --stacks")
	cmd.Flags().BoolVar(&allProcs, "all-procs", false, "write every running process, with its command line, in the capture's header (by default only those the selection traces)")
	return cmd
}
