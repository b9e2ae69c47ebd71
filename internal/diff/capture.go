package diff

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/session"
	"github.com/sysray/sysray/internal/stat"
)

// ReadCapture counts a capture's syscalls exactly, grouped by syscall,
// process or container as `sysray stat -r` would, except that processes
// are named by comm alone (their pids differ from run to run). With
// stacks, it also folds its slow calls' stacks (AddSyscall): where they
// slept with offCPU, else their time on CPU.
func ReadCapture(path, by string, stacks, offCPU bool) (*Side, Stacks, error) {
	switch by {
	case "syscall", "process", "container":
	default:
		return nil, nil, fmt.Errorf("%s: cannot group by %q: want syscall, process or container", path, by)
	}
	c, err := session.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	defer c.Close()

	t := stat.NewTable(c.Header.Arch)
	var first, last uint64
	comm := func(pid uint32) string {
		if p, ok := c.Procs.Get(pid); ok && p.Comm != "" {
			return p.Comm
		}
		return fmt.Sprintf("[%d]", pid)
	}
	var st Stacks
	if stacks {
		st = Stacks{}
	}
	found := false
	pids := map[uint32]bool{}
	drops, err := c.Each(func(e *event.Event) error {
		if e.Kind == event.KindDrop {
			return nil
		}
		if first == 0 || e.Time < first {
			first = e.Time
		}
		last = max(last, e.End())
		t.AddEvent(e)
		if e.Kind == event.KindSyscall && !e.Syscall.Unfinished {
			pids[e.PID] = true
		}
		if stacks && st.AddSyscall(e, comm(e.PID), event.SyscallName(c.Header.Arch, e.Syscall.Nr), offCPU) {
			found = true
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	// Recorded with --stacks, a capture may still hold none: no call was
	// slow enough and slept.
	if stacks && !found && !recordedWithStacks(c.Header.Command) {
		return nil, nil, fmt.Errorf("%s has no stacks: only sysray record --stacks keeps them (for calls slower than --slow that slept)", path)
	}
	s := NewSide(path, KindCapture, by)
	s.Drops = drops
	if tr := c.Trailer(); tr != nil && tr.End > c.Header.Start {
		s.Duration = time.Duration(tr.End - c.Header.Start)
	} else if last > first {
		s.Duration = time.Duration(last - first) // cut short: the span of its events
	}
	var group func(stat.Key) string
	switch by {
	case "syscall":
		group = t.BySyscall
	case "process":
		group = func(k stat.Key) string { return comm(k.PID) }
	case "container":
		group = func(k stat.Key) string {
			if d := session.Describe(c.Ctrs.Container(k.PID, k.Cgroup)); d != "" {
				return d
			}
			return "host"
		}
	}
	for _, r := range t.Rows(group) {
		s.Group(r.Name).Stats = statsOf(&r)
	}
	if by != "syscall" {
		const sep = "\x00"
		for _, r := range t.Rows(func(k stat.Key) string { return group(k) + sep + t.BySyscall(k) }) {
			i := strings.LastIndex(r.Name, sep)
			g, sc := r.Name[:i], r.Name[i+len(sep):]
			grp := s.Group(g)
			if grp.Syscalls == nil {
				grp.Syscalls = map[string]Stats{}
			}
			grp.Syscalls[sc] = statsOf(&r)
		}
		if by == "process" {
			for pid := range pids {
				g := s.Group(comm(pid))
				g.PIDs = append(g.PIDs, pid)
			}
			for _, g := range s.Groups {
				slices.Sort(g.PIDs)
			}
		}
	}
	return s, st, nil
}

// recordedWithStacks says whether the sysray command line that wrote a
// capture asked for stacks: a capture without any may just have had no
// call slow enough to keep them.
func recordedWithStacks(argv []string) bool {
	for _, a := range argv {
		if a == "--" {
			break
		}
		if a == "--stacks" || strings.HasPrefix(a, "--stacks=") && a != "--stacks=false" {
			return true
		}
	}
	return false
}

func statsOf(r *stat.StatRow) Stats {
	return Stats{Calls: r.Calls, Errors: r.Errors, TotalNS: r.TotalNS, P50NS: r.P50NS, P99NS: r.P99NS,
		MaxNS: r.MaxNS, Errnos: r.Errnos}
}
