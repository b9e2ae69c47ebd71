package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/event"
	hostfacts "github.com/sysray/sysray/internal/host"
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
						if k.PID == 0 {
							return "(ended, summed)" // past stat.KeptMax
						}
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
			// Checked before counting: a path that cannot be written
			// would otherwise be found after the run.
			out, err := openOutput(outPath, file)
			if err != nil {
				return err
			}
			defer out.close()
			var (
				t     *stat.Table
				drops uint64
				lost  stat.Lost // of drops, calls the kernel had no count cell for
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
				// A long run on a host whose processes come and go would
				// fill the kernel's table with the dead: their cells go
				// once read, and their counts are kept here.
				drain := stat.NewDrain(stat.Settle, true, hostfacts.Mono)
				stop, done := make(chan struct{}), make(chan struct{})
				opts.Started = func(p *probe.Probe) error {
					go drain.Run(p, letGoEvery, stop, done, nil)
					return nil
				}
				opts.Finished = func(p *probe.Probe) error {
					close(stop)
					<-done
					last, whole, err := drain.Last(p)
					t.Set(whole)
					lost = last.Lost
					return err
				}
				res, err := live.Run(opts, func(e *event.Event) error {
					if e.Kind == event.KindExit && e.Proc.GroupDead {
						drain.End(e.PID, hostfacts.Mono())
					}
					s.Pass(e)
					return nil
				})
				if err != nil {
					return err
				}
				if n := lost.Total(); n > 0 {
					fmt.Fprintf(os.Stderr, "sysray: %d syscalls were not counted: %s\n", n, lost.Why())
				}
				drops = res.Drops + lost.Total()
				code = res.ExitCode
			}
			rows := t.Rows(group(t))
			stat.SortRows(rows, sortBy)
			if asJSON {
				err = stat.PrintJSON(out, rows, by, drops, lost)
			} else {
				err = stat.PrintRows(out, rows, by)
			}
			if err != nil {
				return err
			}
			if err := out.finish(); err != nil {
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

// letGoEvery is how often stat reads the kernel's counts during a run, to
// let ended processes' cells go: each read walks the host's threads for
// their pending counts (docs/stat.md), a few milliseconds on a busy host.
const letGoEvery = time.Second
