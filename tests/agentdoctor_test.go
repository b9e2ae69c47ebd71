package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

type agentFinding struct {
	ID          string            `json:"id"`
	Severity    string            `json:"severity"`
	Title       string            `json:"title"`
	Occurrences int               `json:"occurrences"`
	Active      bool              `json:"active"`
	Labels      []json.RawMessage `json:"labels"`
	Evidence    map[string]any    `json:"evidence"`
}

func (a *agentProc) findings(t *testing.T) []agentFinding {
	t.Helper()
	resp, err := http.Get(a.base + "/api/findings")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Findings []agentFinding }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Findings
}

type agentCapture struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

func (a *agentProc) captures(t *testing.T) []agentCapture {
	t.Helper()
	resp, err := http.Get(a.base + "/api/captures")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Captures []agentCapture }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Captures
}

// crashFinding waits up to 10 s for the agent's fatal-signal finding
// whose title names proc ("segv[PID]").
func (a *agentProc) crashFinding(t *testing.T, proc string) *agentFinding {
	t.Helper()
	for i := 0; i < 50; i++ {
		time.Sleep(200 * time.Millisecond)
		for _, x := range a.findings(t) {
			if x.ID == "fatal-signal" && strings.Contains(x.Title, proc) {
				return &x
			}
		}
	}
	t.Fatalf("no fatal-signal finding for %s after 10 s: %+v", proc, a.findings(t))
	return nil
}

// crashes runs tests/progs/segv, whose child dies of SIGSEGV, and returns
// the child's pid.
func crashes(t *testing.T) int {
	t.Helper()
	out, err := exec.Command(prog("segv")).Output()
	var pid, signaled, sig int
	if _, serr := fmt.Sscanf(string(out), "child %d signaled=%d sig=%d", &pid, &signaled, &sig); err != nil || serr != nil || sig != 11 {
		t.Fatalf("segv: %v %v %q", err, serr, out)
	}
	return pid
}

