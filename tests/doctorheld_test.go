package tests

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/sysray/sysray/internal/checkup"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/probe"
)

// The doctor's calls run in a row of bpf/fast.h until they switch out; a
// read that sleeps moves to its thread's task storage (fast_migrate), and
// one that a signal interrupts (-ERESTARTSYS) is held in the row until the
// thread's next entry shows it reached user space (hold_in_row). Every
// interrupted read fails, so every one crosses over: the program says how
// many times its handler ran, and that many reads must be emitted with
// -512, none unfinished. With "exit" the third handler ends the process:
// its read still returned.
func TestDoctorRestartedCalls(t *testing.T) {
	requireBPF(t)
	arch := event.HostArch()
	read, _ := event.SyscallByName(arch, "read")
	for _, exit := range []bool{false, true} {
		name, args := "returns", []string{prog("restart")}
		if exit {
			name, args = "exit", append(args, "exit")
		}
		t.Run(name, func(t *testing.T) {
			cfg := probe.Config{Stacks: true}
			checkup.Configure(&cfg, arch, checkup.Command)
			var out bytes.Buffer
			var pid uint32
			var restarted, unfinished int
			opts := live.Options{Probe: cfg, Command: args, Stdout: &out, Warn: func(string) {}}
			_, err := live.Run(opts, func(e *event.Event) error {
				if e.Kind != event.KindSyscall {
					return nil
				}
				if pid == 0 && e.Syscall.Nr != read {
					pid = e.PID // the command's first call
				}
				if e.PID != pid || e.Syscall.Nr != read {
					return nil
				}
				switch {
				case e.Syscall.Unfinished:
					unfinished++
				case e.Syscall.Ret == -512:
					restarted++
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			alarms := 3
			if !exit {
				var n int
				if _, err := fmt.Sscanf(out.String(), "%d %d", &alarms, &n); err != nil || n != 1 || alarms < 3 {
					t.Fatalf("restart said %q", out.String())
				}
			}
			if restarted != alarms || unfinished != 0 {
				t.Errorf("%d reads emitted with -ERESTARTSYS, %d unfinished; the handler ran %d times", restarted, unfinished, alarms)
			}
		})
	}
}

// The doctor counts exactly whichever path each call takes: eight
// processes forked by a shell, each calling getppid a known number of
// times, most calls in the row, some moved to task storage when the
// process is preempted in one (two CPUs, eight callers), with the table
// sized for the host and with two rows, where most processes count through
// task storage.
func TestDoctorCountsExact(t *testing.T) {
	requireBPF(t)
	arch := event.HostArch()
	getppid, _ := event.SyscallByName(arch, "getppid")
	const procs, calls = 8, 200000
	for _, rows := range []uint32{0, 2} {
		t.Run(fmt.Sprintf("rows=%d", rows), func(t *testing.T) {
			cfg := probe.Config{Stacks: true, FastRows: rows}
			checkup.Configure(&cfg, arch, checkup.Command)
			script := fmt.Sprintf("for i in $(seq %d); do %s %d & done; wait", procs, prog("getppid"), calls)
			counts := map[uint32]uint64{}
			opts := live.Options{
				Probe:   cfg,
				Command: []string{"sh", "-c", script},
				Warn:    func(string) {},
				Finished: func(p *probe.Probe) error {
					cells, _, err := p.Stats()
					for _, c := range cells {
						if c.Nr == getppid {
							counts[c.PID] += c.Count
						}
					}
					return err
				},
			}
			if _, err := live.Run(opts, func(*event.Event) error { return nil }); err != nil {
				t.Fatal(err)
			}
			n := 0
			for pid, c := range counts {
				if c == calls {
					n++
				} else if c > 10 { // sh and seq make none; glibc's start-up none either
					t.Errorf("pid %d: %d getppid calls counted, want exactly %d", pid, c, calls)
				}
			}
			if n != procs {
				t.Errorf("%d processes counted exactly %d getppid calls, want %d: %v", n, calls, procs, counts)
			}
		})
	}
}
