package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/filter"
	"github.com/sysray/sysray/internal/output"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/stat"
)

func newRead() *cobra.Command {
	var expr string
	var asJSON, summary bool
	var outPath string
	cmd := &cobra.Command{
		Use:   "read FILE",
		Short: "Print the events of a capture file",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var flt *filter.Filter
			if expr != "" {
				var err error
				if flt, err = filter.Parse(expr); err != nil {
					return err
				}
			}
			r, err := capture.Open(args[0])
			if err != nil {
				return err
			}
			defer r.Close()
			h := r.Header()
			procs := proc.NewTable(h.Procs)
			ctrs := newCapturedContainers(h.Meta[metaContainers])
			envv := env{arch: h.Arch, procs: procs, ctrs: ctrs}
			out, closeOut, err := openOutput(outPath)
			if err != nil {
				return err
			}
			defer closeOut()
			pr := output.New(out, h.Arch, h.BootTime, asJSON)
			pr.Containers = label(ctrs)
			sum := stat.NewTable(h.Arch)
			var e event.Event
			for {
				err = r.Next(&e)
				if err != nil {
					break
				}
				procs.Update(&e)
				ctrs.observe(&e)
				if flt != nil && !flt.Match(&e, envv) {
					continue
				}
				if summary {
					sum.AddEvent(&e)
					continue
				}
				if err := pr.Print(&e); err != nil {
					return err
				}
			}
			pr.Flush()
			var drops uint64
			if t := r.Trailer(); t != nil {
				for _, d := range t.Drops {
					drops += d
				}
			}
			if summary {
				if perr := printSummary(out, sum, asJSON, drops); perr != nil {
					return perr
				}
			}
			if errors.Is(err, capture.ErrTruncated) {
				fmt.Fprintf(os.Stderr, "sysray: warning: %v\n", err)
				return nil
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			if drops > 0 {
				fmt.Fprintf(os.Stderr, "sysray: %d events were lost in the kernel during this capture\n", drops)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&expr, "filter", "f", "", "filter expression (see docs/filter.md)")
	cmd.Flags().StringVarP(&outPath, "output", "o", "", "write to this file instead of stdout")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line (docs/json.md)")
	cmd.Flags().BoolVarP(&summary, "summary", "c", false, "print a per-syscall summary instead of events, like strace -c")
	return cmd
}
