package scap

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/filter"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/redact"
	"github.com/sysray/sysray/internal/session"
)

// Absent lists what a capture made from a scap file never holds: what
// scap does not record, or records in a form sysray does not take.
// page_faults and signal_delivery join it when the file has none of
// those events (the tracer records them only when asked).
var Absent = []string{"stacks", "vsyscall", "cgroups", "containers", "signal_generation",
	"hostname", "kernel", "drops"}

// Stats describes one import.
type Stats struct {
	File         string
	Version      string // the section header's major.minor
	Bytes        int64  // decompressed bytes read
	Blocks       map[uint32]uint64
	Read         uint64 // events read
	Events       uint64 // sysray events made
	Calls        uint64 // calls paired or unpaired
	Unpaired     uint64 // exits without their enter
	Unfinished   uint64 // enters without their exit
	NoReturn     uint64 // calls whose exit carries no return value (generic events)
	NoExitStatus uint64 // process exits without a status (old procexit events)
	Exits        uint64
	Signals      uint64
	PageFaults   uint64
	Skipped      uint64            // malformed events skipped
	BadEvents    []string          // the first few of them
	Unknown      map[string]uint64 // calls with no x86-64 number
	Other        map[string]uint64 // the tracer's own events (switch, procinfo, container, ...)
	UnknownTypes uint64            // event types beyond this reader's table
	Truncated    string            // where the file stops inside a block
	First, Last  uint64
	Procs        []proc.Info
	// Containers are those the container events describe and those the
	// threads' cgroups name (by id alone when no event describes them).
	Containers []filter.Container
}

func newStats() *Stats {
	return &Stats{Blocks: map[uint32]uint64{}, Unknown: map[string]uint64{}, Other: map[string]uint64{}}
}

// maxBad is how many malformed events are described.
const maxBad = 5

// Read streams a scap file through a Converter, giving emit each event.
// A file cut inside a block is read up to the cut (Stats.Truncated says
// where); a corrupted block framing stops the read with an error, as
// nothing after it can be trusted.
func Read(r io.Reader, emit func(*event.Event) error) (*Stats, error) {
	rd, err := NewReader(r)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	c := NewConverter(emit)
	st := c.St
	st.Version = fmt.Sprintf("%d.%d", rd.Major, rd.Minor)
	var ev Event
	for {
		b, err := rd.Next()
		if err == io.EOF {
			break
		}
		if errors.Is(err, ErrTruncated) {
			st.Truncated = err.Error()
			break
		}
		if err != nil {
			return st, err
		}
		st.Blocks[b.Type]++
		if v, ok := IsProcList(b.Type); ok {
			ts, err := ParseProcList(v, b.Body)
			c.Learn(ts)
			st.Procs = appendProcs(st.Procs, ts)
			if err != nil {
				st.Skipped++
				st.bad(fmt.Sprintf("process list at byte %d: %v", b.Offset, err))
			}
			continue
		}
		if !IsEvent(b.Type) {
			continue
		}
		if err := ParseEvent(b.Type, b.Body, &ev); err != nil {
			if errors.Is(err, ErrUnknownType) {
				st.UnknownTypes++
				continue
			}
			st.Skipped++
			st.bad(fmt.Sprintf("byte %d: %v", b.Offset, err))
			continue
		}
		st.Read++
		if err := c.Feed(&ev); err != nil {
			return st, err
		}
	}
	st.Bytes = rd.Offset()
	return st, c.Close()
}

func (st *Stats) bad(s string) {
	if len(st.BadEvents) < maxBad {
		st.BadEvents = append(st.BadEvents, s)
	}
}

// appendProcs turns the process list into the capture header's table:
// one row per process, its threads listed.
func appendProcs(out []proc.Info, ts []Thread) []proc.Info {
	idx := map[uint32]int{}
	for i, p := range out {
		idx[p.PID] = i
	}
	for _, t := range ts {
		pid := uint32(t.PID)
		i, ok := idx[pid]
		if !ok {
			out = append(out, proc.Info{PID: pid})
			i = len(out) - 1
			idx[pid] = i
		}
		p := &out[i]
		p.Threads = append(p.Threads, uint32(t.TID))
		if t.TID == t.PID {
			p.PPID, p.Comm, p.Exe = uint32(t.PTID), t.Comm, t.Exe
			p.Cmdline = redact.Argv(append([]string{t.Exe}, t.Args...))
		}
	}
	return out
}

