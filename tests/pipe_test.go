package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var sleepExecLine = regexp.MustCompile(`^\S+ \d+ sleep\((\d+):\d+\) exec `)

// When the reader of sysray trace's output goes (| head -1), sysray stops
// at once, though the command is quiet, kills the command, and ends as a
// writer to a closed pipe does: killed by SIGPIPE, status 141 in a shell.
func TestPipeReaderGoneEndsTrace(t *testing.T) {
	requireBPF(t)
	start := time.Now()
	sh := exec.Command("bash", "-c", `"$0" trace -- sleep 30 | head -1; echo "status=${PIPESTATUS[0]}"`, sysray)
	out, err := sh.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || lines[1] != "status=141" {
		t.Fatalf("want the exec line and status=141, got:\n%s", out)
	}
	m := sleepExecLine.FindStringSubmatch(lines[0])
	if m == nil {
		t.Fatalf("first line is not the sleep's exec: %q", lines[0])
	}
	if took > 10*time.Second {
		t.Errorf("took %s; the sleep was 30s, and the reader left at once", took.Round(time.Millisecond))
	}
	pid, _ := strconv.Atoi(m[1])
	if !waitFor(5*time.Second, func() bool { return !alive(pid) }) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the traced sleep (pid %d) outlived sysray", pid)
	}
}

// A sysray killed with SIGKILL, which it cannot catch, takes the command
// it traces with it.
func TestKilledSysrayKillsCommand(t *testing.T) {
	requireBPF(t)
	out := filepath.Join(t.TempDir(), "out")
	cmd, errb, child := startTraced(t, "sleep", "trace", "-o", out, "--", "sleep", "30")
	cmd.Process.Kill()
	// Not cmd.Wait: that also waits for every holder of the stderr pipe,
	// a command left running among them.
	cmd.Process.Wait()
	if !waitFor(5*time.Second, func() bool { return !alive(child) }) {
		t.Errorf("the command (pid %d) outlived sysray's SIGKILL: %s", child, errb.String())
	}
}

// Output that cannot be written is an error: what failed on stderr and
// exit 1, for every command that prints, text or JSON, live or from a file.
func TestWriteErrorsFail(t *testing.T) {
	requireBPF(t)
	dir := t.TempDir()
	capA, capB := filepath.Join(dir, "a.sysray"), filepath.Join(dir, "b.sysray")
	for _, c := range []string{capA, capB} {
		if r := run(t, "record", "-w", c, "--", prog("exit7")); r.code != 7 {
			t.Fatalf("record: exit %d: %s", r.code, r.stderr)
		}
	}
	const want = "sysray: write /dev/stdout: no space left on device\n"
	for _, args := range [][]string{
		{"trace", "--", "true"},
		{"trace", "--json", "--", "true"},
		{"trace", "-c", "--", "true"},
		{"stat", "--", "true"},
		{"doctor", "--", "true"},
		{"top", "--once", "--interval", "100ms"},
		{"read", capA},
		{"read", "--json", capA},
		{"stat", "-r", capA},
		{"doctor", "-r", capA},
		{"doctor", "--json", "-r", capA},
		{"diff", capA, capB},
		{"diff", "--json", capA, capB},
	} {
		full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(sysray, args...)
		cmd.Stdout = full
		var errb strings.Builder
		cmd.Stderr = &errb
		err = cmd.Run()
		full.Close()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != 1 || !strings.HasSuffix(errb.String(), want) {
			t.Errorf("sysray %s > /dev/full: exit %d, stderr %q; want exit 1 and %q", strings.Join(args, " "), code, errb.String(), want)
		}
	}
}
