package main

import (
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/output"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/session"
	"github.com/sysray/sysray/internal/stat"
)

func newTrace() *cobra.Command {
	var sel session.Selection
	var asJSON, summary bool
	var outPath string
	cmd := &cobra.Command{
		Use:   "trace [flags] [-- COMMAND [ARG...]]",
		Short: "Print syscalls, faults, signals and process events as they happen",
		Example: `  sysray trace -- ls /
  sysray trace -p 4242 -f 'evt.latency > 10ms'
  sysray trace -e openat,connect --json -- curl -s localhost:8080`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctrs := session.NewLive()
			defer ctrs.Close()
			opts, flt, err := sel.Build(args, ctrs)
			if err != nil {
				return err
			}
			arch := event.HostArch()
			snap, _ := proc.Snapshot()
			s := session.New(arch, proc.NewTable(snap), ctrs, flt)
			out, err := openOutput(outPath)
			if err != nil {
				return err
			}
			defer out.close()
			committed := false
			var refused error // the output could not be put in place
			pr := output.New(out, arch, host.BootTime(), asJSON)
			pr.Containers = session.Label(ctrs)
			sum := stat.NewTable(arch)
			if f, ok := out.Writer.(*os.File); ok {
				opts.Out = f // standard output: stop when its reader goes
			}
			abort := make(chan error, 1)
			opts.Abort = abort
			stopFlush := pr.FlushEvery(flushEvery, func(err error) { abort <- err })
			res, err := live.Run(opts, func(e *event.Event) error {
				if refused != nil {
					return refused
				}
				if !s.Pass(e) {
					return nil
				}
				if !committed {
					// Tracing has begun: from here a sysray killed
					// leaves what it printed at the name asked for.
					if err := out.commit(); err != nil {
						refused = err
						return err
					}
					committed = true
				}
				if summary {
					sum.AddEvent(e)
					return nil
				}
				return pr.Print(e)
			})
			stopFlush()
			if ferr := pr.Flush(); err == nil {
				err = ferr
			}
			if err != nil {
				return err
			}
			if summary {
				if err := printSummary(out, sum, asJSON, res.Drops); err != nil {
					return err
				}
			}
			if err := out.finish(); err != nil {
				return err
			}
			session.ReportDrops(os.Stderr, res)
			if res.ExitCode != 0 {
				return &exitError{res.ExitCode}
			}
			return nil
		},
	}
	registerSelection(cmd, &sel)
	durationHelp(cmd)
	cmd.Flags().StringVarP(&outPath, "output", "o", "", "write to this file instead of stdout")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line (docs/json.md)")
	cmd.Flags().BoolVarP(&summary, "summary", "c", false, "print a per-syscall summary instead of events, like strace -c")
	return cmd
}

// flushEvery is how long a traced event may wait in trace's buffer: soon
// enough for a person watching, rare enough to cost nothing.
const flushEvery = 100 * time.Millisecond

// printSummary prints a strace -c like table of the syscalls seen.
func printSummary(w io.Writer, sum *stat.Table, asJSON bool, drops uint64) error {
	rows := sum.Rows(sum.BySyscall)
	stat.SortRows(rows, "time")
	if asJSON {
		return stat.PrintJSON(w, rows, "syscall", drops, stat.Lost{})
	}
	return stat.PrintRows(w, rows, "syscall")
}