// The continuous doctor: a process that dies of SIGSEGV under the agent is
// a critical finding within a window or two, in /api/findings and
// /metrics, and leaves a flight capture behind that `doctor -r` diagnoses
// the same way. The same crash again is the same finding, seen twice,
// and the cooldown keeps it to one capture; a snapshot is taken on POST
// /api/snapshot and on SIGUSR1.
func TestAgentDoctorFindsAndRecords(t *testing.T) {
	alongside(t)
	requireBPF(t)
	dir := filepath.Join(t.TempDir(), "captures")
	a := startAgent(t, "--window", "1s", "--capture-dir", dir, "--cooldown", "1h")

	pid := crashes(t)
	f := a.crashFinding(t, fmt.Sprintf("segv[%d]", pid))
	if f.Severity != "critical" || f.Occurrences != 1 || !f.Active || !strings.Contains(f.Title, "SIGSEGV") {
		t.Errorf("finding: %+v", f)
	}
	m := a.scrape(t)
	key := metric("sysray_finding_active", "container", "host", "id", "fatal-signal", "namespace", "", "pod", "", "severity", "critical")
	if m[key] < 1 || m[strings.Replace(key, "sysray_finding_active", "sysray_findings_total", 1)] < 1 {
		t.Errorf("%s = %v; findings metrics: %v", key, m[key], grep(m, "sysray_finding"))
	}

	// The capture it left: private, listed, downloadable, and diagnosed.
	var name string
	for i := 0; i < 25 && name == ""; i++ {
		for _, c := range a.captures(t) {
			if strings.Contains(c.Name, "-fatal-signal-host") {
				name = c.Name
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if name == "" {
		t.Fatalf("no flight capture for the crash: %+v", a.captures(t))
	}
	st, err := os.Stat(filepath.Join(dir, name))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("capture %s: %v %v", name, err, st)
	}
	resp, err := http.Get(a.base + "/api/captures/" + name)
	if err != nil {
		t.Fatal(err)
	}
	got := filepath.Join(t.TempDir(), "got.sysray")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || int64(len(b)) != st.Size() || os.WriteFile(got, b, 0o600) != nil {
		t.Fatalf("download: %d, %d bytes of %d", resp.StatusCode, len(b), st.Size())
	}
	r := runOut(t, "doctor", "-r", got, "--json")
	var rep struct {
		Findings []agentFinding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, x := range rep.Findings {
		found = found || x.ID == "fatal-signal" && x.Severity == "critical" && strings.Contains(x.Title, fmt.Sprintf("segv[%d]", pid))
	}
	if !found {
		t.Errorf("doctor -r on the flight capture does not find segv[%d]'s crash: %s", pid, r.stdout)
	}
	for _, bad := range []string{"..%2f..%2fetc%2fpasswd", "nosuch.sysray"} {
		if resp, err := http.Get(a.base + "/api/captures/" + bad); err != nil || resp.StatusCode != 404 {
			t.Errorf("GET /api/captures/%s: %v %v, want 404", bad, err, resp.Status)
		}
	}

	// The same crash again: one finding, seen twice; no second capture.
	pid2 := crashes(t)
	var twice bool
	for i := 0; i < 50 && !twice; i++ {
		time.Sleep(200 * time.Millisecond)
		for _, x := range a.findings(t) {
			twice = twice || x.ID == "fatal-signal" && strings.Contains(x.Title, fmt.Sprintf("segv[%d]", pid2)) && x.Occurrences == 2
		}
	}
	if !twice {
		t.Errorf("the second crash (segv[%d]) is not the first finding seen twice: %+v", pid2, a.findings(t))
	}
	n := 0
	for _, c := range a.captures(t) {
		if strings.Contains(c.Name, "-fatal-signal-host") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d captures of the crash within the cooldown, want 1: %+v", n, a.captures(t))
	}

	// On request, and on SIGUSR1.
	resp, err = http.Post(a.base+"/api/snapshot", "", nil)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/snapshot: %v %v", err, resp.Status)
	}
	resp.Body.Close()
	a.cmd.Process.Signal(syscall.SIGUSR1)
	var api, usr1 bool
	for i := 0; i < 25 && !(api && usr1); i++ {
		time.Sleep(200 * time.Millisecond)
		for _, c := range a.captures(t) {
			api = api || strings.Contains(c.Name, "-snapshot-api")
			usr1 = usr1 || strings.Contains(c.Name, "-snapshot-SIGUSR1")
		}
	}
	if !api || !usr1 {
		t.Errorf("snapshots: api %v, SIGUSR1 %v: %+v", api, usr1, a.captures(t))
	}
	if code, _ := a.stop(t); code != 0 {
		t.Errorf("agent exited %d", code)
	}
}

func grep(m map[string]float64, prefix string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

// Duty cycling: with the syscall programs attached a quarter of the time,
// a container's 19 batches of 20001 getppid calls (380019, odd) are
// counted about a quarter of the time and scaled by four: a multiple of
// four, near the truth. Signals are always attached and stay exact.
func TestAgentDutyCycle(t *testing.T) {
	alongside(t)
	requireBPF(t)
	ids, dirs := fakeContainers(t, 0xd0, 1)
	// Series for every syscall: the shell, sleep and exec make more than
	// the default 10, and under load, with the first batches in an off
	// stretch, they took every slot and getppid was counted as "other".
	a := startAgent(t, "--syscalls", "duty", "--duty-on", "250ms", "--duty-period", "1s", "--grace", "1h", "--max-syscalls", "64")
	key := metric("sysray_syscall_duration_seconds_count", "container", ids[0][:12], "namespace", "", "pod", "", "syscall", "getppid")
	segv := metric("sysray_signals_total", "container", ids[0][:12], "namespace", "", "pod", "", "signal", "SIGSEGV")
	inCgroup(t, dirs[0], "/bin/sh", "-c", fmt.Sprintf("'for i in $(seq 19); do %s 20001; sleep 0.2; done; %s'", prog("getppid"), prog("segv")))
	var last float64 = -1
	deadline := time.Now().Add(30 * time.Second)
	for {
		time.Sleep(time.Second)
		m := a.scrape(t)
		n, ok := m[key]
		if ok && n == last && m[segv] == 1 {
			break
		}
		last = n
		if time.Now().After(deadline) {
			t.Fatalf("%s never settled (last %v), %s = %v", key, last, segv, m[segv])
		}
	}
	if int64(last)%4 != 0 || last < 380019*0.4 || last > 380019*1.6 {
		t.Errorf("%s = %v: want a multiple of 4 near 380019", key, last)
	}
	t.Logf("duty-cycled count %v for 380019 calls", last)
	// The counts say they are estimates.
	if r := a.scrape(t)["sysray_syscall_sample_ratio{}"]; r != 0.25 {
		t.Errorf("sysray_syscall_sample_ratio = %v, want 0.25", r)
	}
}

// Growth over many windows: a process forks every 300 ms or so, each time
// after 1,600 more mappings, under an agent with 1 s windows. No window
// holds more than a few forks, fewer than the rule needs; the agent's long
// doctor, which keeps every window's calls, finds fork slowing with the
// mappings, from more calls than any one window had.
func TestAgentGrowthAcrossWindows(t *testing.T) {
	alongside(t)
	requireBPF(t)
	a := startAgent(t, "--window", "1s")
	cmd := exec.Command(scenario(t, "forkgrow"), "-n", "40", "-m", "1600", "-i", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	var f *agentFinding
	for deadline := time.Now().Add(60 * time.Second); f == nil && time.Now().Before(deadline); time.Sleep(time.Second) {
		for _, x := range a.findings(t) {
			if x.ID == "latency-grows-with-count" && strings.Contains(x.Title, fmt.Sprintf("[%d]", pid)) {
				f = &x
			}
		}
	}
	cmd.Wait()
	if f == nil {
		t.Fatalf("no latency-grows-with-count finding for forkgrow[%d]: %+v", pid, a.findings(t))
	}
	calls, _ := f.Evidence["calls"].(float64)
	if !strings.Contains(f.Title, "mappings") || calls <= 8 {
		t.Errorf("finding %q from %v calls; want the mappings, from more calls than a 1 s window holds", f.Title, calls)
	}
	t.Logf("%s (%v calls)", f.Title, calls)
}

// A crash whose core takes seconds to write: its fault and signal come in
// one of the agent's 1 s windows, its exit in a later one. The finding
// tells the whole crash (critical, the fault's address, the signal's
// code), as it does when both fall in one window, not a bare death by
// signal. The core goes to a directory on tmpfs (core_pattern "core", as
// Debian has it), which the test removes.
func TestAgentCrashAcrossWindows(t *testing.T) {
	alongside(t)
	requireBPF(t)
	// Only a core written to the crash's own directory is the test's to
	// remove: a pipe (systemd-coredump, apport) or a path keeps cores of
	// gigabytes elsewhere.
	b, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	pattern := strings.TrimSpace(string(b))
	if strings.ContainsAny(pattern, "|/") {
		why := fmt.Sprintf("kernel.core_pattern is %q, not a file in the crash's directory", pattern)
		if os.Getenv("SYSRAY_REQUIRE_BPF") == "1" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	dir, err := os.MkdirTemp("/dev/shm", "sysray-bigcore-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	a := startAgent(t, "--window", "1s")

	// A window's edge falls between the fault and the exit only if the
	// dump takes longer than a window: 1 GiB took 2 to 4 s here; a faster
	// machine gets more to write.
	var pid int
	var dumped time.Duration
	for mib := 1024; dumped < 1100*time.Millisecond; mib *= 2 {
		if mib > 4096 {
			t.Fatalf("bigcore's fault and exit came only %v apart with %d MiB: no window edge need fall between them (core_pattern %q)",
				dumped, mib/2, pattern)
		}
		pid, dumped = bigcore(t, dir, mib)
	}
	f := a.crashFinding(t, fmt.Sprintf("bigcore[%d]", pid))
	if f.Severity != "critical" || f.Evidence["fault_addr"] != "0x0" || f.Evidence["si_code"] != "SEGV_MAPERR" || f.Evidence["core_dumped"] != true {
		t.Errorf("bigcore's fault and exit %v apart: %s %q, evidence %v; want critical, with the fault at 0x0 (SEGV_MAPERR)", dumped, f.Severity, f.Title, f.Evidence)
	}
}

// bigcore runs tests/progs/bigcore in dir with no limit on its core, and
// returns its pid and the time from its fault to its exit.
func bigcore(t *testing.T, dir string, mib int) (int, time.Duration) {
	t.Helper()
	cmd := exec.Command("sh", "-c", `ulimit -c unlimited && exec "$0" "$1"`, prog("bigcore"), strconv.Itoa(mib))
	cmd.Dir = dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	touched := time.Now()
	werr := cmd.Wait()
	dumped := time.Since(touched)
	if ee, ok := werr.(*exec.ExitError); !ok || !strings.HasPrefix(line, "touched ") || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGSEGV {
		t.Fatalf("bigcore %d: %v, %q", mib, werr, line)
	}
	cores, _ := filepath.Glob(filepath.Join(dir, "core*"))
	for _, c := range cores {
		os.Remove(c) // the next one's room on tmpfs
	}
	return cmd.Process.Pid, dumped
}
