// Package tests runs sysray for real, on this kernel, against small C
// programs whose behaviour is known exactly, and checks what it reports
// against that ground truth (and against strace).
package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/launch"
)

var (
	sysray string // path to the built binary
	progs  string // directory of compiled test programs
	// auditBin is scenarios/bin/audit, which reads the audit status and
	// rules; set when root.
	auditBin string
)

func TestMain(m *testing.M) {
	// Tests that run live.Run in-process launch commands through this
	// binary, as sysray does through its own.
	launch.MaybeHelper()
	dir, err := os.MkdirTemp("", "sysray-tests")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Let an unprivileged user run the binary (TestUnprivileged).
	os.Chmod(dir, 0o755)
	code := setup(dir)
	if code == 0 {
		// Only root's tests change the host.
		root := os.Geteuid() == 0
		var before []string
		if root {
			before = hostState(auditBin)
		}
		code = m.Run()
		if root {
			if diff := hostChanges(before, hostState(auditBin)); len(diff) > 0 {
				fmt.Fprintf(os.Stderr, "the tests left the host changed (- before, + after):\n  %s\n", strings.Join(diff, "\n  "))
				code = 1
			}
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func setup(dir string) int {
	sysray = filepath.Join(dir, "sysray")
	build := exec.Command("go", "build", "-o", sysray, "../cmd/sysray")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building sysray: %v\n%s", err, out)
		return 1
	}
	// The audit scenario's binary reads the audit configuration and rules
	// (hostState).
	if os.Geteuid() == 0 {
		if out, err := exec.Command("make", "-s", "-C", "../scenarios", "bin/audit").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building scenarios/bin/audit: %v\n%s", err, out)
			return 1
		}
		auditBin, _ = filepath.Abs("../scenarios/bin/audit")
	}
	progs = filepath.Join(dir, "progs")
	os.Mkdir(progs, 0o755)
	srcs, _ := filepath.Glob("progs/*.c")
	for _, src := range srcs {
		out := filepath.Join(progs, strings.TrimSuffix(filepath.Base(src), ".c"))
		// Static, so the dynamic loader's syscalls do not vary with the host's libraries.
		cc := exec.Command("gcc", "-O2", "-static", "-pthread", "-Wall", "-fno-omit-frame-pointer", "-o", out, src)
		if b, err := cc.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "compiling %s: %v\n%s", src, err, b)
			return 1
		}
	}
	return 0
}

// alongside lets a test run at the same time as the others that call it,
// after every test that does not (go test -parallel sets how many at once).
// Only a test that mostly waits (an agent's windows and scrapes, a
// container's start, a browser) and asserts on its own processes, cgroups
// and ports may call it: one that changes the host (audit rules, sysctls,
// memory pressure) or whose finding depends on a quiet host (a timing
// threshold, the benign corpus, a variant) must not.
func alongside(t *testing.T) {
	t.Helper()
	t.Parallel()
}

// requireBPF skips a privileged test, or fails it when CI demands BPF.
func requireBPF(t *testing.T) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "not root"
	} else if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		why = "no kernel BTF"
	}
	if why == "" {
		return
	}
	if os.Getenv("SYSRAY_REQUIRE_BPF") == "1" {
		t.Fatalf("cannot run BPF tests (%s) but SYSRAY_REQUIRE_BPF=1", why)
	}
	t.Skipf("skipping BPF test: %s", why)
}

func prog(name string) string { return filepath.Join(progs, name) }

