package tests

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/probe"
)

// The doctor's timing (budgeted, as stat's: docs/doctor-internals.md) must add up:
// the kernel's total for calls that run tens of milliseconds on the CPU,
// against the program's own clock around them, within a tick a call. The
// counts stay exact.
func TestDoctorTimingTotals(t *testing.T) {
	requireBPF(t)
	hz := host.HZ()
	if hz == 0 {
		t.Skip("the kernel's CONFIG_HZ is not readable here: no tick to bound the error by")
	}
	tick := uint64(time.Second) / uint64(hz)
	cfg := probe.Config{Stat: true, Sample: 64, SampleGap: uint64(time.Millisecond), Stacks: true, Firsts: true}
	cfg.UseBudget()
	const calls = 6
	var out bytes.Buffer
	var total, count uint64
	arch := event.HostArch()
	getrandom, _ := event.SyscallByName(arch, "getrandom")
	opts := live.Options{
		Probe:   cfg,
		Command: []string{prog("slowcpu"), strconv.Itoa(calls)},
		Stdout:  &out,
		Warn:    func(string) {},
		Finished: func(p *probe.Probe) error {
			cells, _, err := p.Stats()
			for _, c := range cells {
				if c.Nr == getrandom {
					total += c.Total
					count += c.Count
				}
			}
			return err
		},
	}
	if _, err := live.Run(opts, func(*event.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	want, err := strconv.ParseUint(strings.TrimSpace(out.String()), 10, 64)
	if err != nil {
		t.Fatalf("slowcpu printed %q", out.String())
	}
	// glibc may split a call; each is at least one.
	if count < calls {
		t.Fatalf("%d getrandom calls counted, want at least %d", count, calls)
	}
	slack := (count + 1) * tick
	if total+slack < want || total > want+slack {
		t.Errorf("kernel total %v for getrandom, the program measured %v: off by more than a tick a call (%v)",
			time.Duration(total), time.Duration(want), time.Duration(slack))
	}
}
