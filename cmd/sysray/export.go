package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/export"
	"github.com/sysray/sysray/internal/export/chromejson"
	"github.com/sysray/sysray/internal/export/perfetto"
	"github.com/sysray/sysray/internal/outfile"
	"github.com/sysray/sysray/internal/scap"
)

var exportFormats = map[string]func(io.Writer) export.Sink{
	"perfetto":    func(w io.Writer) export.Sink { return perfetto.NewWriter(w) },
	"chrome-json": func(w io.Writer) export.Sink { return chromejson.NewWriter(w) },
}

func newExport() *cobra.Command {
	var format, in, out string
	var bucket time.Duration
	cmd := &cobra.Command{
		Use:   "export --format perfetto|chrome-json|scap -r FILE -o OUT",
		Short: "Write a capture as a Perfetto trace, Chrome JSON or a scap file, for other tools",
		Long: `Write a capture for other tools. perfetto and chrome-json are a timeline:
a track per thread under its process (and container), a slice per syscall
with its arguments, return value and errno, instants for page faults,
signals, fork, exec and exit, flows from wakers to the calls they woke, and
each process's syscall rate as a counter.

  perfetto      Perfetto TrackEvent protobuf, for ui.perfetto.dev and trace_processor
  chrome-json   Trace Event Format JSON, for chrome://tracing and other viewers
  scap          the capture format of sysdig and Falco (libscap's, as sysdig 0.29
                reads it): each call as its enter and exit events, the threads
                as the process list; for sysdig -r, Stratoshark and tshark

See docs/export.md.`,
		Example: `  sysray record -w run.sysray -- ./server
  sysray export --format perfetto -r run.sysray -o run.pftrace
  sysray export --format scap -r run.sysray -o run.scap && sysdig -r run.scap`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			newSink, ok := exportFormats[format]
			if !ok && format != "scap" {
				return fmt.Errorf("export: unknown format %q (want perfetto, chrome-json or scap)", format)
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
			if format == "scap" {
				return exportScap(in, out)
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
	cmd.Flags().StringVar(&format, "format", "perfetto", "perfetto, chrome-json or scap")
	cmd.Flags().StringVarP(&in, "read", "r", "", "the capture to export")
	cmd.Flags().StringVarP(&out, "output", "o", "", "the file to write (created 0600; - for stdout)")
	cmd.Flags().DurationVar(&bucket, "rate-bucket", export.DefaultRateBucket, "width of the buckets the syscall-rate counters count in")
	return cmd
}

// exportScap writes the capture in as a scap file, under the same rules
// as the other formats: 0600, in place only once whole, never over the
// capture itself.
func exportScap(in, out string) error {
	var st *scap.ExportStats
	var err error
	if out == "-" {
		bw := bufio.NewWriterSize(os.Stdout, 1<<16)
		if st, err = scap.Export(in, bw); err == nil {
			err = bw.Flush()
		}
	} else {
		var f *outfile.File
		if f, err = outfile.Create(out, in); err != nil {
			return err
		}
		defer f.Close()
		bw := bufio.NewWriterSize(f, 1<<16)
		if st, err = scap.Export(in, bw); err == nil {
			if err = bw.Flush(); err == nil {
				err = f.Finish()
			}
		}
	}
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if st.Truncated {
		fmt.Fprintf(os.Stderr, "sysray: warning: %s is cut short; exported up to its last whole block\n", in)
	}
	fmt.Fprintf(os.Stderr, "sysray: %d scap events: %d calls (%d as generic syscall events), %d cut off, %d new threads' own returns from clone, %d thread exits, %d signal deliveries, %d page faults; %d threads in the process list",
		st.Events, st.Calls, st.Generic, st.Unfinished, st.ChildReturns, st.Exits, st.Signals, st.Faults, st.Threads)
	if st.Containers > 0 {
		fmt.Fprintf(os.Stderr, ", %d containers", st.Containers)
	}
	if st.OutOfOrder > 0 {
		fmt.Fprintf(os.Stderr, "; %d events out of time order (held back too many behind a long call)", st.OutOfOrder)
	}
	if len(st.Left) > 0 {
		kinds := slices.Sorted(maps.Keys(st.Left))
		var parts []string
		for _, k := range kinds {
			parts = append(parts, fmt.Sprintf("%d %s", st.Left[k], k))
		}
		fmt.Fprintf(os.Stderr, "; not written: %s", strings.Join(parts, ", "))
	}
	fmt.Fprintln(os.Stderr)
	return nil
}
