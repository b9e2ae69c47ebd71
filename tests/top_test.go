package tests

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sysray top in a real terminal (tmux): it draws, drills down from
// containers to processes to syscalls, re-sorts, and quits on q.
func TestTopInTerminal(t *testing.T) {
	requireBPF(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("SYSRAY_REQUIRE_BPF") == "1" {
			t.Fatal("tmux is not installed (.ci/run installs it)")
		}
		t.Skip("no tmux")
	}
	busy := exec.Command(prog("getppid"), "1000000000")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	defer busy.Process.Kill()

	const session = "sysray-top-test"
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", args...).CombinedOutput()
		if err != nil && args[0] != "has-session" {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	exec.Command("tmux", "kill-session", "-t", session).Run()
	// Only the loop (-p): on a busy host another process may make more
	// calls than it, and the drill-down below follows the first row.
	tmux("new-session", "-d", "-s", session, "-x", "150", "-y", "40", fmt.Sprintf("%s top --interval 300ms -p %d", sysray, busy.Process.Pid))
	defer exec.Command("tmux", "kill-session", "-t", session).Run()

	screen := func() string { return tmux("capture-pane", "-p", "-t", session) }
	waitFor := func(what string) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			s := screen()
			if strings.Contains(s, what) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("%q never appeared; the screen:\n%s", what, s)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitFor("sysray top — containers")
	waitFor("host")
	// Sort by calls (the one process, the loop, comes first either way).
	tmux("send-keys", "-t", session, "s")
	waitFor("sorted by calls")
	tmux("send-keys", "-t", session, "Enter")
	s := waitFor("sysray top — processes")
	if !strings.Contains(s, "getppid[") {
		s = waitFor("getppid[")
	}
	lines := strings.Split(s, "\n")
	var first string
	for _, l := range lines {
		if strings.HasPrefix(l, "> ") {
			first = l
		}
	}
	if !strings.Contains(first, "getppid[") {
		t.Fatalf("the busiest process by calls is not the getppid loop:\n%s", s)
	}
	tmux("send-keys", "-t", session, "Enter")
	waitFor("sysray top — syscalls in getppid[")
	waitFor(" getppid ")
	tmux("send-keys", "-t", session, "Escape")
	waitFor("sysray top — processes")
	tmux("send-keys", "-t", session, "q")
	deadline := time.Now().Add(5 * time.Second)
	for exec.Command("tmux", "has-session", "-t", session).Run() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("top did not quit on q:\n%s", screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestTopOnce(t *testing.T) {
	requireBPF(t)
	busy := exec.Command(prog("getppid"), "1000000000")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	defer busy.Process.Kill()
	r := run(t, "top", "--once", "--level", "process", "--sort", "calls", "--interval", "500ms")
	if r.code != 0 {
		t.Fatalf("top --once: exit %d: %s", r.code, r.stderr)
	}
	// The whole host: the loop is one of its processes, and the rows are
	// sorted by calls. (On a busy host another process may make more
	// calls than the loop.)
	lines := strings.Split(r.stdout, "\n")
	if len(lines) < 4 || !strings.Contains(lines[2], "SYSCALLS/s") {
		t.Fatalf("no process table:\n%s", r.stdout)
	}
	loop := fmt.Sprintf("getppid[%d]", busy.Process.Pid)
	var found bool
	prev := math.Inf(1)
	for _, l := range lines[3:] {
		// The name may hold spaces ("tmux: server"); six numbers follow it.
		f := strings.Fields(l)
		if len(f) < 7 {
			continue
		}
		calls, err := strconv.ParseFloat(f[len(f)-6], 64)
		if err != nil {
			t.Fatalf("row %q: calls %q: %v", l, f[len(f)-6], err)
		}
		if calls > prev {
			t.Errorf("rows not sorted by calls: %q after %.0f\n%s", l, prev, r.stdout)
		}
		prev = calls
		found = found || strings.Join(f[:len(f)-6], " ") == loop
	}
	if !found {
		t.Fatalf("the getppid loop %s is not in the table:\n%s", loop, r.stdout)
	}
}
