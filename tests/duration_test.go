package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runTimed runs sysray and says how long it took.
func runTimed(t *testing.T, args ...string) (result, time.Duration) {
	t.Helper()
	start := time.Now()
	r := run(t, args...)
	return r, time.Since(start)
}

var endedPID = regexp.MustCompile(`ending the command \(pid (\d+)\) with SIGTERM`)

// gone checks that the command sysray said it ended no longer exists.
func gone(t *testing.T, what, stderr string) {
	t.Helper()
	m := endedPID.FindStringSubmatch(stderr)
	if m == nil {
		t.Errorf("%s: sysray did not say it ended the command: %s", what, stderr)
		return
	}
	pid, _ := strconv.Atoi(m[1])
	if b, err := os.ReadFile("/proc/" + m[1] + "/cmdline"); err == nil && strings.HasPrefix(string(b), "sleep") {
		t.Errorf("%s: the command (pid %d) is still running", what, pid)
	}
}

// --duration with a command stops at the duration, not when the command is
// done: a 30 s sleep traced for 1 s is ended, and sysray exits 0, in trace,
// record, stat and doctor alike.
func TestDurationStopsCommand(t *testing.T) {
	alongside(t)
	requireBPF(t)
	dir := t.TempDir()
	capFile := filepath.Join(dir, "run.sysray")
	for _, c := range [][]string{
		{"trace", "--json", "-o", filepath.Join(dir, "trace.json")},
		{"record", "-w", capFile},
		{"stat", "-o", filepath.Join(dir, "stat.txt")},
		{"doctor", "-o", filepath.Join(dir, "doctor.txt")},
	} {
		r, took := runTimed(t, append(c, "--duration", "1s", "--", "sleep", "30")...)
		if r.code != 0 || took > 8*time.Second || took < time.Second {
			t.Errorf("%s --duration 1s -- sleep 30: exit %d after %s, want 0 after about 1 s: %s", c[0], r.code, took.Round(time.Millisecond), r.stderr)
		}
		gone(t, c[0], r.stderr)
	}
	// What was traced ends at the duration: the sleep in flight then is
	// unfinished, and the SIGTERM that ended it is not in the capture.
	rd := run(t, "read", "--json", capFile)
	var sleeps, unfinished, sigterm int
	for _, e := range parseJSON(t, rd.stdout) {
		if e.Syscall != nil && strings.HasSuffix(e.Syscall.Name, "nanosleep") {
			sleeps++
			if e.Syscall.Unfinished {
				unfinished++
			}
		}
		if strings.Contains(e.Text, "SIGTERM") || strings.Contains(e.Kind, "signal") {
			sigterm++
		}
	}
	if sleeps != 1 || unfinished != 1 || sigterm != 0 {
		t.Errorf("capture: %d sleeps, %d unfinished, %d signal events; want the one 30 s sleep, unfinished, and no signal:\n%s", sleeps, unfinished, sigterm, rd.stdout)
	}
}

// A command that ignores SIGTERM is killed after the grace sysray gives
// it (10 s); one that ends before the duration ends the run with its own
// status, as without --duration.
func TestDurationKillsOrKeepsStatus(t *testing.T) {
	alongside(t)
	requireBPF(t)
	out := filepath.Join(t.TempDir(), "out")
	// exec keeps SIGTERM ignored in sleep itself: nothing is left behind.
	r, took := runTimed(t, "trace", "-o", out, "--duration", "1s", "--", "sh", "-c", `trap "" TERM; exec sleep 30`)
	if r.code != 0 || took < 11*time.Second || took > 20*time.Second || !strings.Contains(r.stderr, "did not exit within 10s of SIGTERM; killing it") {
		t.Errorf("a command ignoring SIGTERM: exit %d after %s, want 0 after about 11 s: %s", r.code, took.Round(time.Millisecond), r.stderr)
	}
	gone(t, "ignoring SIGTERM", r.stderr)

	r, took = runTimed(t, "trace", "-o", out, "--duration", "30s", "--", "sh", "-c", "exit 3")
	if r.code != 3 || took > 8*time.Second || strings.Contains(r.stderr, "SIGTERM") {
		t.Errorf("a command done before the duration: exit %d after %s, want its 3 at once: %s", r.code, took.Round(time.Millisecond), r.stderr)
	}
}
