package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/proc"
)

func newRecord() *cobra.Command {
	var sel selection
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
			ctrs := newLiveContainers()
			defer ctrs.Close()
			opts, flt, err := sel.build(args, ctrs)
			if err != nil {
				return err
			}
			arch := event.HostArch()
			snap, err := proc.Snapshot()
			if err != nil {
				return err
			}
			procs := proc.NewTable(snap)
			envv := env{arch: arch, procs: procs, ctrs: ctrs}
			node, kernel := host.Uname()
			names := syscallNames(arch)
			hdr := &capture.Header{
				Arch: arch, Hostname: node, Kernel: kernel,
				BootTime: host.BootTime(), Start: time.Now().UnixNano(),
				Command: os.Args, Syscalls: names, Procs: snap, Meta: host.Facts(),
			}
			hdr.Meta[metaContainers] = ctrs.snapshot()
			w, err := capture.Create(path, hdr)
			if err != nil {
				return err
			}
			var n uint64
			lastFlush := host.Mono()
			res, err := live.Run(opts, func(e *event.Event) error {
				procs.Update(e)
				ctrs.observe(e)
				if flt != nil && e.Kind != event.KindDrop && !flt.Match(e, envv) {
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
			reportDrops(res)
			if res.ExitCode != 0 {
				return &exitError{res.ExitCode}
			}
			return nil
		},
	}
	sel.register(cmd)
	cmd.Flags().StringVarP(&path, "write", "w", "", "capture file to write (created 0600)")
	return cmd
}
