package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostRecord records the whole host (the fast path, bpf/fast.h: no task
// storage on the way in or out) while fn runs, and returns the events.
// rows, if not empty, sets the fast path's table size (--fast-rows).
func hostRecord(t *testing.T, rows string, fn func()) []record {
	t.Helper()
	file := filepath.Join(t.TempDir(), "host.sysray")
	rec, stderr := startHost(t, rows, "record", "-w", file)
	fn()
	if err := rec.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := rec.Wait(); err != nil {
		t.Fatalf("sysray record: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "lost") {
		t.Fatalf("record lost events: %s", stderr.String())
	}
	r := runOut(t, "read", "--json", file)
	if r.code != 0 {
		t.Fatalf("read: exit %d: %s", r.code, r.stderr)
	}
	return parseJSON(t, r.stdout)
}

// execCounts counts the calls of the process that executed path, from
// its execve on, and of the processes it started, as strace -f -c counts
// the program it starts: unfinished calls (exit_group) are not counted.
func execCounts(t *testing.T, evs []record, path string) counts {
	t.Helper()
	// Who is in the tree first: the reader orders events by their entry
	// within a window, and a child's first call may come before the
	// parent's clone that returned it.
	tree := map[uint32]bool{}
	root := uint32(0)
	for _, e := range evs {
		if e.Syscall != nil && e.Syscall.Name == "execve" && e.Syscall.Ret == 0 && len(e.Syscall.Args) > 0 &&
			strings.Contains(e.Syscall.Args[0].Value, path) {
			root = e.PID
			tree[root] = true
			break
		}
	}
	if len(tree) == 0 {
		t.Fatalf("no execve of %s in the record", path)
	}
	for grew := true; grew; {
		grew = false
		for _, e := range evs {
			if e.Syscall == nil || !tree[e.PID] || e.Syscall.Ret <= 0 {
				continue
			}
			switch e.Syscall.Name {
			case "clone", "clone3", "fork", "vfork":
				if child := uint32(e.Syscall.Ret); !tree[child] {
					tree[child], grew = true, true
				}
			}
		}
	}
	c := counts{}
	execed := false
	for _, e := range evs {
		if e.Syscall == nil || e.Syscall.Unfinished || !tree[e.PID] {
			continue
		}
		// The root's calls before its execve were strace's, setting up.
		if e.PID == root && !execed {
			if execed = e.Syscall.Name == "execve"; !execed {
				continue
			}
		}
		v := c[e.Syscall.Name]
		v[0]++
		if e.Syscall.Ret < 0 && e.Syscall.Ret >= -4095 {
			v[1]++
		}
		c[e.Syscall.Name] = v
	}
	return c
}

// A record of the whole host holds exactly what strace -c sees of each
// program in the same run: the fast path loses no call and no failure,
// and exits by signal, exit_group and the rest come out as on the task
// storage path. With two rows, threads share rows all the time and many
// calls take the task storage path: one thread's calls go both ways.
func TestHostRecordMatchesStrace(t *testing.T) {
	requireBPF(t)
	for _, rows := range []string{"", "2"} {
		for _, cmd := range [][]string{
			{prog("getppid"), "20000"},
			{prog("openat"), filepath.Join(t.TempDir(), "f")},
			{prog("mmapfail")},
			{prog("exit7")},
			{prog("segv")},
		} {
			t.Run(filepath.Base(cmd[0])+"/rows="+rows, func(t *testing.T) {
				var want counts
				evs := hostRecord(t, rows, func() { want = straceCounts(t, cmd...) })
				sameCounts(t, "host record", execCounts(t, evs, cmd[0]), want)
			})
		}
	}
}

// The call a thread is in when a whole-host record stops is written
// unfinished, as with -p (TestUnfinishedAtStop).
func TestHostRecordUnfinishedAtStop(t *testing.T) {
	requireBPF(t)
	sleeper := exec.Command(prog("sleeper"))
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleeper.Process.Kill()
	evs := hostRecord(t, "", func() { time.Sleep(1500 * time.Millisecond) })
	var done, unfinished int
	for _, e := range evs {
		if e.PID != uint32(sleeper.Process.Pid) || e.Syscall == nil || !strings.HasSuffix(e.Syscall.Name, "nanosleep") {
			continue
		}
		if e.Syscall.Unfinished {
			unfinished++
		} else {
			done++
		}
	}
	if done < 1 || unfinished != 1 {
		t.Errorf("%d completed and %d unfinished sleeps, want >= 1 and exactly 1", done, unfinished)
	}
}

// A read interrupted by a signal whose handler has SA_RESTART ends each
// attempt with -ERESTARTSYS (-512) and starts again after the handler:
// every attempt is a call of its own, held until the thread's next entry
// shows it reached user space. The program says how many times its
// handler ran; that many reads end in -512, and one more returns a byte.
// With "exit", the third handler ends the process: its read still
// returned (-512, not unfinished), shown by the exit_group that follows.
// Both paths: the fast one (bpf/fast.h), and task storage (--stacks).
func TestRestartedCalls(t *testing.T) {
	requireBPF(t)
	check := func(t *testing.T, evs []record, pid int, exit bool, out string) {
		alarms, n := 3, 0
		if !exit {
			if _, err := fmt.Sscanf(out, "%d %d", &alarms, &n); err != nil || n != 1 || alarms < 3 {
				t.Fatalf("restart said %q", out)
			}
		}
		var restarted, ok, sigreturns, unfinished int
		for _, e := range evs {
			if e.PID != uint32(pid) || e.Syscall == nil {
				continue
			}
			switch {
			case e.Syscall.Name == "read" && e.Syscall.Unfinished:
				unfinished++
			case e.Syscall.Name == "read" && e.Syscall.Ret == -512:
				restarted++
			case e.Syscall.Name == "read" && e.Syscall.Ret == 1:
				ok++
			case e.Syscall.Name == "rt_sigreturn":
				sigreturns++
			}
		}
		wantOK, wantSigreturns := 1, alarms
		if exit {
			wantOK, wantSigreturns = 0, alarms-1
		}
		if restarted != alarms || ok != wantOK || sigreturns != wantSigreturns || unfinished != 0 {
			t.Errorf("%d reads ended -ERESTARTSYS, %d returned a byte, %d unfinished, %d rt_sigreturn; the handler ran %d times",
				restarted, ok, unfinished, sigreturns, alarms)
		}
	}
	for _, exit := range []bool{false, true} {
		var progArgs []string
		suffix := ""
		if exit {
			progArgs, suffix = []string{"exit"}, "-exit"
		}
		for _, path := range []struct {
			name  string
			flags []string
		}{{"command", nil}, {"task-storage", []string{"--stacks"}}} {
			t.Run(path.name+suffix, func(t *testing.T) {
				file := filepath.Join(t.TempDir(), "c.sysray")
				args := append(append([]string{"record"}, path.flags...), "-w", file, "--", prog("restart"))
				r := run(t, append(args, progArgs...)...)
				if r.code != 0 {
					t.Fatalf("record: exit %d: %s", r.code, r.stderr)
				}
				rd := runOut(t, "read", "--json", file)
				evs := parseJSON(t, rd.stdout)
				pid := 0
				for _, e := range evs {
					if e.Syscall != nil && e.Syscall.Name == "execve" {
						pid = int(e.PID)
						break
					}
				}
				check(t, evs, pid, exit, r.stdout)
			})
		}
		t.Run("host"+suffix, func(t *testing.T) {
			var out bytes.Buffer
			var pid int
			evs := hostRecord(t, "", func() {
				c := exec.Command(prog("restart"), progArgs...)
				c.Stdout = &out
				if err := c.Run(); err != nil {
					t.Errorf("restart: %v", err)
				}
				pid = c.Process.Pid
			})
			check(t, evs, pid, exit, out.String())
		})
	}
}

// TestNamesFollowRenames: a record's thread id and name come from what the
// thread cached at its first call (bpf/state.h, struct ids), so every way
// they change must reach the cache: a rename by the thread itself, a
// rename by another thread, and an execve from a thread that is not the
// leader (it takes the process's id). tests/progs/rename.c writes down its
// thread id and name before each getppid; the records must say the same.
func TestNamesFollowRenames(t *testing.T) {
	requireBPF(t)
	check := func(t *testing.T, evs []record, truth string) {
		t.Helper()
		b, err := os.ReadFile(truth)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Fields(string(b))
		if len(want) != 10 {
			t.Fatalf("rename wrote %q, want 5 calls", b)
		}
		pid := uint32(0)
		var got []string
		for _, e := range evs {
			if e.Syscall == nil || e.Syscall.Name != "getppid" {
				continue
			}
			if pid == 0 {
				pid = e.PID // the first call is the leader's: its id is the process's
			}
			if e.PID == pid {
				got = append(got, fmt.Sprint(e.TID), e.Comm)
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("records say %q, the program %q", got, want)
		}
	}
	for _, path := range []struct {
		name  string
		flags []string
	}{{"fast", nil}, {"task-storage", []string{"--stacks"}}} {
		t.Run(path.name, func(t *testing.T) {
			truth := filepath.Join(t.TempDir(), "truth")
			args := append(append([]string{"trace", "--json", "-e", "getppid"}, path.flags...), "--", prog("rename"), truth)
			r := runOut(t, args...)
			if r.code != 0 {
				t.Fatalf("trace: exit %d: %s", r.code, r.stderr)
			}
			check(t, parseJSON(t, r.stdout), truth)
		})
	}
	t.Run("host", func(t *testing.T) {
		truth := filepath.Join(t.TempDir(), "truth")
		evs := hostRecord(t, "", func() {
			if out, err := exec.Command(prog("rename"), truth).CombinedOutput(); err != nil {
				t.Fatalf("rename: %v: %s", err, out)
			}
		})
		var mine []record
		for _, e := range evs {
			if e.Comm == "rename" || e.Comm == "self-named" || e.Comm == "other-named" {
				mine = append(mine, e)
			}
		}
		check(t, mine, truth)
	})
}

// TestCapturedArgsStaged: records with captured arguments are staged per
// CPU like the rest (bpf/emit.h), at every size they can have. Each of
// tests/progs/paths.c's openat calls must carry its path whole (up to 255
// bytes; a longer one, or one of exactly 255 bytes, which fills the slot
// alike, is cut there and marked truncated), and each sendto its port.
func TestCapturedArgsStaged(t *testing.T) {
	requireBPF(t)
	const dir = "/nonexistent-sysray"
	check := func(t *testing.T, evs []record) {
		t.Helper()
		var paths, ports []string
		for _, e := range evs {
			if e.Syscall == nil || e.Comm != "paths" {
				continue
			}
			switch s := e.Syscall; s.Name {
			case "openat":
				if len(s.Args) < 2 {
					t.Fatalf("openat with %d arguments", len(s.Args))
				}
				a := s.Args[1]
				paths = append(paths, fmt.Sprintf("%s %v", a.Value, a.Truncated))
			case "sendto":
				if len(s.Args) < 5 {
					t.Fatalf("sendto with %d arguments", len(s.Args))
				}
				ports = append(ports, s.Args[4].Value)
			}
		}
		var wantPaths, wantPorts []string
		for n := len(dir) + 2; n <= 300; n++ {
			p := dir + "/" + strings.Repeat(string(rune('a'+n%26)), n-len(dir)-1)
			if n >= 255 {
				wantPaths = append(wantPaths, fmt.Sprintf("%q... true", p[:255]))
			} else {
				wantPaths = append(wantPaths, fmt.Sprintf("%q false", p))
			}
			wantPorts = append(wantPorts, fmt.Sprintf(`{sa_family=AF_INET, sin_port=htons(%d), sin_addr=inet_addr("127.0.0.1")}`, n))
		}
		if len(paths) != len(wantPaths) || len(ports) != len(wantPorts) {
			t.Fatalf("%d openat and %d sendto records, want %d of each", len(paths), len(ports), len(wantPaths))
		}
		for i := range paths {
			if paths[i] != wantPaths[i] {
				t.Fatalf("openat %d: %s, want %s", i, paths[i], wantPaths[i])
			}
			if ports[i] != wantPorts[i] {
				t.Fatalf("sendto %d: %s, want %s", i, ports[i], wantPorts[i])
			}
		}
	}
	for _, path := range []struct {
		name  string
		flags []string
	}{{"fast", nil}, {"task-storage", []string{"--stacks"}}} {
		t.Run(path.name, func(t *testing.T) {
			args := append(append([]string{"trace", "--json", "-e", "openat,sendto"}, path.flags...), "--", prog("paths"), dir)
			r := runOut(t, args...)
			if r.code != 0 {
				t.Fatalf("trace: exit %d: %s", r.code, r.stderr)
			}
			check(t, parseJSON(t, r.stdout))
		})
	}
	t.Run("host", func(t *testing.T) {
		check(t, hostRecord(t, "", func() {
			if out, err := exec.Command(prog("paths"), dir).CombinedOutput(); err != nil {
				t.Fatalf("paths: %v: %s", err, out)
			}
		}))
	})
}
