// Package profile holds on-CPU stack samples with their frames named (and
// the sleeps of slow syscalls folded like samples, for off-CPU time), and
// writes them as folded stacks (flamegraph.pl, speedscope), pprof protobuf
// (go tool pprof) or a self-contained SVG flame graph.
package profile

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sysray/sysray/internal/output"
)

// Stack is one distinct stack and how many samples hit it.
type Stack struct {
	PID     uint32
	Comm    string
	User    []string // outermost first
	Kernel  []string // outermost first; empty for samples in user space
	Syscall string   // syscall in progress, "" for none
	Count   uint64
}

// Profile is a set of samples.
type Profile struct {
	Stacks   []Stack
	Event    string // cycles or cpu-clock
	Hz       int
	Duration time.Duration
	Lost     uint64 // samples not counted: the kernel's map was full
}

// Frames is the stack root first: the process, its user frames, then its
// kernel frames marked "_[k]" as flamegraph.pl colours them.
func (s *Stack) Frames() []string {
	out := make([]string, 0, 1+len(s.User)+len(s.Kernel))
	out = append(out, fmt.Sprintf("%s[%d]", s.Comm, s.PID))
	out = append(out, s.User...)
	for _, k := range s.Kernel {
		out = append(out, k+"_[k]")
	}
	return out
}

// Format names the output format a file name asks for: folded, pprof or svg.
func Format(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); {
	case ext == ".folded" || ext == ".txt":
		return "folded", nil
	case strings.HasSuffix(strings.ToLower(path), ".pb.gz") || ext == ".pprof":
		return "pprof", nil
	case ext == ".svg":
		return "svg", nil
	}
	return "", fmt.Errorf("%s: unknown format; use .folded, .pb.gz or .svg", path)
}

// Write writes p in the format path's extension names.
func (p *Profile) Write(w io.Writer, path string) error {
	f, err := Format(path)
	if err != nil {
		return err
	}
	switch f {
	case "folded":
		return p.Folded(w)
	case "pprof":
		return p.Pprof(w)
	}
	return p.SVG(w, "sysray profile: "+filepath.Base(path))
}

// Folded writes one line per stack: frames joined by ';', a space, the count.
func (p *Profile) Folded(w io.Writer) error {
	lines := make([]string, 0, len(p.Stacks))
	for i := range p.Stacks {
		s := &p.Stacks[i]
		frames := s.Frames()
		for j, f := range frames {
			frames[j] = strings.ReplaceAll(f, ";", ":") // ';' separates frames
		}
		lines = append(lines, fmt.Sprintf("%s %d", strings.Join(frames, ";"), s.Count))
	}
	sort.Strings(lines)
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

// Split is a process's on-CPU time split between user and kernel space, and
// the kernel time by syscall in progress.
type Split struct {
	PID       uint32
	Comm      string
	Samples   uint64
	User      uint64
	Kernel    uint64
	BySyscall map[string]uint64 // kernel samples by syscall in progress ("" outside any: interrupts, faults)
}

// Splits returns each process's user/kernel split, busiest first.
func (p *Profile) Splits() []Split {
	by := map[uint32]*Split{}
	for _, s := range p.Stacks {
		sp := by[s.PID]
		if sp == nil {
			sp = &Split{PID: s.PID, Comm: s.Comm, BySyscall: map[string]uint64{}}
			by[s.PID] = sp
		}
		sp.Samples += s.Count
		if len(s.Kernel) > 0 {
			sp.Kernel += s.Count
			sp.BySyscall[s.Syscall] += s.Count
		} else {
			sp.User += s.Count
		}
	}
	out := make([]Split, 0, len(by))
	for _, sp := range by {
		out = append(out, *sp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Samples > out[j].Samples })
	return out
}

// Summary writes the user/kernel split table.
func (p *Profile) Summary(out io.Writer) error {
	w := bufio.NewWriter(out)
	var total uint64
	for _, s := range p.Stacks {
		total += s.Count
	}
	fmt.Fprintf(w, "%d samples (%s at %d Hz per CPU over %.1fs)", total, p.Event, p.Hz, p.Duration.Seconds())
	if p.Lost > 0 {
		fmt.Fprintf(w, ", %d not counted (map full)", p.Lost)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-28s %8s %7s %7s  %s\n", "process", "samples", "user", "kernel", "kernel time by syscall")
	for i, sp := range p.Splits() {
		if i == 20 {
			break
		}
		type kv struct {
			k string
			v uint64
		}
		var sc []kv
		for k, v := range sp.BySyscall {
			if k == "" {
				k = "(no syscall)"
			}
			sc = append(sc, kv{k, v})
		}
		sort.Slice(sc, func(i, j int) bool { return sc[i].v > sc[j].v })
		var parts []string
		for j, x := range sc {
			if j == 4 {
				break
			}
			parts = append(parts, fmt.Sprintf("%s %.0f%%", x.k, 100*float64(x.v)/float64(sp.Samples)))
		}
		fmt.Fprintf(w, "%-28s %8d %6.1f%% %6.1f%%  %s\n", fmt.Sprintf("%s[%d]", output.Escape(sp.Comm), sp.PID), sp.Samples,
			100*float64(sp.User)/float64(sp.Samples), 100*float64(sp.Kernel)/float64(sp.Samples), strings.Join(parts, ", "))
	}
	return w.Flush()
}