// Import reads the scap file at in (gzip or not) and writes it to a
// capture at path ("-" for standard output); command goes in its header.
// The file is read twice: first for the header's times and what the file
// lacks, then for the events.
func Import(in, path string, command []string) (*Stats, error) {
	if in == "-" {
		return nil, fmt.Errorf("import --from scap reads a file, twice (for the header, then the events), not standard input")
	}
	if in == path {
		return nil, fmt.Errorf("import: -w %s would overwrite its input", path)
	}
	f, err := os.Open(in)
	if err != nil {
		return nil, err
	}
	first, err := Read(f, nil)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", in, err)
	}
	first.File = in
	hdr := &capture.Header{Arch: event.ArchAMD64, Command: command, Syscalls: event.SyscallNames(event.ArchAMD64),
		Start: int64(first.First), Procs: first.Procs, Meta: first.Meta()}
	var w *capture.Writer
	if path == "-" {
		w, err = capture.NewWriter(os.Stdout, hdr)
	} else {
		w, err = capture.CreatePending(path, hdr, in)
	}
	if err != nil {
		return nil, err
	}
	f, err = os.Open(in)
	if err != nil {
		w.Abort()
		return nil, err
	}
	defer f.Close()
	st, err := Read(f, w.Write)
	if err != nil {
		w.Abort()
		return nil, fmt.Errorf("%s: %w", in, err)
	}
	st.File = in
	if err := w.Close(&capture.Trailer{End: int64(st.Last)}); err != nil {
		return nil, err
	}
	return st, nil
}

// AbsentFor is Absent (less containers, when the file names any) and
// what this file's events lack.
func (st *Stats) AbsentFor() []string {
	var out []string
	for _, a := range Absent {
		if a != "containers" || len(st.Containers) == 0 {
			out = append(out, a)
		}
	}
	if st.PageFaults == 0 {
		out = append(out, "page_faults")
	}
	if st.Signals == 0 {
		out = append(out, "signal_delivery")
	}
	return out
}

// Meta is what a capture's header says about where its events came from
// and what they lack (docs/import.md).
func (st *Stats) Meta() map[string]string {
	m := map[string]string{
		"source":              "scap",
		"absent":              strings.Join(st.AbsentFor(), ","),
		"scap_file":           st.File,
		"scap_version":        st.Version,
		"scap_events":         strconv.FormatUint(st.Read, 10),
		"scap_skipped":        strconv.FormatUint(st.Skipped, 10),
		"scap_unpaired":       strconv.FormatUint(st.Unpaired, 10),
		"scap_unfinished":     strconv.FormatUint(st.Unfinished, 10),
		"scap_no_return":      strconv.FormatUint(st.NoReturn, 10),
		"scap_decoded_args":   "descriptors, sizes and other plain numbers, paths; flags, modes, structures and socket addresses are 0",
		"clock":               "wall clock: event times are Unix ns, as scap records them",
		"scap_unknown_events": strconv.FormatUint(st.UnknownTypes, 10),
	}
	if st.Truncated != "" {
		m["scap_truncated"] = st.Truncated
	}
	if len(st.Containers) > 0 {
		m[session.MetaContainers] = containersMeta(st.Containers)
		m["scap_cgroups"] = "the cgroup of an event is its container's place in the containers table (scap keeps cgroup paths, not cgroup ids); 0 for the host"
	}
	return m
}

// Warnings says what of the file could not be taken, one sentence each.
func (st *Stats) Warnings() []string {
	var out []string
	if st.Truncated != "" {
		out = append(out, fmt.Sprintf("%s: the events before it are imported", st.Truncated))
	}
	if st.Skipped > 0 {
		more := ""
		if st.Skipped > uint64(len(st.BadEvents)) {
			more = ", ..."
		}
		out = append(out, fmt.Sprintf("%d malformed events skipped: %s%s", st.Skipped, strings.Join(st.BadEvents, "; "), more))
	}
	if st.UnknownTypes > 0 {
		out = append(out, fmt.Sprintf("%d events of types newer than this reader skipped", st.UnknownTypes))
	}
	if len(st.Unknown) > 0 {
		var names []string
		var n uint64
		for k, v := range st.Unknown {
			names = append(names, k)
			n += v
		}
		sort.Strings(names)
		out = append(out, fmt.Sprintf("%d calls skipped, without an x86-64 syscall number: %s", n, strings.Join(names, ", ")))
	}
	if st.Unpaired > 0 {
		out = append(out, fmt.Sprintf("%d calls returned without their enter event (begun before the capture, or the event dropped): kept, timed from their return, latency 0", st.Unpaired))
	}
	if st.NoReturn > 0 {
		out = append(out, fmt.Sprintf("%d calls recorded by scap's generic event, which carries no return value: stored as 0", st.NoReturn))
	}
	return out
}
