package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/strace"
)

func newImport() *cobra.Command {
	var from, path, archName string
	cmd := &cobra.Command{
		Use:   "import --from strace LOG... -w FILE",
		Short: "Turn another tool's trace (strace -f -ttt -T output) into a capture file",
		Long: `import reads what strace wrote (strace -f -ttt -T -o LOG, or the -ff files
LOG.PID, given one by one or by their prefix) and writes a sysray capture, so
that read, stat -r and doctor -r work where eBPF is not allowed. What strace
does not see (stacks, page faults, cgroups, CPUs) is recorded as absent in
the capture's header, never made up. See docs/import.md.`,
		Example: `  strace -f -ttt -T -o app.log ./app && sysray import --from strace app.log -w app.sysray
  strace -ff -ttt -T -o app ./app && sysray import --from strace app -w app.sysray`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from != "strace" {
				return fmt.Errorf("import --from %q: only strace is known", from)
			}
			if path == "" {
				return fmt.Errorf("import needs -w FILE")
			}
			arch := event.HostArch()
			switch archName {
			case "":
			case "x86_64", "amd64":
				arch = event.ArchAMD64
			case "arm64", "aarch64":
				arch = event.ArchARM64
			default:
				return fmt.Errorf("--arch %q: x86_64 or arm64", archName)
			}
			files, err := strace.Inputs(args)
			if err != nil {
				return err
			}
			st, scanned, err := strace.Scan(files, arch)
			if err != nil {
				return err
			}
			names := event.SyscallNames(arch)
			hdr := &capture.Header{Arch: arch, Command: os.Args, Syscalls: names, Meta: importMeta(st)}
			if st.Times == "unix" {
				hdr.Start = int64(st.First)
			}
			w, err := capture.Create(path, hdr)
			if err != nil {
				return err
			}
			err = strace.Convert(files, arch, scanned, w.Write)
			end := int64(0)
			if st.Times == "unix" {
				end = int64(st.Last)
			}
			cerr := w.Close(&capture.Trailer{End: end})
			if err != nil {
				os.Remove(path)
				return err
			}
			if cerr != nil {
				return cerr
			}
			reportImport(st, path)
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "strace", "the tool that wrote the input (strace)")
	cmd.Flags().StringVarP(&path, "write", "w", "", "capture file to write (created 0600)")
	cmd.Flags().StringVar(&archName, "arch", "", "syscall table of the traced host: x86_64 or arm64 (default: this host's)")
	return cmd
}

// importMeta is what the capture's header says about where its events
// came from and what they lack.
func importMeta(st *strace.Stats) map[string]string {
	m := map[string]string{
		"source":         "strace",
		"absent":         strings.Join(strace.Absent, ","),
		"strace_files":   strings.Join(st.Files, ","),
		"strace_lines":   strconv.FormatUint(st.Lines, 10),
		"strace_skipped": strconv.FormatUint(st.Unparsed, 10),
	}
	var opts []string
	switch st.Times {
	case "unix":
		opts = append(opts, "-ttt")
	case "time-of-day":
		opts = append(opts, "-tt")
		m["clock"] = "time of day: strace -t/-tt print no date, so event times are since midnight"
	case "relative":
		opts = append(opts, "-r")
		m["clock"] = "relative: strace -r prints times since the previous line, so event times are since the first line"
	default:
		m["absent"] += ",timestamps"
	}
	if st.Latency {
		opts = append(opts, "-T")
	} else {
		m["absent"] += ",latency"
	}
	if st.PIDs {
		opts = append(opts, "-f")
	} else {
		m["absent"] += ",pids"
	}
	if st.Yy {
		opts = append(opts, "-y")
	}
	m["strace_options"] = strings.Join(opts, " ")
	m["strace_undecoded_args"] = strconv.FormatUint(st.Undecoded, 10)
	if len(st.Audit) > 0 {
		if b, err := json.Marshal(st.Audit); err == nil {
			m["strace_audit"] = string(b)
		}
	}
	return m
}

func reportImport(st *strace.Stats, path string) {
	fmt.Fprintf(os.Stderr, "sysray: imported %d events from %d strace lines into %s (absent: %s)\n",
		st.Events, st.Lines, path, strings.Join(strace.Absent, ", "))
	if st.Unparsed > 0 {
		more := ""
		if st.Unparsed > uint64(len(st.BadLines)) {
			more = ", ..."
		}
		partial := ""
		if st.PartialEnd {
			partial = "; the log ends inside a line (strace was stopped while writing)"
		}
		fmt.Fprintf(os.Stderr, "sysray: warning: %d lines skipped, not strace's shape: %s%s%s\n",
			st.Unparsed, strings.Join(st.BadLines, ", "), more, partial)
	}
	if len(st.Unknown) > 0 {
		var names []string
		var n uint64
		for k, v := range st.Unknown {
			names = append(names, k)
			n += v
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "sysray: warning: %d calls skipped, syscalls this arch does not have: %s\n", n, strings.Join(names, ", "))
	}
	if st.Unpaired > 0 {
		fmt.Fprintf(os.Stderr, "sysray: warning: %d calls resumed without their start (begun before the log, or a line lost): kept without their arguments\n", st.Unpaired)
	}
	if st.Times == "" {
		fmt.Fprintln(os.Stderr, "sysray: warning: the log has no timestamps (strace -ttt): events carry time 0")
	}
	if !st.Latency {
		fmt.Fprintln(os.Stderr, "sysray: warning: the log has no durations (strace -T): latencies come from the halves of split calls only")
	}
}
