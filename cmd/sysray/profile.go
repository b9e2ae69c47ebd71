package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/probe"
	"github.com/sysray/sysray/internal/profile"
	"github.com/sysray/sysray/internal/symbol"
)

func newProfile() *cobra.Command {
	var sel selection
	var out string
	var hz int
	var offCPU bool
	cmd := &cobra.Command{
		Use:   "profile -o FILE [flags] [-- COMMAND [ARG...]]",
		Short: "Sample where CPU time goes, in user space and in the kernel; write a flame graph",
		Long: `Samples every CPU (hardware cycles where there is a PMU, else the CPU clock),
counts kernel and user stacks in the kernel, and writes FILE in the format
its extension names: .folded (flamegraph.pl, speedscope), .pb.gz (go tool
pprof) or .svg (a self-contained interactive flame graph). Prints the
user/kernel split per process, and the kernel time by syscall in progress.`,
		Example: `  sysray profile -o cpu.svg -- make -j2
  sysray profile -o host.pb.gz --duration 10s
  sysray profile --off-cpu -o wait.folded -p 4242 --duration 30s`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("profile needs -o FILE (.folded, .pb.gz or .svg)")
			}
			if _, err := profile.Format(out); err != nil {
				return err
			}
			if hz <= 0 || hz > 10000 {
				return fmt.Errorf("--hz %d: want 1 to 10000", hz)
			}
			if len(args) == 0 && sel.duration == 0 && len(sel.pids) == 0 {
				return errors.New("profile needs a command, -p PID or --duration")
			}
			sel.stacks = true
			ctrs := newLiveContainers()
			defer ctrs.Close()
			opts, flt, err := sel.build(args, ctrs)
			if err != nil {
				return err
			}
			if !offCPU {
				// Syscall records are not needed: the kernel still tracks the
				// syscall in progress for each sample.
				opts.Probe.MinLatency = 1 << 62
			}
			syms := symbol.NewResolver()
			defer syms.Close()
			opts.Symbols = syms
			arch := event.HostArch()
			prof := &profile.Profile{Hz: hz}
			var sampling *probe.Sampling
			start := time.Now()
			stopSnap := make(chan struct{})
			snapDone := make(chan struct{})
			opts.Started = func(p *probe.Probe) error {
				s, err := p.StartSampling(hz)
				if err != nil {
					return err
				}
				sampling = s
				prof.Event = s.Event
				go snapshotSampled(p, syms, stopSnap, snapDone)
				return nil
			}
			var samples []probe.Sample
			opts.Finished = func(p *probe.Probe) error {
				close(stopSnap)
				<-snapDone
				sampling.Close()
				var err error
				samples, prof.Lost, err = p.Samples()
				return err
			}
			offStacks := map[string]*profile.Stack{}
			res, err := live.Run(opts, func(e *event.Event) error {
				if !offCPU || e.Kind != event.KindSyscall || len(e.Syscall.Sleeps) == 0 {
					return nil
				}
				if flt != nil && !flt.Match(e, env{arch: arch, ctrs: ctrs}) {
					return nil
				}
				addOffCPU(offStacks, e, hz)
				return nil
			})
			if sampling != nil && err != nil {
				sampling.Close()
			}
			if err != nil {
				return err
			}
			prof.Duration = time.Since(start)
			kernel, kerr := symbol.LoadKernel()
			if kerr != nil {
				fmt.Fprintf(os.Stderr, "sysray: kernel frames will not be named: %v\n", kerr)
			}
			for _, s := range samples {
				st := profile.Stack{PID: s.PID, Comm: s.Comm, Count: s.Count}
				if s.Syscall >= 0 {
					st.Syscall = event.SyscallName(arch, uint32(s.Syscall))
				}
				for i := len(s.User) - 1; i >= 0; i-- {
					st.User = append(st.User, name(live.FuncName(syms.Resolve(s.PID, s.User[i])), s.User[i]))
				}
				kfs := s.Kernel
				for i := len(kfs) - 1; i >= 0; i-- {
					n := ""
					if kernel != nil {
						n = live.FuncName(kernel.Resolve(kfs[i]))
					}
					st.Kernel = append(st.Kernel, name(n, kfs[i]))
				}
				prof.Stacks = append(prof.Stacks, st)
			}
			for _, s := range offStacks {
				prof.Stacks = append(prof.Stacks, *s)
			}
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			if err := prof.Write(f, out); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			prof.Summary(os.Stdout)
			fmt.Fprintf(os.Stderr, "sysray: wrote %s\n", out)
			reportDrops(res)
			if res.ExitCode != 0 {
				return &exitError{res.ExitCode}
			}
			return nil
		},
	}
	sel.register(cmd)
	durationHelp(cmd)
	cmd.Flags().StringVarP(&out, "output", "o", "", "file to write: .folded, .pb.gz or .svg")
	cmd.Flags().IntVar(&hz, "hz", 99, "samples per second per CPU")
	cmd.Flags().BoolVar(&offCPU, "off-cpu", false, "also count time slow syscalls spent asleep, by where they slept (see --slow)")
	return cmd
}

// snapshotSampled reads the maps of sampled processes while they run, so
// that their user frames still resolve when they have exited by the end.
func snapshotSampled(p *probe.Probe, syms *symbol.Resolver, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	last := map[uint32]time.Time{}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for _, pid := range p.SampledPIDs() {
			// A process maps its libraries early: one read when first seen,
			// another a second later, catches nearly every code mapping.
			if at, ok := last[pid]; !ok || time.Since(at) > time.Second && !at.IsZero() {
				if syms.Snapshot(pid) == nil && ok {
					last[pid] = time.Time{} // read twice: enough
				} else {
					last[pid] = time.Now()
				}
			}
		}
	}
}

// addOffCPU turns a slow syscall's sleeps into stacks weighted like samples
// (one per 1/hz seconds asleep), so on- and off-CPU time share one graph.
func addOffCPU(acc map[string]*profile.Stack, e *event.Event, hz int) {
	for _, sl := range e.Syscall.Sleeps {
		n := sl.Duration * uint64(hz) / 1e9
		if n == 0 {
			continue
		}
		st := profile.Stack{PID: e.PID, Comm: e.Comm, Syscall: "off-cpu"}
		for i := len(e.Syscall.UserStack) - 1; i >= 0; i-- {
			f := e.Syscall.UserStack[i]
			st.User = append(st.User, name(f.Name, f.Addr))
		}
		st.User = append(st.User, "[off-cpu]")
		for i := len(sl.Stack) - 1; i >= 0; i-- {
			st.Kernel = append(st.Kernel, name(sl.Stack[i].Name, sl.Stack[i].Addr))
		}
		key := fmt.Sprint(st.PID, st.User, st.Kernel)
		if a := acc[key]; a != nil {
			a.Count += n
			continue
		}
		st.Count = n
		acc[key] = &st
	}
}

func name(n string, addr uint64) string {
	if n != "" {
		return n
	}
	return fmt.Sprintf("%#x", addr)
}
