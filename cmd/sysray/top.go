package main

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/event"
	hostfacts "github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/probe"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/session"
	"github.com/sysray/sysray/internal/stat"
	"github.com/sysray/sysray/internal/top"
)

func newTop() *cobra.Command {
	var sel session.Selection
	var once, exact bool
	var interval time.Duration
	var level, within, sortBy string
	cmd := &cobra.Command{
		Use:   "top [flags]",
		Short: "Live view of containers, processes and syscalls: rates, time in syscalls, p99, errors",
		Long: `Counts syscalls, page faults and vsyscall emulations in the kernel and shows,
every interval, per container (enter: its processes; enter: their syscalls):
syscalls/s, % of a CPU spent in syscalls, p99 latency, errors/s, vsyscall
emulations/s and page faults/s. --once prints one snapshot for scripts.`,
		Example: `  sysray top
  sysray top --once --level process
  sysray top --once --level syscall --within 4242`,
		RunE: func(cmd *cobra.Command, args []string) error {
			lv := map[string]int{"container": top.Containers, "process": top.Processes, "syscall": top.Syscalls}
			l, ok := lv[level]
			if !ok {
				return fmt.Errorf("--level %s: want container, process or syscall", level)
			}
			if err := top.CheckSort(sortBy); err != nil {
				return err
			}
			if interval < 100*time.Millisecond {
				return fmt.Errorf("--interval %s: at least 100ms", interval)
			}
			ctrs := session.NewLive()
			defer ctrs.Close()
			opts, flt, err := sel.Build(args, ctrs)
			if err != nil {
				return err
			}
			if flt != nil {
				return fmt.Errorf("top counts in the kernel: select with -p, -e, --cgroup or --container, not -f")
			}
			opts.Probe.Stat = true
			if !exact {
				opts.Probe.UseBudget()
			}
			snap, _ := proc.Snapshot()
			s := session.New(event.HostArch(), proc.NewTable(snap), ctrs, nil)
			// The cells of processes that ended go from the kernel once a
			// read has shown their last interval: a host's table holds the
			// living, however long top runs (internal/stat/ended.go).
			drain := stat.NewDrain(stat.Settle, false, hostfacts.Mono)
			ready := make(chan *probe.Probe, 1)
			stop := make(chan struct{})
			opts.Stop = stop
			opts.Started = func(p *probe.Probe) error { ready <- p; return nil }
			var runErr error
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, runErr = live.Run(opts, func(e *event.Event) error {
					if e.Kind == event.KindExit && e.Proc.GroupDead {
						drain.End(e.PID, hostfacts.Mono())
					}
					s.Pass(e)
					return nil
				})
				close(ready)
			}()
			p, ok := <-ready
			if !ok {
				wg.Wait()
				return runErr
			}
			src := &top.Source{
				Arch: event.HostArch(),
				Read: func() (top.Sample, error) {
					// The fault counts before the cells: letting an ended
					// process's cells go takes its fault counts with them.
					pc, err := p.ProcCounts()
					if err != nil {
						return top.Sample{}, err
					}
					r, err := drain.Read(p)
					if err != nil {
						return top.Sample{}, err
					}
					counts := map[uint32]top.ProcCounts{}
					for pid, c := range pc {
						counts[pid] = top.ProcCounts{Faults: c.Faults, Vsyscalls: c.Vsyscalls}
					}
					return top.Sample{At: time.Now(), Cells: r.Cells, Counts: counts}, nil
				},
				Process: func(pid uint32) string {
					if info, ok := s.Procs.Get(pid); ok {
						return fmt.Sprintf("%s[%d]", info.Comm, pid)
					}
					return fmt.Sprintf("[%d]", pid)
				},
				Container: func(pid uint32, cg uint64) string { return session.Describe(ctrs.Container(pid, cg)) },
			}
			if once {
				err = top.Once(os.Stdout, src, interval, l, within, sortBy)
			} else {
				err = top.Run(src, interval)
			}
			close(stop)
			wg.Wait()
			if err != nil {
				return err
			}
			return runErr
		},
	}
	registerSelection(cmd, &sel)
	cmd.Flags().BoolVar(&once, "once", false, "print one snapshot and exit")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "refresh period")
	cmd.Flags().StringVar(&level, "level", "container", "with --once: container, process or syscall")
	cmd.Flags().StringVar(&within, "within", "", "with --once: the container (its name, or host) or process (its pid) to list")
	cmd.Flags().StringVar(&sortBy, "sort", "time", "with --once: time, calls, p99, errors, vsyscalls or faults")
	cmd.Flags().BoolVar(&exact, "exact-timing", false, "time every call with the clock (p99 exact to its bucket; counting then costs nearly twice as much per call)")
	return cmd
}
