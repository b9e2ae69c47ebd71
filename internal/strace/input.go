package strace

import (
	"bufio"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/audit"
	"github.com/sysray/sysray/internal/event"
)

// Absent lists what a capture made from strace output does not hold,
// because strace does not see it. It goes into the capture's header.
var Absent = []string{"stacks", "page_faults", "vsyscall", "cgroups", "containers", "cpu",
	"signal_delivery", "process_table", "hostname", "kernel", "drops"}

// Stats describes one import.
type Stats struct {
	Files      []string
	Lines      uint64   // non-empty lines read
	Parsed     uint64   // lines that had strace's shape
	Unparsed   uint64   // lines that did not
	BadLines   []string // "file:line" of the first few of them
	PartialEnd bool     // a file ended inside a line (strace was killed while writing)
	First      uint64   // time of the first and last line with one
	Last       uint64
	Times      string // "unix" (-ttt), "time-of-day" (-t, -tt), "relative" (-r) or "" (none)
	Latency    bool   // -T's durations were there
	PIDs       bool   // lines carried pids (-f), or files their names' (-ff)
	Yy         bool   // descriptors annotated with their paths (-y, -yy)
	Events     uint64
	Unknown    map[string]uint64 // syscall names not in the arch's table
	Unpaired   uint64
	Undecoded  uint64
	Audit      []audit.Fact
}

// maxBadLines is how many unparsable lines are named.
const maxBadLines = 5

// Inputs expands the names given on a command line: a file, or the prefix
// of strace -ff's per-process files (PREFIX.PID).
func Inputs(names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		if _, err := os.Stat(n); err == nil {
			out = append(out, n)
			continue
		}
		matches, _ := filepath.Glob(n + ".*")
		var ff []string
		for _, m := range matches {
			if _, ok := pidSuffix(m); ok {
				ff = append(ff, m)
			}
		}
		if len(ff) == 0 {
			return nil, fmt.Errorf("%s: no such file, nor strace -ff files %s.PID", n, n)
		}
		sort.Strings(ff)
		out = append(out, ff...)
	}
	return out, nil
}

// pidSuffix reads the pid strace -ff puts at the end of each file's name.
func pidSuffix(name string) (uint32, bool) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 || i == len(name)-1 {
		return 0, false
	}
	n, err := strconv.ParseUint(name[i+1:], 10, 32)
	return uint32(n), err == nil && n > 0
}

// source is one file being read, a line ahead.
type source struct {
	name  string
	tid   uint32 // from an -ff file name; 0 otherwise
	r     *bufio.Reader
	f     *os.File
	lineN int
	cur   Line
	ok    bool // cur holds a parsed line
	order int  // position among the files, to keep merges stable
	// -r prints each line's time since the previous line: relative is
	// set at the first such time, and acc sums them.
	relative, decided bool
	acc               uint64
	held              string // a line cut by one of strace's messages, until its rest comes
}