type result struct {
	stdout, stderr string
	code           int
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(sysray, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running sysray %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// runOut is run with sysray's output sent to a file (-o), so the traced
// program's own stdout does not mix with it.
func runOut(t *testing.T, args ...string) result {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	args = append([]string{args[0], "-o", out}, args[1:]...)
	r := run(t, args...)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("sysray %v wrote no output: %v (stderr %s)", args, err, r.stderr)
	}
	r.stdout = string(b)
	return r
}

// record is the subset of the JSON event schema the tests read.
type record struct {
	Type    string `json:"type"`
	Kind    string `json:"kind"`
	PID     uint32 `json:"pid"`
	TID     uint32 `json:"tid"`
	Comm    string `json:"comm"`
	Text    string `json:"text"`
	Syscall *struct {
		Name string `json:"name"`
		Args []struct {
			Name      string `json:"name"`
			Raw       uint64 `json:"raw"`
			Value     string `json:"value"`
			Truncated bool   `json:"truncated"`
		} `json:"args"`
		Ret        int64    `json:"ret"`
		Errno      string   `json:"errno"`
		LatencyNS  uint64   `json:"latency_ns"`
		Unfinished bool     `json:"unfinished"`
		UserStack  []string `json:"user_stack"`
		Sleeps     []struct {
			DurationNS uint64   `json:"duration_ns"`
			Stack      []string `json:"stack"`
			Waker      *struct {
				Comm  string   `json:"comm"`
				Stack []string `json:"stack"`
			} `json:"waker"`
		} `json:"sleeps"`
	} `json:"syscall"`
	Fault *struct {
		Addr  uint64 `json:"addr"`
		Flags string `json:"flags"`
	} `json:"fault"`
	Signal *struct {
		Name      string `json:"name"`
		CodeName  string `json:"code_name"`
		Addr      uint64 `json:"addr"`
		TargetPID uint32 `json:"target_pid"`
	} `json:"signal"`
	Exec *struct {
		Filename string   `json:"filename"`
		Argv     []string `json:"argv"`
	} `json:"exec"`
	Exit *struct {
		Code      int    `json:"code"`
		Signal    string `json:"signal"`
		GroupDead bool   `json:"group_dead"`
	} `json:"exit"`
}

func (r *record) arg(name string) string {
	for _, a := range r.Syscall.Args {
		if a.Name == name {
			return a.Value
		}
	}
	return ""
}

func parseJSON(t *testing.T, s string) []record {
	t.Helper()
	var out []record
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("bad JSON line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

type counts map[string][2]uint64 // calls, errors

func sysrayCounts(t *testing.T, out string) counts {
	t.Helper()
	var doc struct {
		Rows []struct {
			Name   string `json:"name"`
			Calls  uint64 `json:"calls"`
			Errors uint64 `json:"errors"`
		} `json:"rows"`
		Drops uint64 `json:"drops"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("bad summary %q: %v", out, err)
	}
	if doc.Drops != 0 {
		t.Fatalf("%d events dropped", doc.Drops)
	}
	c := counts{}
	for _, r := range doc.Rows {
		if r.Calls > 0 {
			c[r.Name] = [2]uint64{r.Calls, r.Errors}
		}
	}
	return c
}

var straceRow = regexp.MustCompile(`^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(\d*)\s*(\w+)$`)

func straceCounts(t *testing.T, args ...string) counts {
	t.Helper()
	out := filepath.Join(t.TempDir(), "strace.txt")
	cmd := exec.Command("strace", append([]string{"-f", "-c", "-o", out}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("strace: %v\n%s", err, b)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	c := counts{}
	for _, line := range strings.Split(string(b), "\n") {
		m := straceRow.FindStringSubmatch(line)
		if m == nil || m[3] == "total" {
			continue
		}
		calls, _ := strconv.ParseUint(m[1], 10, 64)
		errs, _ := strconv.ParseUint(m[2], 10, 64)
		c[m[3]] = [2]uint64{calls, errs}
	}
	if len(c) == 0 {
		t.Fatalf("no rows in strace output:\n%s", b)
	}
	return c
}

func sameCounts(t *testing.T, what string, got, want counts) {
	t.Helper()
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %s: got %d calls/%d errors, strace says %d/%d", what, name, got[name][0], got[name][1], w[0], w[1])
		}
	}
	for name, g := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: %s: %d calls that strace did not see", what, name, g[0])
		}
	}
}

func TestCountsMatchStrace(t *testing.T) {
	requireBPF(t)
	for _, cmd := range [][]string{
		{prog("getppid"), "20000"},
		{prog("openat"), filepath.Join(t.TempDir(), "f")},
		{prog("mmapfail")},
		{prog("exit7")},
		{prog("segv")},
	} {
		t.Run(filepath.Base(cmd[0]), func(t *testing.T) {
			want := straceCounts(t, cmd...)
			r := runOut(t, append([]string{"trace", "-c", "--json", "--"}, cmd...)...)
			sameCounts(t, "trace", sysrayCounts(t, r.stdout), want)

			file := filepath.Join(t.TempDir(), "c.sysray")
			run(t, append([]string{"record", "-w", file, "--"}, cmd...)...)
			r = runOut(t, "read", "-c", "--json", file)
			if r.code != 0 {
				t.Fatalf("read: exit %d: %s", r.code, r.stderr)
			}
			sameCounts(t, "record", sysrayCounts(t, r.stdout), want)
		})
	}
}

func TestExactCount(t *testing.T) {
	requireBPF(t)
	r := runOut(t, "trace", "-c", "--json", "--", prog("getppid"), "123456")
	if got := sysrayCounts(t, r.stdout)["getppid"]; got != [2]uint64{123456, 0} {
		t.Fatalf("getppid: got %v, want exactly 123456 calls", got)
	}
}

func TestOpenatArguments(t *testing.T) {
	requireBPF(t)
	path := filepath.Join(t.TempDir(), "known-file")
	r := runOut(t, "trace", "--json", "-e", "openat", "--", prog("openat"), path)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var ok, enoent bool
	for _, e := range parseJSON(t, r.stdout) {
		if e.Syscall == nil || e.Syscall.Name != "openat" {
			continue
		}
		switch e.arg("pathname") {
		case strconv.Quote(path):
			ok = true
			if got := e.arg("flags"); got != "O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC" {
				t.Errorf("flags = %q", got)
			}
			if got := e.arg("mode"); got != "0640" {
				t.Errorf("mode = %q", got)
			}
			if got := e.arg("dirfd"); got != "AT_FDCWD" {
				t.Errorf("dirfd = %q", got)
			}
			if e.Syscall.Ret < 0 {
				t.Errorf("ret = %d, want a file descriptor", e.Syscall.Ret)
			}
		case `"/nonexistent/sysray"`:
			enoent = true
			if e.Syscall.Ret != -2 || e.Syscall.Errno != "ENOENT" {
				t.Errorf("ret = %d %s, want -2 ENOENT", e.Syscall.Ret, e.Syscall.Errno)
			}
			if got := e.arg("flags"); got != "O_RDONLY" {
				t.Errorf("flags = %q", got)
			}
		}
	}
	if !ok || !enoent {
		t.Fatalf("missing openat events (known path %v, ENOENT %v):\n%s", ok, enoent, r.stdout)
	}
}

func TestMmapErrno(t *testing.T) {
	requireBPF(t)
	r := runOut(t, "trace", "--json", "-e", "mmap", "--", prog("mmapfail"))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var badf, low bool
	for _, e := range parseJSON(t, r.stdout) {
		if e.Syscall == nil {
			continue
		}
		if e.arg("fd") == "12345" {
			badf = true
			if e.Syscall.Errno != "EBADF" || e.Syscall.Ret != -9 {
				t.Errorf("mmap on fd 12345: ret %d %s, want -9 EBADF", e.Syscall.Ret, e.Syscall.Errno)
			}
		}
		if strings.Contains(e.arg("flags"), "MAP_32BIT") {
			low = true
			if e.arg("flags") != "MAP_PRIVATE|MAP_ANONYMOUS|MAP_32BIT" {
				t.Errorf("flags = %q", e.arg("flags"))
			}
			if e.Syscall.Ret <= 0 || e.Syscall.Ret >= 1<<31 {
				t.Errorf("MAP_32BIT mmap returned %#x, want an address below 2 GiB", e.Syscall.Ret)
			}
		}
	}
	if !badf || !low {
		t.Fatalf("missing mmap events (EBADF %v, MAP_32BIT %v):\n%s", badf, low, r.stdout)
	}
}

func TestChildKilledBySIGSEGV(t *testing.T) {
	requireBPF(t)
	r := runOut(t, "trace", "--json", "--", prog("segv"))
	if r.code != 0 {
		t.Fatalf("sysray exit %d (the parent exits 0): %s", r.code, r.stderr)
	}
	evs := parseJSON(t, r.stdout)
	var fault, gen, deliver, exit bool
	for _, e := range evs {
		switch {
		case e.Fault != nil:
			if e.Fault.Addr == 0x10 {
				fault = true
				if !strings.Contains(e.Fault.Flags, "WRITE_ACCESS") || !strings.Contains(e.Fault.Flags, "USER_FAULT") {
					t.Errorf("fault flags = %q", e.Fault.Flags)
				}
			}
		case e.Kind == "signal_generate" && e.Signal.Name == "SIGSEGV":
			gen = true
			if e.Signal.CodeName != "SEGV_MAPERR" || e.Signal.Addr != 0x10 {
				t.Errorf("signal_generate: code %s addr %#x, want SEGV_MAPERR 0x10", e.Signal.CodeName, e.Signal.Addr)
			}
		case e.Kind == "signal_deliver" && e.Signal.Name == "SIGSEGV":
			deliver = true
		case e.Exit != nil && e.Exit.Signal == "SIGSEGV":
			exit = true
			if !e.Exit.GroupDead {
				t.Errorf("exit of the child should end its process")
			}
		}
	}
	if !fault || !gen || !deliver || !exit {
		t.Fatalf("fault %v, signal_generate %v, signal_deliver %v, exit %v:\n%s", fault, gen, deliver, exit, r.stdout)
	}
}

func TestExitStatusPassesThrough(t *testing.T) {
	requireBPF(t)
	r := runOut(t, "trace", "--json", "-e", "exit_group", "--", prog("exit7"))
	if r.code != 7 {
		t.Fatalf("sysray exited %d, want the command's 7", r.code)
	}
	var exits int
	for _, e := range parseJSON(t, r.stdout) {
		if e.Exit != nil && e.Exit.GroupDead {
			exits++
			if e.Exit.Code != 7 || e.Exit.Signal != "" {
				t.Errorf("process exit: code %d signal %q, want 7", e.Exit.Code, e.Exit.Signal)
			}
		}
		if e.Syscall != nil && e.Syscall.Name == "exit_group" {
			if !e.Syscall.Unfinished || e.arg("status") != "7" {
				t.Errorf("exit_group: unfinished %v, arg %q", e.Syscall.Unfinished, e.arg("status"))
			}
		}
	}
	if exits != 1 {
		t.Fatalf("%d process exits, want 1:\n%s", exits, r.stdout)
	}
}

func TestExecEvent(t *testing.T) {
	requireBPF(t)
	r := runOut(t, "trace", "--json", "-e", "execve", "--", prog("getppid"), "3")
	var exec, execve bool
	for _, e := range parseJSON(t, r.stdout) {
		if e.Exec != nil {
			exec = true
			if e.Exec.Filename != prog("getppid") || strings.Join(e.Exec.Argv, " ") != prog("getppid")+" 3" {
				t.Errorf("exec: %q %q", e.Exec.Filename, e.Exec.Argv)
			}
		}
		if e.Syscall != nil && e.Syscall.Name == "execve" {
			execve = true
			if e.arg("pathname") != strconv.Quote(prog("getppid")) || e.Syscall.Ret != 0 {
				t.Errorf("execve: pathname %s ret %d", e.arg("pathname"), e.Syscall.Ret)
			}
		}
	}
	if !exec || !execve {
		t.Fatalf("exec %v execve %v:\n%s", exec, execve, r.stdout)
	}
}

func TestAttachToPID(t *testing.T) {
	requireBPF(t)
	target := exec.Command(prog("getppid"), "100000000")
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	defer target.Process.Kill()
	time.Sleep(50 * time.Millisecond)
	r := runOut(t, "trace", "--json", "-p", strconv.Itoa(target.Process.Pid), "--duration", "300ms")
	evs := parseJSON(t, r.stdout)
	if len(evs) < 1000 {
		t.Fatalf("only %d events from a process calling getppid in a loop", len(evs))
	}
	for _, e := range evs {
		if e.Kind == "drop" {
			continue // printing JSON cannot keep up with a tight loop; drops are reported, not hidden
		}
		if e.PID != uint32(target.Process.Pid) {
			t.Fatalf("event from pid %d, selected only %d: %+v", e.PID, target.Process.Pid, e)
		}
	}
}

func TestCaptureFile(t *testing.T) {
	requireBPF(t)
	file := filepath.Join(t.TempDir(), "c.sysray")
	r := run(t, "record", "-w", file, "--", prog("getppid"), "50000")
	if r.code != 0 {
		t.Fatalf("record: exit %d: %s", r.code, r.stderr)
	}
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("capture mode %v, want 0600", st.Mode().Perm())
	}
	full := run(t, "read", "--json", file)
	n := len(parseJSON(t, full.stdout))
	if n < 50000 {
		t.Fatalf("read %d events, want at least 50000", n)
	}

	// Cut the file in the middle: the reader must recover whole blocks and warn.
	b, _ := os.ReadFile(file)
	cut := filepath.Join(t.TempDir(), "cut.sysray")
	os.WriteFile(cut, b[:len(b)*2/3], 0o600)
	part := run(t, "read", "--json", cut)
	if part.code != 0 {
		t.Fatalf("truncated read: exit %d: %s", part.code, part.stderr)
	}
	if !strings.Contains(part.stderr, "truncated") {
		t.Errorf("no truncation warning: %q", part.stderr)
	}
	m := len(parseJSON(t, part.stdout))
	if m >= n {
		t.Errorf("truncated file gave %d events of %d", m, n)
	}
}

func TestBadInput(t *testing.T) {
	r := run(t, "trace", "-f", "evt.type = ", "--", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "column") {
		t.Errorf("bad filter: exit %d, stderr %q", r.code, r.stderr)
	}
	r = run(t, "read", "/etc/passwd")
	if r.code == 0 || !strings.Contains(r.stderr, "not a sysray capture") {
		t.Errorf("bad file: exit %d, stderr %q", r.code, r.stderr)
	}
	r = run(t, "read", "/nonexistent")
	if r.code == 0 || r.stderr == "" {
		t.Errorf("missing file: exit %d, stderr %q", r.code, r.stderr)
	}
	r = run(t, "trace", "-e", "notasyscall", "--", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "no such syscall") {
		t.Errorf("bad syscall: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, out := range []string{r.stderr} {
		if strings.Contains(out, "panic") {
			t.Errorf("panic: %s", out)
		}
	}
}

func TestUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop to another user")
	}
	cmd := exec.Command(sysray, "trace", "--", "true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("unprivileged trace succeeded: %s", out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "needs root") {
		t.Errorf("want one line saying root is needed, got %q", out)
	}
}

// A syscall still in flight when the capture stops is emitted, marked unfinished.
func TestUnfinishedAtStop(t *testing.T) {
	requireBPF(t)
	sleeper := exec.Command(prog("sleeper"))
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleeper.Process.Kill()
	time.Sleep(100 * time.Millisecond)
	// A whole sleep needs up to 800 ms after the attach (the rest of the
	// one in flight, then its own); 1.5 s leaves a loaded box its slack.
	r := runOut(t, "trace", "--json", "-p", strconv.Itoa(sleeper.Process.Pid), "--duration", "1500ms")
	defer func() {
		if t.Failed() {
			t.Logf("trace output:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		}
	}()
	var done, unfinished int
	for _, e := range parseJSON(t, r.stdout) {
		if e.Syscall == nil || !strings.HasSuffix(e.Syscall.Name, "nanosleep") {
			continue
		}
		if e.Syscall.Unfinished {
			unfinished++
			continue
		}
		done++
		// The first sleep began before tracing did and is not seen at all.
		if e.Syscall.Ret != 0 || e.Syscall.LatencyNS < uint64(400*time.Millisecond) || e.Syscall.LatencyNS > uint64(800*time.Millisecond) {
			t.Errorf("a 400 ms nanosleep: ret %d after %d ns", e.Syscall.Ret, e.Syscall.LatencyNS)
		}
	}
	if done < 1 || unfinished != 1 {
		t.Errorf("%d completed and %d unfinished sleeps, want >= 1 and exactly 1", done, unfinished)
	}
}

// A thread blocked in nanosleep for 50 ms is reported with the kernel's
// nanosleep path, the time it slept there, and the timer that woke it.
func TestSleepStack(t *testing.T) {
	requireBPF(t)
	r := runOut(t, "trace", "--json", "--stacks", "-e", "clock_nanosleep,nanosleep", "--duration", "1s", "--", prog("sleeper"), "50")
	var calls, slept, woken, user int
	for _, e := range parseJSON(t, r.stdout) {
		if e.Syscall == nil || !strings.HasSuffix(e.Syscall.Name, "nanosleep") || e.Syscall.Unfinished {
			continue
		}
		calls++
		if len(e.Syscall.Sleeps) == 0 {
			continue
		}
		slept++
		sl := e.Syscall.Sleeps[0]
		// Up to 90 ms: a loaded VM may fire the timer late.
		if sl.DurationNS < uint64(49*time.Millisecond) || sl.DurationNS > uint64(90*time.Millisecond) || sl.DurationNS > e.Syscall.LatencyNS {
			t.Errorf("slept %d ns of a %d ns call, want about 50 ms", sl.DurationNS, e.Syscall.LatencyNS)
		}
		stack := strings.Join(sl.Stack, " ")
		for _, fn := range []string{"do_nanosleep", "hrtimer_nanosleep", "schedule"} {
			if !strings.Contains(stack, fn) {
				t.Errorf("sleep stack lacks %s: %s", fn, stack)
			}
		}
		if strings.Contains(stack, "bpf_prog_") {
			t.Errorf("sleep stack shows sysray's own program: %s", stack)
		}
		if sl.Waker != nil && strings.Contains(strings.Join(sl.Waker.Stack, " "), "hrtimer_wakeup") {
			woken++
		}
		// The user stack, taken as the call returns: libc's nanosleep,
		// in the program.
		if us := strings.Join(e.Syscall.UserStack, " "); strings.Contains(us, "nanosleep") && strings.Contains(us, "(sleeper)") {
			user++
		}
	}
	// Each 50 ms call sleeps once and is woken by its timer. The kernel
	// runs a tracing program only once at a time per CPU, so under load a
	// timer interrupt that lands while the wakeup program runs for another
	// task goes unseen: about 1 sleep in 200 lost its waker or its sleep
	// during a parallel go build. Every 50 ms call must still be seen, and
	// nearly all of them whole.
	if calls < 10 {
		t.Fatalf("%d completed nanosleeps in 1 s of 50 ms ones:\n%s", calls, r.stdout)
	}
	if slept*10 < calls*9 || woken*10 < calls*9 || user*10 < calls*9 {
		t.Errorf("of %d nanosleeps, %d carry their sleep, %d the hrtimer as waker and %d libc's nanosleep in their user stack; "+
			"want 9 in 10 at least", calls, slept, woken, user)
	}
}
