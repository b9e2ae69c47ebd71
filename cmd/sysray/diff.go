package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/diff"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/profile"
	"github.com/sysray/sysray/internal/session"
	"github.com/sysray/sysray/internal/stat"
)

func newDiff() *cobra.Command {
	var by, outPath, flame string
	var asJSON, offCPU bool
	cmd := &cobra.Command{
		Use:   "diff A B [flags]",
		Short: "Compare two captures (or two stat --json outputs): what changed in calls, errors and latency",
		Long: `Compares A (before) with B (after), each a capture (sysray record -w) or the
output of sysray stat --json, told apart by their content. Per syscall (or per
process or container with --by, with their syscalls where both inputs are
captures): calls, calls per second of each input's duration, errors by errno,
p50/p99/max latency, and the change; syscalls and errnos that appeared or
vanished are listed. Rows are ordered by |Δ total time|, the time at stake.

--flame OUT.svg draws a red (grew) and blue (shrank) differential flame graph
of the stacks of the captures' slow syscalls (recorded with --stacks): their
time on CPU, or with --off-cpu where they slept. Two folded stack files
(sysray profile -o X.folded) give a differential graph of on-CPU samples.`,
		Example: `  sysray diff before.sysray after.sysray
  sysray diff --by process --json before.sysray after.sysray
  sysray diff before.json after.json        # two sysray stat --json outputs
  sysray diff --flame wait.svg --off-cpu before.sysray after.sysray`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch by {
			case "syscall", "process", "container":
			default:
				return fmt.Errorf("--by %s: want syscall, process or container", by)
			}
			if flame != "" && filepath.Ext(flame) != ".svg" {
				return fmt.Errorf("--flame %s: the differential flame graph is an .svg", flame)
			}
			if offCPU && flame == "" {
				return errors.New("--off-cpu chooses the stacks of --flame; give --flame OUT.svg")
			}
			var kinds [2]string
			for i, p := range args {
				k, err := diff.Sniff(p)
				if err != nil {
					return err
				}
				kinds[i] = k
			}
			if (kinds[0] == diff.KindFolded) != (kinds[1] == diff.KindFolded) {
				return fmt.Errorf("%s is %s and %s is %s: folded stacks can only be compared with folded stacks",
					args[0], article(kinds[0]), args[1], article(kinds[1]))
			}
			if kinds[0] == diff.KindFolded {
				if flame == "" {
					return errors.New("folded stacks hold no syscall counts: compare them with --flame OUT.svg")
				}
				var st [2]diff.Stacks
				for i, p := range args {
					s, err := diff.ReadFolded(p)
					if err != nil {
						return err
					}
					st[i] = s
				}
				return writeFlame(flame, args, st, "samples")
			}
			if flame != "" {
				for i, k := range kinds {
					if k != diff.KindCapture {
						return fmt.Errorf("%s is sysray stat --json output, which keeps no stacks: --flame needs two captures recorded with --stacks", args[i])
					}
				}
			}
			// A stat document was counted by one grouping and keeps only
			// its rows; captures follow it.
			for i, k := range kinds {
				if k != diff.KindStat {
					continue
				}
				s, err := diff.ReadStat(args[i])
				if err != nil {
					return err
				}
				if s.By != by {
					if cmd.Flags().Changed("by") {
						return fmt.Errorf("%s was counted by %s and keeps only those rows; it cannot be regrouped --by %s", args[i], s.By, by)
					}
					if i == 1 && kinds[0] == diff.KindStat {
						return fmt.Errorf("%s is by %s but %s is by %s: stat both the same way", args[0], by, args[1], s.By)
					}
					by = s.By
				}
			}
			var sides [2]*diff.Side
			var stacks [2]diff.Stacks
			for i, p := range args {
				var err error
				if kinds[i] == diff.KindStat {
					sides[i], err = diff.ReadStat(p)
				} else {
					sides[i], stacks[i], err = tallyCapture(p, by, flame != "", offCPU)
				}
				if err != nil {
					return err
				}
			}
			res := diff.Compare(sides[0], sides[1], stat.MaxRelError)
			out, closeOut, err := openOutput(outPath)
			if err != nil {
				return err
			}
			if asJSON {
				err = diff.PrintJSON(out, res)
			} else {
				err = diff.PrintText(out, res)
			}
			if cerr := closeOut(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if flame != "" {
				return writeFlame(flame, args, stacks, "ns")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&by, "by", "syscall", "group rows by syscall, process or container")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document (docs/diff.md)")
	cmd.Flags().StringVarP(&outPath, "output", "o", "", "write to this file instead of stdout")
	cmd.Flags().StringVar(&flame, "flame", "", "also write a differential flame graph (.svg) of the captures' stacks")
	cmd.Flags().BoolVar(&offCPU, "off-cpu", false, "with --flame: where slow syscalls slept, not their time on CPU")
	return cmd
}

func article(kind string) string {
	switch kind {
	case diff.KindCapture:
		return "a capture"
	case diff.KindStat:
		return "sysray stat --json output"
	}
	return "folded stacks"
}

// tallyCapture counts a capture's syscalls exactly, grouped as stat -r
// would, except that processes are named by comm alone (their pids differ
// from run to run); with stacks, it also folds its slow calls' stacks.
func tallyCapture(path, by string, wantStacks, offCPU bool) (*diff.Side, diff.Stacks, error) {
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
	var st diff.Stacks
	if wantStacks {
		st = diff.Stacks{}
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
		if wantStacks && st.AddSyscall(e, comm(e.PID), event.SyscallName(c.Header.Arch, e.Syscall.Nr), offCPU) {
			found = true
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	// Recorded with --stacks, a capture may still hold none: no call was
	// slow enough and slept.
	if wantStacks && !found && !recordedWithStacks(c.Header.Command) {
		return nil, nil, fmt.Errorf("%s has no stacks: only sysray record --stacks keeps them (for calls slower than --slow that slept)", path)
	}
	s := diff.NewSide(path, diff.KindCapture, by)
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
				grp.Syscalls = map[string]diff.Stats{}
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

func statsOf(r *stat.StatRow) diff.Stats {
	return diff.Stats{Calls: r.Calls, Errors: r.Errors, TotalNS: r.TotalNS, P50NS: r.P50NS, P99NS: r.P99NS,
		MaxNS: r.MaxNS, Errnos: r.Errnos}
}

// writeFlame draws the differential flame graph of two sets of stacks.
func writeFlame(path string, names []string, st [2]diff.Stacks, unit string) error {
	if st[0].Total() == 0 && st[1].Total() == 0 {
		return fmt.Errorf("%s and %s hold no stack time to draw", names[0], names[1])
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	title := fmt.Sprintf("sysray diff: %s → %s", filepath.Base(names[0]), filepath.Base(names[1]))
	if err := profile.DiffSVG(f, st[0], st[1], title, unit); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "sysray: wrote %s\n", path)
	return nil
}
