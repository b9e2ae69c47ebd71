package tests

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The story: a loop that sleeps 1 ms shares its CPU with three pinned
// hogs at nice -10. The doctor says it waited for the CPU, behind whom,
// and why.
func TestStoryCPUWait(t *testing.T) {
	requireBPF(t)
	r := demo(t, "cpuwait")
	f := top(t, r, "cpu-wait", "warning")
	has(t, f, "waited_ns", "share_of_wanted_time", "long_waits", "holders", "reasons", "wait_hist")
	if s, _ := f.Evidence["share_of_wanted_time"].(float64); s < 0.5 {
		t.Errorf("share %v: the loop works microseconds a turn and waits milliseconds", s)
	}
	// 3 s of 1 ms sleeps: hundreds of turns, most of them late.
	if n, _ := f.Evidence["long_waits"].(float64); n < 20 {
		t.Errorf("%v long waits, want tens at least", f.Evidence["long_waits"])
	}
	for _, w := range []string{"affinity mask", "nice -10", "clock_nanosleep"} {
		if !strings.Contains(f.Summary, w) {
			t.Errorf("summary does not say %q:\n%s", w, f.Summary)
		}
	}
}

var (
	totalsRe = regexp.MustCompile(`cpuwait\((\d+):(\d+)\) cpu_wait totals run=[0-9.]+ms waited=([0-9.]+)ms`)
	resultRe = regexp.MustCompile(`victim 0 pid (\d+):.*\n.*RESULT .* turns=(\d+) .* late_total_us=(\d+) before_loop_us=(\d+)`)
)

// The kernel's count against the victim's own: it sleeps 1 ms at a time
// pinned with one hog, and sums how late it wakes. Its waits for the CPU,
// summed from its cpu_wait totals, are that lateness but for the timer's
// slack (at most 150 µs a turn: 50 µs of slack and the wake-up's own
// path) and for its waits outside the timed loop: before it, at most the
// time from the process's start to the loop (the victim says, to its
// clock tick: 10 ms), however loaded the host; after it, the wake-up from
// waiting for the hogs (10 ms), and 15% for the loop's own turns whose
// wait the timer's lateness does not show (a wait after the clock read).
func TestCPUWaitGroundTruth(t *testing.T) {
	requireBPF(t)
	bin := scenarioBin(t, "cpuwait")
	capf := t.TempDir() + "/w.sysray"
	r := run(t, "record", "--cpu-wait", "--stacks", "-w", capf, "--", bin, "-H", "1", "-N", "0", "-d", "2")
	if r.code != 0 {
		t.Fatalf("record: %d %s", r.code, r.stderr)
	}
	m := resultRe.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no RESULT from the victim: %s", r.stdout)
	}
	pid := m[1]
	turns, _ := strconv.ParseFloat(m[2], 64)
	late, _ := strconv.ParseFloat(m[3], 64)
	late /= 1e3 // ms
	before, _ := strconv.ParseFloat(m[4], 64)
	before /= 1e3 // ms
	rd := run(t, "read", capf)
	var waited float64
	n := 0
	for _, mm := range totalsRe.FindAllStringSubmatch(rd.stdout, -1) {
		if mm[1] != pid || mm[2] != pid {
			continue
		}
		w, _ := strconv.ParseFloat(mm[3], 64)
		waited += w
		n++
	}
	if n == 0 {
		t.Fatalf("no cpu_wait totals for the victim %s:\n%s", pid, rd.stdout)
	}
	lo, hi := late-turns*0.150-10, late*1.15+before+10+10
	t.Logf("victim %s: %.0f turns, %.1f ms late in all, %.1f ms from its start to its loop; the kernel counted %.1f ms waited in %d summaries",
		pid, turns, late, before, waited, n)
	if waited < lo || waited > hi {
		t.Errorf("waited %.1f ms, want %.1f to %.1f (%s)", waited, lo, hi, fmt.Sprint(late, " ms late"))
	}
}