// next reads the next parsable line into cur; ok false at the end.
func (s *source) next(st *Stats) error {
	for {
		line, err := s.r.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if line == "" && err != nil {
			s.ok = false
			return nil
		}
		s.lineN++
		partial := !strings.HasSuffix(line, "\n")
		line = strings.TrimRight(line, "\n")
		if s.held != "" {
			line, s.held = s.held+line, ""
		}
		if strings.HasPrefix(line, "strace: ") {
			continue
		}
		if loc := straceMsg.FindStringIndex(line); loc != nil {
			i := loc[0]
			// strace's own messages ("strace: Process 12 attached") share
			// stderr with the trace, and may land inside a line: the line
			// goes on after the message.
			if !partial {
				s.held = line[:i]
				continue
			}
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		st.Lines++
		l, perr := Parse(line)
		if perr != nil {
			st.Unparsed++
			if partial {
				st.PartialEnd = true
			}
			if len(st.BadLines) < maxBadLines {
				st.BadLines = append(st.BadLines, fmt.Sprintf("%s:%d", s.name, s.lineN))
			}
			continue
		}
		st.Parsed++
		if l.HasTime {
			if !s.decided {
				s.decided = true
				s.relative = l.Time < relativeBelow && !strings.Contains(line[:min(len(line), 40)], ":")
			}
			if s.relative {
				s.acc += l.Time
				l.Time = s.acc
			}
		}
		s.observe(&l, line, st, s.relative)
		s.cur, s.ok = l, true
		return nil
	}
}

// straceMsg is strace's report of a tracee attached or gone, cutting a line.
var straceMsg = regexp.MustCompile(`strace: Process \d+ [a-z]+[^"]*$`)

// relativeBelow: a first time under this (2001-09-09 as a Unix time) is
// strace -r's, not -ttt's.
const relativeBelow = 1e18

func (s *source) observe(l *Line, text string, st *Stats, relative bool) {
	if l.HasTime {
		if st.First == 0 || l.Time < st.First {
			st.First = l.Time
		}
		st.Last = max(st.Last, l.Time)
		if st.Times == "" {
			st.Times = "unix"
			if relative {
				st.Times = "relative"
			} else if strings.Contains(text[:min(len(text), 40)], ":") && l.Time < 86400e9 {
				st.Times = "time-of-day"
			}
		}
	}
	if l.HasLat {
		st.Latency = true
	}
	if l.TID != 0 || s.tid != 0 {
		st.PIDs = true
	}
	if !st.Yy && (l.Kind == LineCall || l.Kind == LineResumed) && strings.Contains(l.Args, "</") {
		st.Yy = true
	}
}

// merger yields the lines of several files in time order.
type merger []*source

func (m merger) Len() int { return len(m) }
func (m merger) Less(i, j int) bool {
	if m[i].cur.Time != m[j].cur.Time {
		return m[i].cur.Time < m[j].cur.Time
	}
	return m[i].order < m[j].order
}
func (m merger) Swap(i, j int) { m[i], m[j] = m[j], m[i] }
func (m *merger) Push(x any)   { *m = append(*m, x.(*source)) }
func (m *merger) Pop() any {
	old := *m
	s := old[len(old)-1]
	*m = old[:len(old)-1]
	return s
}

// pass reads every file once, in merged order, and feeds c.
func pass(files []string, st *Stats, c *Converter) error {
	var m merger
	defer func() {
		for _, s := range m {
			s.f.Close()
		}
	}()
	for i, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		s := &source{name: name, f: f, r: bufio.NewReaderSize(f, 1<<20), order: i}
		if len(files) > 1 {
			s.tid, _ = pidSuffix(name)
		}
		if err := s.next(st); err != nil {
			f.Close()
			return err
		}
		if !s.ok {
			f.Close()
			continue
		}
		m = append(m, s)
	}
	heap.Init(&m)
	for m.Len() > 0 {
		s := m[0]
		if err := c.Feed(&s.cur, s.tid); err != nil {
			return err
		}
		if err := s.next(st); err != nil {
			return err
		}
		if s.ok {
			heap.Fix(&m, 0)
		} else {
			heap.Pop(&m)
			s.f.Close()
		}
	}
	return c.Close()
}

// Scan reads the files once to learn what they hold (the header of a
// capture is written before its events) and checks that they are strace
// output at all. The returned converter carries what the scan learnt about
// threads to the Convert pass.
func Scan(files []string, arch event.Arch) (*Stats, *Converter, error) {
	st := &Stats{Files: files}
	c := NewConverter(arch, nil)
	if err := pass(files, st, c); err != nil {
		return nil, nil, err
	}
	if st.Parsed == 0 {
		if st.Lines == 0 {
			return nil, nil, fmt.Errorf("%s: empty: no strace output", strings.Join(files, ", "))
		}
		return nil, nil, fmt.Errorf("%s: not strace output: none of its %d lines has strace's shape (first at %s)",
			strings.Join(files, ", "), st.Lines, st.BadLines[0])
	}
	if c.root != 0 {
		st.PIDs = true
	}
	st.Events, st.Unknown, st.Unpaired, st.Undecoded, st.Audit = c.Events, c.Unknown, c.Unpaired, c.Undecode, c.Audit
	return st, c, nil
}

// Convert reads the files again and emits their events.
func Convert(files []string, arch event.Arch, scanned *Converter, emit func(*event.Event) error) error {
	c := NewConverter(arch, emit)
	if scanned != nil {
		c.Learn(scanned)
	}
	var st Stats
	return pass(files, &st, c)
}
