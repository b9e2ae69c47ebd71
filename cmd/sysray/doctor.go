package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/container"
	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/filter"
	"github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/probe"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/report"
	"github.com/sysray/sysray/internal/symbol"
)

func newDoctor() *cobra.Command {
	var sel selection
	var file, outPath string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor [flags] [-- COMMAND [ARG...]]",
		Short: "Find what went wrong between programs and the kernel, explain it, and say how to fix it",
		Example: `  sysray doctor -- ./server
  sysray doctor --duration 30s
  sysray doctor -r capture.sysray --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var rep *doctor.Report
			code := 0
			var err error
			if file != "" {
				if len(args) > 0 {
					return errors.New("doctor -r reads a capture; it does not run a command")
				}
				rep, err = doctorFile(file)
			} else {
				rep, code, err = doctorLive(&sel, args, nil)
			}
			if err != nil {
				return err
			}
			out, closeOut, err := openOutput(outPath)
			if err != nil {
				return err
			}
			defer closeOut()
			if asJSON {
				err = report.JSON(out, rep)
			} else {
				err = report.Text(out, rep)
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
	sel.register(cmd)
	cmd.Flags().StringVarP(&file, "read", "r", "", "diagnose a capture file instead of tracing live")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document (docs/doctor.md)")
	cmd.Flags().StringVarP(&outPath, "output", "o", "", "write the report to this file instead of stdout")
	// The doctor needs where slow syscalls slept.
	cmd.Flags().Lookup("stacks").DefValue = "true"
	sel.stacks = true
	return cmd
}

// doctorLive diagnoses a live run; the command's stdout goes to cmdOut (nil: sysray's).
func doctorLive(sel *selection, args []string, cmdOut io.Writer) (*doctor.Report, int, error) {
	ctrs := newLiveContainers()
	defer ctrs.Close()
	opts, flt, err := sel.build(args, ctrs)
	if err != nil {
		return nil, 0, err
	}
	arch := event.HostArch()
	snap, _ := proc.Snapshot()
	procs := proc.NewTable(snap)
	_, kernel := host.Uname()
	d := doctor.New(doctor.Host{Arch: arch, Kernel: kernel, VsyscallMode: host.VsyscallMode(), Live: true,
		Container: func(pid uint32, cg uint64) string { return describe(ctrs.Container(pid, cg)) },
		OOMKills:  host.OOMKills,
		Libc: func(pid uint32) string {
			l, err := container.Libc(int(pid))
			if err != nil {
				return ""
			}
			return l.String()
		}}, procs)
	envv := env{arch: arch, procs: procs, ctrs: ctrs}
	opts.Stdout = cmdOut
	// The kernel counts every syscall; only failures, the call after one,
	// slow calls and one in 64 others (at most one a millisecond per
	// thread) cross over as events. That keeps the doctor's cost near
	// stat's while every detector gets what it needs.
	if flt == nil {
		opts.Probe.Stat = true
		opts.Probe.Sample = 64
		opts.Probe.SampleGap = uint64(time.Millisecond)
		if hz := host.HZ(); hz > 0 {
			// Lean timing: the clock for one call in 64 and for the calls
			// that sleep, jiffies for the rest (docs/doctor.md).
			opts.Probe.TickNS = uint64(time.Second) / uint64(hz)
		}
		series := doctor.NewSeries()
		var (
			sampling *probe.Sampling
			stop     = make(chan struct{})
			done     = make(chan struct{})
		)
		opts.Started = func(p *probe.Probe) error {
			// Where the CPUs are, for the contention detectors: the sampler
			// costs microseconds per sample, not per syscall.
			var err error
			if sampling, err = p.StartSampling(doctorHz); err != nil {
				fmt.Fprintf(os.Stderr, "sysray: on-CPU stacks are off: %v\n", err)
			}
			go readSeries(p, series, stop, done)
			return nil
		}
		opts.Finished = func(p *probe.Probe) error {
			close(stop)
			<-done
			if sampling != nil {
				sampling.Close()
				if samples, _, err := p.Samples(); err == nil {
					d.OnCPU(kernelSamples(samples))
				}
			}
			cells, _, err := p.Stats()
			if err == nil {
				series.Add(host.Mono(), cells)
				d.Counts(cells)
				d.Series(series)
			}
			return err
		}
	}
	res, err := live.Run(opts, func(e *event.Event) error {
		ctrs.observe(e)
		if flt != nil && e.Kind != event.KindDrop && !flt.Match(e, envv) {
			procs.Update(e)
			return nil
		}
		d.Observe(e)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	reportDrops(res)
	return d.Report(), res.ExitCode, nil
}

// describe names a container for a report: "web (image, pod ns/pod)".
func describe(c filter.Container) string {
	if c.ID == "" {
		return ""
	}
	s := c.Name
	if s == "" {
		s = c.ID
		if len(s) > 12 {
			s = s[:12]
		}
	}
	var more []string
	if c.Image != "" {
		more = append(more, "image "+c.Image)
	}
	if c.PodName != "" {
		more = append(more, "pod "+c.PodNamespace+"/"+c.PodName)
	}
	if len(more) > 0 {
		s += " (" + strings.Join(more, ", ") + ")"
	}
	return s
}

func doctorFile(path string) (*doctor.Report, error) {
	c, err := openCapture(path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	h := c.h
	hostFacts := doctor.Host{Arch: h.Arch, Kernel: h.Meta["kernel"], VsyscallMode: h.Meta["vsyscall_mode"], Meta: h.Meta}
	if hostFacts.Kernel == "" {
		hostFacts.Kernel = h.Kernel
	}
	hostFacts.Container = func(pid uint32, cg uint64) string { return describe(c.ctrs.Container(pid, cg)) }
	d := doctor.New(hostFacts, c.procs)
	if _, err := c.each(func(e *event.Event) error { d.Observe(e); return nil }); err != nil {
		return nil, err
	}
	return d.Report(), nil
}

// doctorHz samples the CPUs often enough to see a kernel path that takes a
// tenth of a CPU within a few seconds.
const doctorHz = 199

// seriesEvery is how often the doctor reads the kernel's counts.
const seriesEvery = 250 * time.Millisecond

// readSeries reads the kernel's counts every seriesEvery until stop closes.
func readSeries(p *probe.Probe, s *doctor.Series, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(seriesEvery)
	defer t.Stop()
	for {
		if cells, _, err := p.Stats(); err == nil {
			s.Add(host.Mono(), cells)
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// kernelSamples names the kernel frames of on-CPU samples.
func kernelSamples(samples []probe.Sample) []doctor.CPUSample {
	kernel, err := symbol.LoadKernel()
	if err != nil {
		return nil
	}
	out := make([]doctor.CPUSample, 0, len(samples))
	for _, s := range samples {
		cs := doctor.CPUSample{PID: s.PID, Syscall: s.Syscall, Count: s.Count}
		for _, a := range s.Kernel {
			cs.Kernel = append(cs.Kernel, name(live.FuncName(kernel.Resolve(a)), a))
		}
		out = append(out, cs)
	}
	return out
}
