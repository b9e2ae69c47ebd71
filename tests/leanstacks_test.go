package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/probe"
)

// sleepStacks runs sleeper (three 30 ms nanosleeps) under cfg and returns,
// for each of its sleeping calls, the stack of its sleep ("" for none).
func sleepStacks(t *testing.T, cfg probe.Config) []string {
	t.Helper()
	var stacks []string
	opts := live.Options{Probe: cfg, Command: []string{prog("sleeper"), "30", "3"}, Warn: func(string) {}}
	res, err := live.Run(opts, func(e *event.Event) error {
		s := &e.Syscall
		if e.Kind != event.KindSyscall || !strings.HasSuffix(event.SyscallName(event.HostArch(), s.Nr), "nanosleep") || len(s.Sleeps) == 0 {
			return nil
		}
		var names []string
		for _, f := range s.Sleeps[0].Stack {
			names = append(names, f.Name)
		}
		stacks = append(stacks, strings.Join(names, " "))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("sleeper exited %d", res.ExitCode)
	}
	if len(stacks) != 3 {
		t.Fatalf("%d nanosleeps carried their sleeps, want 3: %q", len(stacks), stacks)
	}
	return stacks
}

// A call that waits by design, followed as the doctor follows it (lean
// stacks, the call among WaitCalls), takes its sleep's stack as it wakes,
// and only for a sleep of at least DeferNS: a 30 ms sleep carries the
// nanosleep path under a 1 ms bound, and nothing under a 100 ms one.
func TestLeanStacksDeferWaits(t *testing.T) {
	requireBPF(t)
	arch := event.HostArch()
	var waits []uint32
	for _, name := range []string{"nanosleep", "clock_nanosleep"} {
		if nr, ok := event.SyscallByName(arch, name); ok {
			waits = append(waits, nr)
		}
	}
	cfg := probe.Config{Stacks: true, LeanStacks: true, WaitCalls: waits, DeferNS: uint64(time.Millisecond)}
	for _, s := range sleepStacks(t, cfg) {
		// A sleeping task's stack, as the kernel gives it, leaves out the
		// scheduler's functions (__sched: schedule, do_nanosleep).
		if !strings.Contains(s, "hrtimer_nanosleep") || !strings.Contains(s, "clock_nanosleep") {
			t.Errorf("a 30 ms sleep over the 1 ms bound without the nanosleep path: %q", s)
		}
	}
	cfg.DeferNS = uint64(100 * time.Millisecond)
	for _, s := range sleepStacks(t, cfg) {
		if s != "" {
			t.Errorf("a 30 ms sleep under the 100 ms bound with a stack: %q", s)
		}
	}
}
