package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/htmlreport"
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
				return writeReport(file, out, "")
			}
			if len(args) == 0 && sel.Duration == 0 && len(sel.PIDs) == 0 && len(sel.Cgroups) == 0 && len(sel.Containers) == 0 {
				return errors.New("report needs -r FILE, a command after --, -p PID, --cgroup, --container or --duration")
			}
			if keep != "" && filepath.Clean(keep) == filepath.Clean(out) {
				return errors.New("-w and -o name the same file")
			}
			capPath := keep
			if capPath == "" {
				dir, err := os.MkdirTemp("", "sysray-report-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				capPath = filepath.Join(dir, "capture.sysray")
			}
			code, err := recordTo(cmd, args, capPath)
			if err != nil {
				return err
			}
			title := strings.Join(args, " ")
			if len(args) == 0 {
				title = "live capture"
			}
			if err := writeReport(capPath, out, title); err != nil {
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
	cmd.Flags().StringVarP(&out, "output", "o", "", "HTML file to write (created 0600)")
	cmd.Flags().StringVarP(&keep, "write", "w", "", "when recording, keep the capture in this file (default: a temporary file, removed)")
	// The doctor and the off-CPU graph need where slow syscalls slept.
	cmd.Flags().Lookup("stacks").DefValue = "true"
	sel.Stacks = true
	return cmd
}

// recordTo records to path with 'sysray record' itself, given the
// selection flags set on cmd, so that a live report is a report of a
// capture: one code path. It returns the traced command's exit status.
func recordTo(cmd *cobra.Command, args []string, path string) (int, error) {
	rec := newRecord()
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

// writeReport runs the doctor on a capture, aggregates its events and
// writes the page, replacing out only once it is complete.
func writeReport(capPath, out, title string) error {
	rep, err := doctor.ReadCapture(capPath)
	if err != nil {
		return err
	}
	c, err := session.Open(capPath)
	if err != nil {
		return err
	}
	defer c.Close()
	h := c.Header
	b := htmlreport.New(h.Arch, htmlreport.Names{
		Container: func(pid uint32, cg uint64) string { return session.Describe(c.Ctrs.Container(pid, cg)) },
		Command:   c.Procs.Cmdline,
	}, htmlreport.Limits{})
	drops, err := c.Each(func(e *event.Event) error { b.Observe(e); return nil })
	if err != nil {
		return err
	}
	facts := map[string]string{}
	for k, v := range h.Meta {
		if k != session.MetaContainers {
			facts[k] = v
		}
	}
	meta := htmlreport.Meta{Hostname: h.Hostname, Kernel: h.Kernel, Arch: h.Arch.String(),
		VsyscallMode: h.Meta["vsyscall_mode"], Command: h.Command, Start: h.Start, BootTime: h.BootTime,
		Drops: drops, Facts: facts, Generated: time.Now().UnixNano()}
	if t := c.Trailer(); t != nil {
		meta.End = t.End
		meta.DropsPerCPU = t.Drops
	} else {
		meta.Warning = "The capture has no trailer (its writer did not finish): this report covers its events up to its last whole block."
	}
	if title == "" {
		// Read from a file: the report is named for it.
		meta.File = capPath
		title = filepath.Base(capPath)
	}
	var size int64
	err = writeAtomic(out, func(f *os.File) error {
		w := bufio.NewWriter(f)
		if err := htmlreport.Write(w, b.Data(meta, rep.Findings), title); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		size, err = f.Seek(0, io.SeekCurrent)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "sysray: wrote %s (%d findings, %d events, %d KiB)\n", out, len(rep.Findings), rep.Events, (size+1023)/1024)
	return nil
}

// writeAtomic writes a file 0600 next to path and renames it over path, so
// a failed report leaves no half page, and an old world-readable file is
// replaced rather than reused.
func writeAtomic(path string, fill func(*os.File) error) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if err := fill(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
