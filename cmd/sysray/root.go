package main

import (
	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/redact"
)

// keepSecrets is --keep-secrets, for every command.
var keepSecrets bool

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "sysray",
		Short: "Find and explain the time and failures between programs and the kernel",
		Long: `sysray captures syscalls, page faults, signals and process lifecycle with eBPF,
keeps the evidence, and says what happened.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(*cobra.Command, []string) {
			redact.Keep(keepSecrets)
		},
	}
	root.PersistentFlags().BoolVar(&keepSecrets, "keep-secrets", false,
		"show, write and serve command-line values that look like credentials (--password=, TOKEN=, user:password@ in URLs); by default they read <redacted>")
	root.AddCommand(newTrace(), newRecord(), newRead(), newDoctor(), newProfile(), newDemo(), newStat(), newTop(), newDiff(), newImport(), newReport(), newExport(), newAgent())
	return root
}
