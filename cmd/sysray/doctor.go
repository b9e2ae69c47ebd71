package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/checkup"
	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/doctor/render"
	"github.com/sysray/sysray/internal/outfile"
	"github.com/sysray/sysray/internal/session"
)

func newDoctor() *cobra.Command {
	var sel session.Selection
	var file, outPath string
	var asJSON, explain bool
	cmd := &cobra.Command{
		Use:   "doctor [flags] [-- COMMAND [ARG...]]",
		Short: "Find what went wrong between programs and the kernel, explain it, and say how to fix it",
		Example: `  sysray doctor -- ./server
  sysray doctor --duration 30s
  sysray doctor -r capture.sysray --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var rep *doctor.Report
			code := 0
			// Checked before tracing, a path that cannot be written
			// would otherwise be found after the run; but opened after
			// it: on a host whose audit backlog is full each open the
			// doctor makes waits for room, and the doctor must say so at
			// once (docs/doctor-internals.md, "On a sick host").
			if err := outfile.Check(outPath, file); err != nil {
				return err
			}
			var err error
			if file != "" {
				if len(args) > 0 {
					return errors.New("doctor -r reads a capture; it does not run a command")
				}
				rep, err = checkup.Capture(file)
			} else {
				rep, code, err = checkup.Live(&sel, args, nil)
			}
			if err != nil {
				return err
			}
			out, err := openOutput(outPath, file)
			if err != nil {
				return err
			}
			defer out.close()
			if asJSON {
				err = render.JSON(out, rep)
			} else {
				err = render.Text(out, rep, explain)
			}
			if err != nil {
				return err
			}
			if err := out.finish(); err != nil {
				return err
			}
			if code != 0 {
				return &exitError{code}
			}
			return nil
		},
	}
	registerSelection(cmd, &sel)
	durationHelp(cmd)
	cmd.Flags().StringVarP(&file, "read", "r", "", "diagnose a capture file instead of tracing live")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document (docs/doctor.md)")
	cmd.Flags().StringVarP(&outPath, "output", "o", "", "write the report to this file instead of stdout")
	cmd.Flags().BoolVar(&explain, "explain", false, "after the findings, show each silent detector's nearest miss and the rule it fell short of")
	// The doctor needs where slow syscalls slept.
	cmd.Flags().Lookup("stacks").DefValue = "true"
	sel.Stacks = true
	return cmd
}
