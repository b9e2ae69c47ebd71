package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/diff"
	"github.com/sysray/sysray/internal/profile"
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
			if flame != "" && flame != "-" && filepath.Ext(flame) != ".svg" {
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
			if flame == "-" && (outPath == "" || outPath == "-") {
				return errors.New("--flame - and the comparison would both go to standard output: give -o FILE for one of them")
			}
			out, err := openOutput(outPath, args...)
			if err != nil {
				return err
			}
			defer out.close()
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
					sides[i], stacks[i], err = diff.ReadCapture(p, by, flame != "", offCPU)
				}
				if err != nil {
					return err
				}
			}
			res := diff.Compare(sides[0], sides[1], stat.MaxRelError)
			if asJSON {
				err = diff.PrintJSON(out, res)
			} else {
				err = diff.PrintText(out, res)
			}
			if err == nil {
				err = out.finish()
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
	cmd.Flags().StringVarP(&outPath, "output", "o", "", "write to this file instead of stdout (- for stdout)")
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

// writeFlame draws the differential flame graph of two sets of stacks.
func writeFlame(path string, names []string, st [2]diff.Stacks, unit string) error {
	if st[0].Total() == 0 && st[1].Total() == 0 {
		return fmt.Errorf("%s and %s hold no stack time to draw", names[0], names[1])
	}
	f, err := openOutput(path, names...)
	if err != nil {
		return err
	}
	defer f.close()
	title := fmt.Sprintf("sysray diff: %s → %s", filepath.Base(names[0]), filepath.Base(names[1]))
	if err := profile.DiffSVG(f, st[0], st[1], title, unit); err != nil {
		return err
	}
	if err := f.finish(); err != nil {
		return err
	}
	if path != "-" {
		fmt.Fprintf(os.Stderr, "sysray: wrote %s\n", path)
	}
	return nil
}
