package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/export"
	"github.com/sysray/sysray/internal/export/chromejson"
	"github.com/sysray/sysray/internal/export/perfetto"
	"github.com/sysray/sysray/internal/filter"
	"github.com/sysray/sysray/internal/output"
	"github.com/sysray/sysray/internal/session"
)

var exportFormats = map[string]func(io.Writer) export.Sink{
	"perfetto":    func(w io.Writer) export.Sink { return perfetto.NewWriter(w) },
	"chrome-json": func(w io.Writer) export.Sink { return chromejson.NewWriter(w) },
}

func newExport() *cobra.Command {
	var format, in, out string
	var bucket time.Duration
	cmd := &cobra.Command{
		Use:   "export --format perfetto|chrome-json -r FILE -o OUT",
		Short: "Write a capture as a Perfetto trace or Chrome JSON, for trace viewers",
		Long: `Write a capture as a timeline: a track per thread under its process (and
container), a slice per syscall with its arguments, return value and errno,
instants for page faults, signals, fork, exec and exit, flows from wakers to
the calls they woke, and each process's syscall rate as a counter.

  perfetto      Perfetto TrackEvent protobuf, for ui.perfetto.dev and trace_processor
  chrome-json   Trace Event Format JSON, for chrome://tracing and other viewers

See docs/export.md.`,
		Example: `  sysray record -w run.sysray -- ./server
  sysray export --format perfetto -r run.sysray -o run.pftrace`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			newSink, ok := exportFormats[format]
			if !ok {
				return fmt.Errorf("export: unknown format %q (want perfetto or chrome-json)", format)
			}
			if in == "" {
				return errors.New("export: -r FILE names the capture to export")
			}
			if out == "" {
				return errors.New("export: -o FILE names the file to write (- for stdout)")
			}
			if bucket <= 0 {
				return errors.New("export: --rate-bucket must be positive")
			}
			st, err := exportCapture(in, out, newSink, export.Options{RateBucket: bucket})
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "sysray: %d syscalls, %d other events, %d threads in %d processes", st.Slices, st.Instants, st.Threads, st.Processes)
			if st.Lanes > 0 {
				fmt.Fprintf(os.Stderr, " (%d overlapping-call lanes)", st.Lanes)
			}
			fmt.Fprintf(os.Stderr, ", %d wakeup and %d signal flows\n", st.WakeFlows, st.SignalFlows)
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "perfetto", "perfetto or chrome-json")
	cmd.Flags().StringVarP(&in, "read", "r", "", "the capture to export")
	cmd.Flags().StringVarP(&out, "output", "o", "", "the file to write (created 0600; - for stdout)")
	cmd.Flags().DurationVar(&bucket, "rate-bucket", export.DefaultRateBucket, "width of the buckets the syscall-rate counters count in")
	return cmd
}

// exportCapture reads the capture twice (names and layout first, then the
// events) and writes the timeline. A partly written file is removed.
func exportCapture(in, out string, newSink func(io.Writer) export.Sink, opt export.Options) (export.Stats, error) {
	c, err := session.Open(in)
	if err != nil {
		return export.Stats{}, err
	}
	defer c.Close()
	h := c.Header
	passes := 0
	src := export.Source{
		Arch:     h.Arch,
		BootTime: h.BootTime,
		Procs:    h.Procs,
		Container: func(pid uint32, cg uint64) string {
			return containerLabel(c.Ctrs.Container(pid, cg))
		},
		Events: func(fn func(*event.Event) error) error {
			passes++
			if passes == 1 {
				_, err := c.Each(fn)
				return err
			}
			// Later passes: the first already warned of a cut-off file.
			r, err := capture.Open(in)
			if err != nil {
				return err
			}
			defer r.Close()
			var e event.Event
			for {
				if err := r.Next(&e); err != nil {
					if errors.Is(err, io.EOF) || errors.Is(err, capture.ErrTruncated) {
						return nil
					}
					return err
				}
				if err := fn(&e); err != nil {
					return err
				}
			}
		},
	}

	var w io.Writer = os.Stdout
	var f *os.File
	if out != "-" {
		// Writing over the capture would destroy it before it is read.
		if a, err := os.Stat(in); err == nil {
			if b, err := os.Stat(out); err == nil && os.SameFile(a, b) {
				return export.Stats{}, fmt.Errorf("export: %s is the capture being exported", out)
			}
		}
		if f, err = os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
			return export.Stats{}, err
		}
		// An existing file keeps its mode through O_TRUNC; the trace holds
		// paths and arguments, so it is made private before anything is written.
		if err := f.Chmod(0o600); err != nil {
			f.Close()
			return export.Stats{}, err
		}
		w = f
	}
	st, err := export.Export(src, newSink(w), opt)
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(out)
		}
	}
	return st, err
}

// containerLabel names a container for a process's label: its name (or
// short id), image and pod, as far as the capture knows them.
func containerLabel(x filter.Container) string {
	if x.ID == "" && x.Name == "" {
		return ""
	}
	oc := output.Container{ID: x.ID, Name: x.Name}
	s := "container " + oc.Short()
	var more []string
	if x.Image != "" {
		more = append(more, x.Image)
	}
	if x.PodName != "" {
		more = append(more, "pod "+x.PodNamespace+"/"+x.PodName)
	}
	if len(more) > 0 {
		s += " (" + strings.Join(more, ", ") + ")"
	}
	return s
}
