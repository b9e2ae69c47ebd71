package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/output"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/stat"
)

func newTrace() *cobra.Command {
	var sel selection
	var asJSON, summary bool
	var outPath string
	cmd := &cobra.Command{
		Use:   "trace [flags] [-- COMMAND [ARG...]]",
		Short: "Print syscalls, faults, signals and process events as they happen",
		Example: `  sysray trace -- ls /
  sysray trace -p 4242 -f 'evt.latency > 10ms'
  sysray trace -e openat,connect --json -- curl -s localhost:8080`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctrs := newLiveContainers()
			defer ctrs.Close()
			opts, flt, err := sel.build(args, ctrs)
			if err != nil {
				return err
			}
			arch := event.HostArch()
			snap, _ := proc.Snapshot()
			procs := proc.NewTable(snap)
			envv := env{arch: arch, procs: procs, ctrs: ctrs}
			out, closeOut, err := openOutput(outPath)
			if err != nil {
				return err
			}
			defer closeOut()
			pr := output.New(out, arch, host.BootTime(), asJSON)
			pr.Containers = label(ctrs)
			sum := stat.NewTable(arch)
			res, err := live.Run(opts, func(e *event.Event) error {
				procs.Update(e)
				ctrs.observe(e)
				if flt != nil && !flt.Match(e, envv) {
					return nil
				}
				if summary {
					sum.AddEvent(e)
					return nil
				}
				return pr.Print(e)
			})
			pr.Flush()
			if err != nil {
				return err
			}
			if summary {
				if err := printSummary(out, sum, asJSON, res.Drops); err != nil {
					return err
				}
			}
			reportDrops(res)
			if res.ExitCode != 0 {
				return &exitError{res.ExitCode}
			}
			return nil
		},
	}
	sel.register(cmd)
	durationHelp(cmd)
	cmd.Flags().StringVarP(&outPath, "output", "o", "", "write to this file instead of stdout")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line (docs/json.md)")
	cmd.Flags().BoolVarP(&summary, "summary", "c", false, "print a per-syscall summary instead of events, like strace -c")
	return cmd
}

// printSummary prints a strace -c like table of the syscalls seen.
func printSummary(w io.Writer, sum *stat.Table, asJSON bool, drops uint64) error {
	rows := sum.Rows(sum.BySyscall)
	stat.SortRows(rows, "time")
	if asJSON {
		return stat.PrintJSON(w, rows, "syscall", drops)
	}
	return stat.PrintRows(w, rows, "syscall")
}

func reportDrops(res live.Result) {
	if res.Drops > 0 {
		fmt.Fprintf(os.Stderr, "sysray: %d events were lost in the kernel (per CPU: %v); results are incomplete\n", res.Drops, res.PerCPU)
	}
}

// durationHelp says in a live command's help what --duration does to a
// command it runs (internal/live): tracing stops at the duration, and the
// command, if still running, is ended as perf stat --timeout ends its own.
func durationHelp(cmd *cobra.Command) {
	cmd.Flags().Lookup("duration").Usage = "stop after this long, e.g. 10s; a COMMAND still running then is sent SIGTERM " +
		"(SIGKILL 10s later) and sysray exits 0"
}
