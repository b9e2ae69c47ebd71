package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/session"
)

func newRecord() *cobra.Command {
	var sel session.Selection
	var path string
	cmd := &cobra.Command{
		Use:   "record -w FILE [flags] [-- COMMAND [ARG...]]",
		Short: "Write events to a capture file for later reading",
		Example: `  sysray record -w ls.sysray -- ls /
  sysray record -w host.sysray --duration 30s`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if path == "" {
				return fmt.Errorf("record needs -w FILE")
			}
			ctrs := session.NewLive()
			defer ctrs.Close()
			opts, flt, err := sel.Build(args, ctrs)
			if err != nil {
				return err
			}
			arch := event.HostArch()
			snap, err := proc.Snapshot()
			if err != nil {
				return err
			}
			s := session.New(arch, proc.NewTable(snap), ctrs, flt)
			node, kernel := host.Uname()
			names := syscallNames(arch)
			hdr := &capture.Header{
				Arch: arch, Hostname: node, Kernel: kernel,
				BootTime: host.BootTime(), Start: time.Now().UnixNano(),
				Command: os.Args, Syscalls: names, Procs: snap, Meta: host.Facts(),
			}
			hdr.Meta[session.MetaContainers] = ctrs.Snapshot()
			stacksMeta(hdr.Meta, opts.Probe.Stacks, opts.Probe.Slow)
			w, err := capture.Create(path, hdr)
			if err != nil {
				return err
			}
			var n uint64
			lastFlush := host.Mono()
			res, err := live.Run(opts, func(e *event.Event) error {
				if !s.Pass(e) {
					return nil
				}
				n++
				if err := w.Write(e); err != nil {
					return err
				}
				// Keep what is written readable if sysray is killed.
				if n%1024 == 0 {
					if now := host.Mono(); now-lastFlush > uint64(time.Second) {
						lastFlush = now
						return w.Flush()
					}
				}
				return nil
			})
			cerr := w.Close(&capture.Trailer{Events: n, Drops: res.PerCPU, End: time.Now().UnixNano()})
			if err != nil {
				return err
			}
			if cerr != nil {
				return cerr
			}
			fmt.Fprintf(os.Stderr, "sysray: wrote %d events to %s\n", n, path)
			session.ReportDrops(os.Stderr, res)
			if res.ExitCode != 0 {
				return &exitError{res.ExitCode}
			}
			return nil
		},
	}
	registerSelection(cmd, &sel)
	durationHelp(cmd)
	cmd.Flags().StringVarP(&path, "write", "w", "", "capture file to write (created 0600)")
	return cmd
}

// Header meta keys that say which optional data a capture holds
// (docs/capture-format.md). A capture without "absent" predates them, or
// comes from a writer that does not say: what it holds is unknown.
const (
	metaAbsent     = "absent"      // what the writer did not collect, comma-separated; "" for nothing
	metaStacksSlow = "stacks_slow" // ns: calls at least this slow carry where they slept
)

// stacksMeta says in a capture's header whether sleeps and stacks were
// recorded, and for which calls: without them the doctor cannot tell a
// slow call that ran on the CPU from one that slept.
func stacksMeta(m map[string]string, stacks bool, slow uint64) {
	if !stacks {
		m[metaAbsent] = "stacks"
		return
	}
	if slow == 0 {
		slow = uint64(probeDefaultSlow)
	}
	m[metaAbsent] = ""
	m[metaStacksSlow] = strconv.FormatUint(slow, 10)
}

// probeDefaultSlow is the threshold the probe takes for a Slow of 0.
const probeDefaultSlow = 10 * time.Millisecond

// syscallNames is arch's syscall table, for a capture header: a reader
// elsewhere names the calls as this sysray did.
func syscallNames(arch event.Arch) []string {
	names := make([]string, event.MaxSyscall(arch)+1)
	for i := range names {
		names[i] = event.SyscallName(arch, uint32(i))
	}
	return names
}
