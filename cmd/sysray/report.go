package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sysray/sysray/internal/htmlreport"
	"github.com/sysray/sysray/internal/outfile"
	"github.com/sysray/sysray/internal/session"
)

func newReport() *cobra.Command {
	var sel session.Selection
	var file, out, keep string
	cmd := &cobra.Command{
		Use:   "report (-r FILE | [flags] -- COMMAND [ARG...] | [flags] --duration D) -o FILE.html",
		Short: "Write one self-contained HTML page: findings, syscall tables, latency heatmap, timeline, flame graphs",
		Long: `Reads a capture (-r), or records one first exactly as 'sysray record' does
(a command, -p PID or --duration, with --stacks on), runs the doctor on it, and
writes one HTML file that opens from disk with nothing else: the doctor's
findings, containers → processes → syscalls with counts, errors and latency
percentiles, a latency heatmap over time per syscall, a per-thread timeline of
slow calls, faults, signals, exec and exit, flame graphs of time in syscalls on
and off CPU, and the capture's drops and metadata. Each view has its own
address: report.html#findings, #table, #heatmap, #timeline, #flame, #meta.`,
		Example: `  sysray report -r app.sysray -o app.html
  sysray report -o ls.html -- ls -l /
  sysray report -o host.html --duration 10s`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("report needs -o FILE.html")
			}
			if file != "" {
				if len(args) > 0 {
					return errors.New("report -r reads a capture; it does not run a command")
				}
				var set []string
				cmd.Flags().Visit(func(f *pflag.Flag) {
					if f.Name != "read" && f.Name != "output" {
						set = append(set, "--"+f.Name)
					}
				})
				if len(set) > 0 {
					return fmt.Errorf("report -r reads a capture as it is; %v only apply when recording", set)
				}
				page, err := openOutput(out, file)
				if err != nil {
					return err
				}
				defer page.close()
				return writeReport(file, page, out, "")
			}
			if len(args) == 0 && sel.Duration == 0 && len(sel.PIDs) == 0 && len(sel.Cgroups) == 0 && len(sel.Containers) == 0 {
				return errors.New("report needs -r FILE, a command after --, -p PID, --cgroup, --container or --duration")
			}
			if keep == "-" {
				return errors.New("report -w -: the capture is read back to make the page, so it needs a file; name one")
			}
			if keep != "" && outfile.SamePath(keep, out) {
				return errors.New("-w and -o name the same file")
			}
			// Opened before tracing, so that a page that cannot be
			// written is known before the run rather than after it.
			page, err := openOutput(out)
			if err != nil {
				return err
			}
			defer page.close()
			capPath := keep
			if capPath == "" {
				dir, err := os.MkdirTemp("", "sysray-report-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				capPath = filepath.Join(dir, "capture.sysray")
			}
			// A page on standard output keeps it to itself.
			var cmdOut io.Writer
			if out == "-" {
				cmdOut = os.Stderr
			}
			code, err := recordTo(cmd, args, capPath, cmdOut)
			if err != nil {
				return err
			}
			title := strings.Join(args, " ")
			if len(args) == 0 {
				title = "live capture"
			}
			if err := writeReport(capPath, page, out, title); err != nil {
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
	cmd.Flags().StringVarP(&file, "read", "r", "", "make the report from this capture file")
	cmd.Flags().StringVarP(&out, "output", "o", "", "HTML file to write (created 0600; - for stdout)")
	cmd.Flags().StringVarP(&keep, "write", "w", "", "when recording, keep the capture in this file (default: a temporary file, removed)")
	// The doctor and the off-CPU graph need where slow syscalls slept.
	cmd.Flags().Lookup("stacks").DefValue = "true"
	sel.Stacks = true
	return cmd
}

// recordTo records to path with 'sysray record' itself, given the
// selection flags set on cmd, so that a live report is a report of a
// capture: one code path. It returns the traced command's exit status.
func recordTo(cmd *cobra.Command, args []string, path string, cmdOut io.Writer) (int, error) {
	rec := newRecordTo(cmdOut)
	var err error
	set := func(name, value string) {
		if err == nil {
			if e := rec.Flags().Set(name, value); e != nil {
				err = fmt.Errorf("--%s: %w", name, e)
			}
		}
	}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name == "output" || f.Name == "read" || f.Name == "write" {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				set(f.Name, v)
			}
			return
		}
		set(f.Name, f.Value.String())
	})
	if !cmd.Flags().Changed("stacks") {
		set("stacks", "true")
	}
	set("write", path)
	if err != nil {
		return 0, err
	}
	err = rec.RunE(rec, args)
	var ex *exitError
	if errors.As(err, &ex) {
		return ex.code, nil
	}
	return 0, err
}

// writeReport writes the page of a capture to page, named out, and says
// what it wrote.
func writeReport(capPath string, page *outFile, out, title string) error {
	s, err := htmlreport.CaptureTo(capPath, page, title)
	if err != nil {
		return err
	}
	if err := page.finish(); err != nil {
		return err
	}
	if out == "-" {
		out = "the page to standard output"
	}
	fmt.Fprintf(os.Stderr, "sysray: wrote %s (%d findings, %d events, %d KiB)\n", out, s.Findings, s.Events, (s.Bytes+1023)/1024)
	return nil
}
