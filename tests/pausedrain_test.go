package tests

import (
	"sync"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/probe"
)

// pauseDrainMax is the agent's wait after pausing the per-syscall programs
// before it closes the doctor's window (internal/agent's dutyDrain): every
// call those programs saw must have reached the reader by then.
const pauseDrainMax = 150 * time.Millisecond

// The agent's readers sleep long on a ring while the per-syscall programs
// are paused (its readerPoll, 250 ms), but the calls seen before the pause
// still reach the reader within the agent's drain: with every call
// crossing over (Sample 1), a nanosleep a millisecond keeps calls ending
// right up to the pause. The merger holds a call back until every ring's
// reader has marked a time past it, and a drain made just after the pause
// marks a time before it; a reader that then slept its whole poll held
// the last calls back 250 ms, into the doctor's next window.
func TestPausedReadersDrainPromptly(t *testing.T) {
	requireBPF(t)
	for round := range 3 {
		var (
			mu       sync.Mutex
			pausedAt uint64 // the clock of the events, at the pause
			paused   time.Time
			seen     int           // calls that ended before the pause
			late     time.Duration // the latest of them reached the reader this long after it
		)
		// The agent's poll and rings (4 MiB: a reader sleeps 10 ms at most while
		// the programs are attached).
		cfg := probe.Config{Stat: true, Sample: 1, Poll: 250 * time.Millisecond, RingSize: 4 << 20}
		opts := live.Options{Probe: cfg, Command: []string{prog("sleeper"), "1", "1500"}, Warn: func(string) {},
			Started: func(p *probe.Probe) error {
				go func() {
					time.Sleep(700 * time.Millisecond)
					mu.Lock()
					defer mu.Unlock()
					p.PauseSyscalls()
					pausedAt, paused = host.Mono(), time.Now()
				}()
				return nil
			}}
		res, err := live.Run(opts, func(e *event.Event) error {
			if e.Kind != event.KindSyscall {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			if pausedAt == 0 || e.End() > pausedAt {
				if pausedAt == 0 {
					seen++
				}
				return nil
			}
			seen++
			late = max(late, time.Since(paused))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 {
			t.Fatalf("sleeper exited %d", res.ExitCode)
		}
		if pausedAt == 0 || seen < 100 {
			t.Fatalf("round %d: %d calls seen before the pause (paused: %v)", round, seen, pausedAt != 0)
		}
		t.Logf("round %d: %d calls before the pause, the last of them read %v after it", round, seen, late)
		if late > pauseDrainMax {
			t.Errorf("round %d: a call that ended before the pause reached the reader %v after it, past the agent's %v drain", round, late, pauseDrainMax)
		}
	}
}
