package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Flags whose values cannot mean anything are refused before any tracing,
// with what is wrong and what would do, and exit 1: a negative latency
// (which would drop every finished syscall), a --comm longer than the
// kernel keeps (which could never match), an unknown sort key.
func TestRefusesMeaninglessInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"trace", "--min-latency", "-1ms", "--", "true"}, "sysray: --min-latency -1ms: a latency cannot be negative\n"},
		{[]string{"stat", "--min-latency", "-5us", "--", "true"}, "sysray: --min-latency -5µs: a latency cannot be negative\n"},
		{[]string{"trace", "--comm", "abcdefghijklmnop", "--", "true"}, `sysray: --comm "abcdefghijklmnop" is 16 bytes, and the kernel keeps only the first 15 of a thread's name, ` +
			`so it would never match; use --comm "abcdefghijklmno", which matches every name that begins so` + "\n"},
		{[]string{"top", "--once", "--sort", "bogus"}, "sysray: --sort bogus: want time, calls, p99, errors, vsyscalls, faults\n"},
		{[]string{"stat", "--sort", "bogus", "--", "true"}, "sysray: --sort bogus: want time, calls, errors, p99, max or name\n"},
	} {
		r := run(t, c.args...)
		if r.code != 1 || r.stderr != c.want || r.stdout != "" {
			t.Errorf("sysray %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", strings.Join(c.args, " "), r.code, r.stdout, r.stderr, c.want)
		}
	}
}

// A --comm of 15 bytes matches a program whose file name is longer: the
// kernel cut its name to those 15 bytes at exec.
func TestCommOfFifteenBytes(t *testing.T) {
	requireBPF(t)
	bin := filepath.Join(t.TempDir(), "abcdefghijklmnopqrst")
	b, err := os.ReadFile(prog("exit7"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	r := runOut(t, "trace", "--comm", "abcdefghijklmno", "-e", "exit_group", "--", bin)
	if r.code != 7 || !regexp.MustCompile(`(?m) abcdefghijklmno\(\d+:\d+\) exit_group\(7\) `).MatchString(r.stdout) {
		t.Errorf("exit %d, want 7, and an exit_group(7) by abcdefghijklmno in:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// pidsOf lists the processes whose parent is ppid and whose name is comm.
func pidsOf(ppid int, comm string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(s[close+1:])
		if len(f) < 2 || s[open+1:close] != comm {
			continue
		}
		if pp, _ := strconv.Atoi(f[1]); pp == ppid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// alive reports whether pid exists and has not exited (a zombie has).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

// waitFor polls cond every 20 ms for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// startTraced starts sysray with args and waits for the command it runs,
// named comm, to be its child; it returns both, and stops sysray if the
// test ends first.
func startTraced(t *testing.T, comm string, args ...string) (*exec.Cmd, *syncBuffer, int) {
	t.Helper()
	cmd := exec.Command(sysray, args...)
	errb := new(syncBuffer)
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	var child int
	if !waitFor(20*time.Second, func() bool {
		if p := pidsOf(cmd.Process.Pid, comm); len(p) == 1 {
			child = p[0]
			return true
		}
		return false
	}) {
		t.Fatalf("sysray %v: no %s child after 20s: %s", args, comm, errb.String())
	}
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
	return cmd, errb, child
}

// syncBuffer is a buffer a test may read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitExit waits up to d for cmd to exit and returns its status (-1 if it
// was killed by a signal, -2 if it did not exit in time).
func waitExit(cmd *exec.Cmd, d time.Duration) int {
	ch := make(chan *os.ProcessState, 1)
	go func() {
		// Not cmd.Wait, which also waits for the command if it still
		// holds sysray's stderr.
		st, _ := cmd.Process.Wait()
		ch <- st
	}()
	select {
	case st := <-ch:
		return st.ExitCode()
	case <-time.After(d):
		return -2
	}
}

// A command that ignores SIGINT keeps running after the first interrupt,
// and sysray says so; the second kills it, and sysray exits 130, as a
// program Ctrl-C ended does.
func TestSecondInterruptKills(t *testing.T) {
	requireBPF(t)
	out := t.TempDir() + "/out"
	cmd, errb, child := startTraced(t, "sleep", "trace", "-o", out, "--", "sh", "-c", `trap "" INT; exec sleep 30`)
	cmd.Process.Signal(syscall.SIGINT)
	// Named sleep, the command has exec'd, with SIGINT ignored: sh's trap
	// set it so, and exec keeps it.
	waitFor(6*time.Second, func() bool { return strings.Contains(errb.String(), "still running") })
	if !alive(child) {
		t.Fatalf("the command (pid %d) ended on the first SIGINT, which it ignores: %s", child, errb.String())
	}
	want := "sysray: the command (pid " + strconv.Itoa(child) + ") is still running after SIGINT; interrupt again to kill it\n"
	if !strings.Contains(errb.String(), want) {
		t.Errorf("after one SIGINT, stderr %q; want it to hold %q", errb.String(), want)
	}
	cmd.Process.Signal(syscall.SIGINT)
	code := waitExit(cmd, 10*time.Second)
	if code != 130 {
		t.Errorf("after a second SIGINT: exit %d, want 130 (-2: still running): %s", code, errb.String())
	}
	want = "sysray: interrupted again: killing the command (pid " + strconv.Itoa(child) + ") and stopping\n"
	if !strings.Contains(errb.String(), want) {
		t.Errorf("stderr %q; want it to hold %q", errb.String(), want)
	}
	if alive(child) {
		t.Errorf("the command (pid %d) still runs", child)
	}
}
