package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/scap"
	"github.com/sysray/sysray/internal/strace"
)

func newImport() *cobra.Command {
	var from, path, archName string
	cmd := &cobra.Command{
		Use:   "import --from strace|scap FILE... -w FILE",
		Short: "Turn another tool's trace (strace output, a sysdig/Falco scap file) into a capture file",
		Long: `import reads what strace wrote (strace -f -ttt -T -o LOG, or the -ff files
LOG.PID, given one by one or by their prefix), or a capture sysdig or Falco
wrote (--from scap: FILE.scap or FILE.scap.gz), and writes a sysray capture,
so that read, stat -r and doctor -r work where eBPF is not allowed. What the
tool does not record (for strace: stacks, page faults, cgroups, CPUs) is
recorded as absent in the capture's header, never made up. See
docs/import.md.`,
		Example: `  strace -f -ttt -T -o app.log ./app && sysray import --from strace app.log -w app.sysray
  strace -ff -ttt -T -o app ./app && sysray import --from strace app -w app.sysray
  sysdig -w app.scap.gz -z && sysray import --from scap app.scap.gz -w app.sysray`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from != "strace" && from != "scap" {
				return fmt.Errorf("import --from %q: strace or scap", from)
			}
			if path == "" {
				return fmt.Errorf("import needs -w FILE")
			}
			if from == "scap" {
				return importScap(args, archName, path)
			}
			arch := event.HostArch()
			switch archName {
			case "":
			case "x86_64", "amd64":
				arch = event.ArchAMD64
			case "arm64", "aarch64":
				arch = event.ArchARM64
			default:
				return fmt.Errorf("--arch %q: x86_64 or arm64", archName)
			}
			files, err := strace.Inputs(args)
			if err != nil {
				return err
			}
			st, err := strace.Import(files, arch, path, os.Args)
			if err != nil {
				return err
			}
			to := path
			if path == "-" {
				to = "standard output"
			}
			fmt.Fprintf(os.Stderr, "sysray: imported %d events from %d strace lines into %s (absent: %s)\n",
				st.Events, st.Lines, to, strings.Join(strace.Absent, ", "))
			for _, w := range st.Warnings() {
				fmt.Fprintf(os.Stderr, "sysray: warning: %s\n", w)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "strace", "the tool that wrote the input: strace, or scap (sysdig, Falco)")
	cmd.Flags().StringVarP(&path, "write", "w", "", "capture file to write (created 0600; - for stdout)")
	cmd.Flags().StringVar(&archName, "arch", "", "syscall table of the traced host: x86_64 or arm64 (default: this host's)")
	return cmd
}

// importScap reads one scap file: its syscalls are x86-64's, where the
// tracer that writes scap runs.
func importScap(args []string, archName, path string) error {
	if len(args) != 1 {
		return fmt.Errorf("import --from scap takes one file, not %d", len(args))
	}
	if archName != "" && archName != "x86_64" && archName != "amd64" {
		return fmt.Errorf("--arch %q: scap files are read as x86_64", archName)
	}
	st, err := scap.Import(args[0], path, os.Args)
	if err != nil {
		return err
	}
	to := path
	if path == "-" {
		to = "standard output"
	}
	fmt.Fprintf(os.Stderr, "sysray: imported %d events from %d scap events into %s (absent: %s)\n",
		st.Events, st.Read, to, strings.Join(st.AbsentFor(), ", "))
	for _, w := range st.Warnings() {
		fmt.Fprintf(os.Stderr, "sysray: warning: %s\n", w)
	}
	return nil
}
