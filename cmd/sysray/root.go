package main

import (
	"github.com/spf13/cobra"
)

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "sysray",
		Short: "Find and explain the time and failures between programs and the kernel",
		Long: `sysray captures syscalls, page faults, signals and process lifecycle with eBPF,
keeps the evidence, and says what happened.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newTrace(), newRecord(), newRead(), newDoctor(), newProfile(), newDemo(), newStat(), newTop(), newDiff(), newImport(), newReport(), newExport(), newAgent())
	return root
}
