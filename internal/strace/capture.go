package strace

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
)

// Import reads strace's files (Inputs) and writes them to a capture at
// path ("-" for standard output), as arch's calls; command goes in its
// header. The capture takes path's place only once written whole
// (capture.CreatePending), and path may not be one of files.
func Import(files []string, arch event.Arch, path string, command []string) (*Stats, error) {
	st, scanned, err := Scan(files, arch)
	if err != nil {
		return nil, err
	}
	hdr := &capture.Header{Arch: arch, Command: command, Syscalls: event.SyscallNames(arch), Meta: st.Meta()}
	if st.Times == "unix" {
		hdr.Start = int64(st.First)
	}
	var w *capture.Writer
	if path == "-" {
		w, err = capture.NewWriter(os.Stdout, hdr)
	} else {
		w, err = capture.CreatePending(path, hdr, files...)
	}
	if err != nil {
		return nil, err
	}
	if err := Convert(files, arch, scanned, w.Write); err != nil {
		w.Abort()
		return nil, err
	}
	end := int64(0)
	if st.Times == "unix" {
		end = int64(st.Last)
	}
	if err := w.Close(&capture.Trailer{End: end}); err != nil {
		return nil, err
	}
	return st, nil
}

// Meta is what a capture's header says about where its events came from
// and what they lack (docs/import.md).
func (st *Stats) Meta() map[string]string {
	m := map[string]string{
		"source":         "strace",
		"absent":         strings.Join(Absent, ","),
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

// Warnings says what of the log could not be taken, or lacks what the
// doctor would want, one sentence each.
func (st *Stats) Warnings() []string {
	var out []string
	if st.Unparsed > 0 {
		more := ""
		if st.Unparsed > uint64(len(st.BadLines)) {
			more = ", ..."
		}
		partial := ""
		if st.PartialEnd {
			partial = "; the log ends inside a line (strace was stopped while writing)"
		}
		out = append(out, fmt.Sprintf("%d lines skipped, not strace's shape: %s%s%s",
			st.Unparsed, strings.Join(st.BadLines, ", "), more, partial))
	}
	if len(st.Unknown) > 0 {
		var names []string
		var n uint64
		for k, v := range st.Unknown {
			names = append(names, k)
			n += v
		}
		sort.Strings(names)
		out = append(out, fmt.Sprintf("%d calls skipped, syscalls this arch does not have: %s", n, strings.Join(names, ", ")))
	}
	if st.Unpaired > 0 {
		out = append(out, fmt.Sprintf("%d calls resumed without their start (begun before the log, or a line lost): kept without their arguments", st.Unpaired))
	}
	if st.Times == "" {
		out = append(out, "the log has no timestamps (strace -ttt): events carry time 0")
	}
	if !st.Latency {
		out = append(out, "the log has no durations (strace -T): latencies come from the halves of split calls only")
	}
	return out
}
