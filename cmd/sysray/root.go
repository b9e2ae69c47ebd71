package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/redact"
	"github.com/sysray/sysray/internal/version"
)

// keepSecrets is --keep-secrets, for every command.
var keepSecrets bool

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "sysray",
		Short: "Find and explain the time and failures between programs and the kernel",
		Long: `sysray captures syscalls, page faults, signals and process lifecycle with eBPF,
keeps the evidence, and says what happened.`,
		Version:       version.Get().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(*cobra.Command, []string) {
			redact.Keep(keepSecrets)
		},
	}
	root.PersistentFlags().BoolVar(&keepSecrets, "keep-secrets", false,
		"show, write and serve command-line values that look like credentials (--password=, TOKEN=, user:password@ in URLs); by default they read <redacted>")
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(&cobra.Command{Use: "version", Short: "Print sysray's version, git revision and build toolchain", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version.Get())
			return err
		}})
	root.AddCommand(newTrace(), newRecord(), newRead(), newDoctor(), newProfile(), newDemo(), newStat(), newTop(), newDiff(), newImport(), newReport(), newExport(), newAgent())
	return root
}
