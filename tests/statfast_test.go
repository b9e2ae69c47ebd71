package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Stat of the whole host counts without task storage (bpf/fast.h): a
// thread's counts wait in a row picked by its kernel stack's address. Two
// processes start and join threads over and over, so stacks pass from
// thread to thread and from one process to the other, and end with threads
// that stay alive (their counts still pending when stat stops). Each
// process's getppid count must be exact. With --fast-rows 2 every row
// is shared: a thread whose row another live thread holds counts through
// task storage, and rows pass to new threads as their owners exit.
func TestStatFastPathExact(t *testing.T) {
	requireBPF(t)
	const n, threads, rounds = 3000, 4, 20
	const want = n * threads * (rounds + 1)
	for _, rows := range []string{"", "2"} {
		name := "sized"
		if rows != "" {
			name = rows + "-rows"
		}
		t.Run(name, func(t *testing.T) {
			var procs [2]*exec.Cmd
			var outs [2]*bufio.Reader
			for i := range procs {
				c := exec.Command(prog("churn"), strconv.Itoa(n), strconv.Itoa(threads), strconv.Itoa(rounds))
				stdout, err := c.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
				procs[i], outs[i] = c, bufio.NewReader(stdout)
				t.Cleanup(func() {
					c.Process.Kill()
					c.Wait()
				})
			}
			out := filepath.Join(t.TempDir(), "stat.json")
			st, stderr := startHost(t, rows, "stat", "--json", "-o", out, "--by", "process", "-e", "getppid")
			for _, c := range procs {
				if err := c.Process.Signal(syscall.SIGUSR1); err != nil {
					t.Fatal(err)
				}
			}
			for i, r := range outs {
				if line, err := r.ReadString('\n'); err != nil || line != "done\n" {
					t.Fatalf("churn %d said %q: %v", i, line, err)
				}
			}
			if err := st.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			if err := st.Wait(); err != nil {
				t.Fatalf("sysray stat: %v\n%s", err, stderr.String())
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			var d statDoc
			if err := json.Unmarshal(b, &d); err != nil {
				t.Fatalf("bad stat JSON: %v\n%s", err, b)
			}
			if d.Drops != 0 {
				t.Errorf("%d syscalls not counted", d.Drops)
			}
			for _, c := range procs {
				tag := fmt.Sprintf("[%d]", c.Process.Pid)
				var got uint64
				for _, r := range d.Rows {
					if strings.HasSuffix(r.Name, tag) {
						got += r.Calls
					}
				}
				if got != want {
					t.Errorf("pid %d: %d getppid calls counted, want exactly %d", c.Process.Pid, got, want)
				}
			}
		})
	}
}

// startHost starts sysray tracing the whole host (args) and returns once
// it is attached; rows, if not empty, sets the fast path's table size
// (--fast-rows). It is killed when the test ends.
func startHost(t *testing.T, rows string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	if rows != "" {
		args = append(args, "--fast-rows", rows)
	}
	c := exec.Command(sysray, args...)
	stderr := &bytes.Buffer{}
	c.Stderr = stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill() })
	waitLinks(t, c.Process.Pid, stderr)
	return c, stderr
}

// waitLinks waits until sysray (pid) holds its BPF links and has stopped
// adding them: it is then attached. Tracing the whole host says nothing
// when it is, unlike -p.
func waitLinks(t *testing.T, pid int, stderr *bytes.Buffer) {
	t.Helper()
	last, stable := 0, 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		links := 0
		for _, fd := range fds {
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); l == "anon_inode:bpf_link" {
				links++
			}
		}
		if links >= 2 && links == last {
			if stable++; stable >= 4 {
				return
			}
		} else {
			stable = 0
		}
		last = links
	}
	t.Fatalf("sysray did not attach in 30 s: %s", stderr.String())
}
