package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/filter"
	"github.com/sysray/sysray/internal/output"
	"github.com/sysray/sysray/internal/session"
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
			c, err := session.Open(args[0])
			if err != nil {
				return err
			}
			defer c.Close()
			out, err := openOutput(outPath, args[0])
			if err != nil {
				return err
			}
			defer out.close()
			c.Filter = flt
			h := c.Header
			if src := h.Meta["source"]; src != "" {
				// Say it before the events: what is missing is absent, not zero.
				absent := strings.ReplaceAll(h.Meta["absent"], ",", ", ")
				if absent == "" {
					absent = "none listed"
				}
				fmt.Fprintf(os.Stderr, "sysray: imported from %s; absent: %s\n", output.Escape(src), output.Escape(absent))
			}
			pr := output.New(out, h.Arch, h.BootTime, asJSON)
			pr.Containers = session.Label(c.Ctrs)
			sum := stat.NewTable(h.Arch)
			drops, err := c.Each(func(e *event.Event) error {
				if summary {
					sum.AddEvent(e)
					return nil
				}
				return pr.Print(e)
			})
			if ferr := pr.Flush(); err == nil {
				err = ferr
			}
			if err != nil {
				return err
			}
			if summary {
				if err := printSummary(out, sum, asJSON, drops); err != nil {
					return err
				}
			}
			if err := out.finish(); err != nil {
				return err
			}
			if drops > 0 {
				fmt.Fprintf(os.Stderr, "sysray: %d events were lost in the kernel during this capture\n", drops)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&expr, "filter", "f", "", "filter expression (see docs/filter.md)")
	cmd.Flags().StringVarP(&outPath, "output", "o", "", "write to this file instead of stdout (- for stdout)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line (docs/json.md)")
	cmd.Flags().BoolVarP(&summary, "summary", "c", false, "print a per-syscall summary instead of events, like strace -c")
	return cmd
}
