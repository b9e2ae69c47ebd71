package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/export"
	"github.com/sysray/sysray/internal/export/chromejson"
	"github.com/sysray/sysray/internal/export/perfetto"
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
			st, err := export.Capture(in, out, newSink, export.Options{RateBucket: bucket})
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
