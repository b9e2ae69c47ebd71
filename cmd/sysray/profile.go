package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/outfile"
	"github.com/sysray/sysray/internal/probe"
	"github.com/sysray/sysray/internal/profile"
	"github.com/sysray/sysray/internal/session"
	"github.com/sysray/sysray/internal/symbol"
)

func newProfile() *cobra.Command {
	var sel session.Selection
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
			if out == "-" {
				return errors.New("profile -o -: the format is named by the file's extension (.folded, .pb.gz or .svg); name a file")
			}
			if _, err := profile.Format(out); err != nil {
				return err
			}
			if hz <= 0 || hz > 10000 {
				return fmt.Errorf("--hz %d: want 1 to 10000", hz)
			}
			if len(args) == 0 && sel.Duration == 0 && len(sel.PIDs) == 0 {
				return errors.New("profile needs a command, -p PID or --duration")
			}
			sel.Stacks = true
			// Opened before sampling, so that a file that cannot be
			// written is known before the run rather than after it.
			f, err := outfile.Create(out)
			if err != nil {
				return err
			}
			defer f.Close()
			ctrs := session.NewLive()
			defer ctrs.Close()
			opts, flt, err := sel.Build(args, ctrs)
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
				go func() {
					defer close(snapDone)
					syms.Follow(p.SampledPIDs, stopSnap)
				}()
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
			// Off-CPU stacks only: the process table is not needed.
			s := session.New(arch, nil, ctrs, flt)
			off := profile.NewOffCPU(hz)
			res, err := live.Run(opts, func(e *event.Event) error {
				if s.Pass(e) && offCPU {
					off.Add(e)
				}
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
			var kname func(addr uint64) string
			if kernel != nil {
				kname = func(a uint64) string { return live.FuncName(kernel.Resolve(a)) }
			}
			uname := func(pid uint32, a uint64) string { return live.FuncName(syms.Resolve(pid, a)) }
			prof.Stacks = append(prof.Stacks, profile.FromSamples(samples, arch, uname, kname)...)
			prof.Stacks = append(prof.Stacks, off.Stacks()...)
			if err := prof.Write(f, out); err != nil {
				return err
			}
			if err := f.Finish(); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "sysray: wrote %s\n", out)
			if err := prof.Summary(os.Stdout); err != nil {
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
	cmd.Flags().StringVarP(&out, "output", "o", "", "file to write: .folded, .pb.gz or .svg")
	cmd.Flags().IntVar(&hz, "hz", 99, "samples per second per CPU")
	cmd.Flags().BoolVar(&offCPU, "off-cpu", false, "also count time slow syscalls spent asleep, by where they slept (see --slow)")
	return cmd
}
