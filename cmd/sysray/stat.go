package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/probe"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/session"
	"github.com/sysray/sysray/internal/stat"
)

func newStat() *cobra.Command {
	var sel session.Selection
	var by, sortBy, file, outPath string
	var asJSON, exact bool
	cmd := &cobra.Command{
		Use:   "stat [flags] [-- COMMAND [ARG...]]",
		Short: "Count syscalls, errors and latency percentiles in the kernel, like strace -c at a fraction of the cost",
		Long: `Counts every selected syscall in the kernel, by process, cgroup and syscall, with
a latency histogram, and prints a table grouped --by syscall, process or
container. No event crosses to user space per syscall. Counts and failures are
exact. The clock times a thread's first 8 calls of a syscall in each kernel tick
and a random 1 in 16 of the rest; percentiles come from the timed calls, within
12.5% of the latency at a rank the output bounds (--exact-timing times every call,
and counting then costs nearly twice as much). With -r FILE, counts the syscalls
of a capture exactly.`,
		Example: `  sysray stat -- make -j2
  sysray stat --by container --duration 10s
  sysray stat -r capture.sysray --by process --sort p99`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var group func(t *stat.Table) func(stat.Key) string
			procs := proc.NewTable(nil)
			var ctrs session.Containers
			switch by {
			case "syscall":
				group = func(t *stat.Table) func(stat.Key) string { return t.BySyscall }
			case "process":
				group = func(*stat.Table) func(stat.Key) string {
					return func(k stat.Key) string {
						if p, ok := procs.Get(k.PID); ok {
							return fmt.Sprintf("%s[%d]", p.Comm, k.PID)
						}
						return fmt.Sprintf("[%d]", k.PID)
					}
				}
			case "container":
				group = func(*stat.Table) func(stat.Key) string {
					return func(k stat.Key) string {
						if ctrs != nil {
							if d := session.Describe(ctrs.Container(k.PID, k.Cgroup)); d != "" {
								return d
							}
						}
						return "host"
					}
				}
			default:
				return fmt.Errorf("--by %s: want syscall, process or container", by)
			}
			if err := stat.SortRows(nil, sortBy); err != nil {
				return err
			}
			var (
				t     *stat.Table
				drops uint64
				code  int
			)
			if file != "" {
				if len(args) > 0 {
					return errors.New("stat -r reads a capture; it does not run a command")
				}
				c, err := session.Open(file)
				if err != nil {
					return err
				}
				defer c.Close()
				procs, ctrs = c.Procs, c.Ctrs
				t = stat.NewTable(c.Header.Arch)
				if drops, err = c.Each(func(e *event.Event) error { t.AddEvent(e); return nil }); err != nil {
					return err
				}
			} else {
				lc := session.NewLive()
				defer lc.Close()
				ctrs = lc
				opts, flt, err := sel.Build(args, lc)
				if err != nil {
					return err
				}
				if flt != nil {
					return errors.New("stat counts in the kernel: select with -p, -e, --cgroup, --container or --min-latency, not -f")
				}
				snap, _ := proc.Snapshot()
				procs = proc.NewTable(snap)
				s := session.New(event.HostArch(), procs, lc, nil)
				opts.Probe.Stat = true
				t = stat.NewTable(event.HostArch())
				if !exact {
					opts.Probe.UseBudget()
					t.Every = opts.Probe.Every
				}
				var lost uint64
				opts.Finished = func(p *probe.Probe) error {
					cells, l, err := p.Stats()
					t.Set(cells)
					lost = l
					return err
				}
				res, err := live.Run(opts, func(e *event.Event) error {
					s.Pass(e)
					return nil
				})
				if err != nil {
					return err
				}
				if lost > 0 {
					fmt.Fprintf(os.Stderr, "sysray: %d syscalls were not counted: the kernel's table of (process, syscall) pairs was full\n", lost)
				}
				drops = res.Drops + lost
				code = res.ExitCode
			}
			rows := t.Rows(group(t))
			stat.SortRows(rows, sortBy)
			out, closeOut, err := openOutput(outPath)
			if err != nil {
				return err
			}
			defer closeOut()
			if asJSON {
				err = stat.PrintJSON(out, rows, by, drops)
			} else {
				err = stat.PrintRows(out, rows, by)
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
	registerSelection(cmd, &sel)
	durationHelp(cmd)
	cmd.Flags().StringVar(&by, "by", "syscall", "group rows by syscall, process or container")
	cmd.Flags().StringVar(&sortBy, "sort", "time", "order rows by time, calls, errors, p99, max or name")
	cmd.Flags().StringVarP(&file, "read", "r", "", "count the syscalls of a capture file")
	cmd.Flags().StringVarP(&outPath, "output", "o", "", "write to this file instead of stdout")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	cmd.Flags().BoolVar(&exact, "exact-timing", false, "time every call with the clock (percentiles exact to their bucket; counting then costs nearly twice as much per call)")
	return cmd
}
