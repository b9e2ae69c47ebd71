package tests

// The doctor on a sick host: one whose audit backlog is already full when
// it starts (every audited syscall waits, the doctor's own opens too), one
// whose CPUs another cgroup keeps busy, one with little free memory. Each
// time the doctor must start within seconds and report what is there.

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

// timed is a doctor run with the time each stderr line came.
type timed struct {
	stderr []timedLine
	total  time.Duration
	code   int
	report doctorReport
}

type timedLine struct {
	at   time.Duration
	text string
}

// doctorTimed runs sysray doctor --json with args and times its output.
func doctorTimed(t *testing.T, args ...string) timed {
	t.Helper()
	return doctorTimedVia(t, nil, args...)
}

// doctorTimedVia runs the doctor through a launcher (setpriv and its flags).
func doctorTimedVia(t *testing.T, via []string, args ...string) timed {
	t.Helper()
	out := filepath.Join(t.TempDir(), "report.json")
	// Flags go before "--", which args may hold.
	argv := append([]string{"doctor", "--json", "-o", out}, args...)
	cmd := exec.Command(sysray, argv...)
	if len(via) > 0 {
		cmd = exec.Command(via[0], append(append(via[1:], sysray), argv...)...)
	}
	cmd.Stdout = os.Stderr // the traced command's output
	errs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var r timed
	sc := bufio.NewScanner(errs)
	for sc.Scan() {
		r.stderr = append(r.stderr, timedLine{time.Since(start), sc.Text()})
	}
	err = cmd.Wait()
	r.total = time.Since(start)
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("sysray %v: %v", argv, err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no report: %v\nstderr: %v", err, r.stderr)
	}
	if err := json.Unmarshal(b, &r.report); err != nil {
		t.Fatalf("bad report: %v\n%s", err, b)
	}
	return r
}

// when is how long after the start the first stderr line holding s came.
func (r timed) when(s string) (time.Duration, bool) {
	for _, l := range r.stderr {
		if strings.Contains(l.text, s) {
			return l.at, true
		}
	}
	return 0, false
}

func findingByID(r doctorReport, id string) *finding {
	for i := range r.Findings {
		if r.Findings[i].ID == id {
			return &r.Findings[i]
		}
	}
	return nil
}

// waitAuditFree waits up to a minute for audit to be off with no daemon:
// another run (a demo, a test) may hold it for a few seconds. bin is
// scenarios/bin/audit.
func waitAuditFree(bin string) {
	deadline := time.Now().Add(time.Minute)
	for {
		out, _ := exec.Command(bin, "status").Output()
		if strings.Contains(string(out), "RESULT enabled=0 pid=0") || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Second)
	}
}

// makeSick fills the audit backlog (scenarios/audit: a rule on openat for
// the scenario's fillers and for sysray's binary, backlog_limit 8, a
// registered daemon that never reads) and keeps it full for d. The returned
// function ends it; audit is put back either way.
func makeSick(t *testing.T, d time.Duration) (stop func()) {
	t.Helper()
	mk := exec.Command("make", "-s", "-C", "../scenarios", "bin/audit")
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("building scenarios/audit: %v\n%s", err, out)
	}
	bin, _ := filepath.Abs("../scenarios/bin/audit")
	waitAuditFree(bin)
	cmd := exec.Command(bin, "sick", "-d", d.String(), "-exe", sysray)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var log bytes.Buffer
	sick := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Fprintln(&log, sc.Text())
			if strings.HasPrefix(sc.Text(), "SICK ") {
				sick <- sc.Text()
			}
		}
		cmd.Wait()
	}()
	stop = func() {
		cmd.Process.Signal(syscall.SIGINT) // it restores on SIGINT
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
			exec.Command(bin, "restore").Run()
		}
		if !strings.Contains(log.String(), "restored=yes") {
			t.Errorf("audit not restored after the run:\n%s", log.String())
			exec.Command(bin, "restore").Run()
		}
	}
	select {
	case line := <-sick:
		t.Logf("%s", line)
	case <-done:
		t.Fatalf("audit sick ended before the backlog was full:\n%s", log.String())
	case <-time.After(20 * time.Second):
		stop()
		t.Fatalf("the audit backlog did not fill:\n%s", log.String())
	}
	return stop
}

// The audit backlog is full before the doctor starts: it says so on stderr
// at once, and reports the stall from the kernel's counters, also for a
// traced command that makes no audited call.
func TestSickAuditHost(t *testing.T) {
	requireBPF(t)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"whole host", []string{"--duration", "2s"}},
		{"command without openat", []string{"--", prog("getppid"), "100000"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Short: while it lasts every process started since, on this
			// host, that opens sysray's binary or is a filler, waits.
			stop := makeSick(t, 15*time.Second)
			r := doctorTimed(t, c.args...)
			stop()
			t.Logf("report after %s; stderr:\n%s", r.total.Round(time.Millisecond), stderrLines(r.stderr))
			if r.code != 0 {
				t.Errorf("doctor exited %d", r.code)
			}
			at, ok := r.when("[audit-backlog-stall]")
			if !ok {
				t.Fatalf("no audit-backlog-stall on stderr")
			}
			if at > 5*time.Second {
				t.Errorf("first finding on stderr after %s, want within 5s", at.Round(time.Millisecond))
			}
			for _, w := range []string{"backlog", "limit", "lost", "backlog_wait_time", "audit daemon, pid"} {
				if line, _ := r.line("[audit-backlog-stall]"); !strings.Contains(line, w) {
					t.Errorf("stderr line lacks %q: %s", w, line)
				}
			}
			// Before this work the doctor took 90 s to start here.
			if r.total > 20*time.Second {
				t.Errorf("report after %s", r.total.Round(time.Millisecond))
			}
			f := findingByID(r.report, "audit-backlog-stall")
			if f == nil {
				t.Fatalf("no audit-backlog-stall in the report:\n%s", titles(r.report))
			}
			if f.Severity != "critical" {
				t.Errorf("severity %s, want critical: %s", f.Severity, f.Title)
			}
			has(t, *f, "waited_ns", "lost_records", "audit_status_start", "audit_status_end", "audit_status", "backlog_full_reads")
			if w, _ := f.Evidence["waited_ns"].(float64); w <= 0 {
				t.Errorf("waited_ns %v: the counters say no task waited", f.Evidence["waited_ns"])
			}
			if st, _ := f.Evidence["audit_status"].(map[string]any); st["backlog_limit"] != float64(8) {
				t.Errorf("audit status during the stall %v, want backlog_limit 8", st)
			}
			asleep := strings.Join(anyStrings(f.Evidence["asleep_in_audit_log_start"]), "; ")
			if !strings.Contains(asleep, "openat") {
				t.Errorf("tasks asleep in audit_log_start %q: want the ones in openat", asleep)
			}
			if len(c.args) > 0 && c.args[0] == "--" && !strings.Contains(f.Summary, "None of the traced calls waited") {
				t.Errorf("summary does not say the command was not delayed: %s", f.Summary)
			}
		})
	}
}

// A doctor without CAP_AUDIT_CONTROL (a container that was not given it)
// cannot read the audit status: it finds the stall from the threads it
// sees asleep in audit_log_start, looking every 250 ms, and rates it as
// the counters would (asleep_seen_over_ns).
func TestSickAuditHostWithoutAuditControl(t *testing.T) {
	requireBPF(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv is needed to run the doctor without CAP_AUDIT_CONTROL: " + err.Error())
	}
	stop := makeSick(t, 15*time.Second)
	r := doctorTimedVia(t, []string{setpriv, "--bounding-set", "-audit_control", "--"}, "--duration", "2s")
	stop()
	t.Logf("report after %s; stderr:\n%s", r.total.Round(time.Millisecond), stderrLines(r.stderr))
	if r.code != 0 {
		t.Errorf("doctor exited %d", r.code)
	}
	// Said on stderr once the probe could look, before the report.
	if line, ok := r.line("[audit-backlog-stall]"); !ok || !strings.Contains(line, "asleep in audit_log_start") {
		t.Errorf("stderr does not say tasks are asleep in audit_log_start: %q", line)
	}
	f := findingByID(r.report, "audit-backlog-stall")
	if f == nil {
		t.Fatalf("no audit-backlog-stall in the report:\n%s", titles(r.report))
	}
	if f.Severity != "critical" {
		t.Errorf("severity %s, want critical: %s", f.Severity, f.Title)
	}
	has(t, *f, "audit_status_error", "asleep_in_audit_log_start", "asleep_seen_over_ns")
	if span, _ := f.Evidence["asleep_seen_over_ns"].(float64); span < 100e6 {
		t.Errorf("asleep_seen_over_ns %v, want at least 100 ms over a 2 s run of a stalled host", f.Evidence["asleep_seen_over_ns"])
	}
	if _, ok := f.Evidence["waited_ns"]; ok {
		t.Errorf("waited_ns %v without the counters' reads", f.Evidence["waited_ns"])
	}
	asleep := strings.Join(anyStrings(f.Evidence["asleep_in_audit_log_start"]), "; ")
	if !strings.Contains(asleep, "openat") {
		t.Errorf("tasks asleep in audit_log_start %q: want the ones in openat", asleep)
	}
}

func (r timed) line(s string) (string, bool) {
	for _, l := range r.stderr {
		if strings.Contains(l.text, s) {
			return l.text, true
		}
	}
	return "", false
}

func stderrLines(ls []timedLine) string {
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, "  [%6.2fs] %s\n", l.at.Seconds(), l.text)
	}
	return b.String()
}

// loadGroup makes a cgroup for the load (v1 where the controller is bound
// there, as on hybrid hosts, else v2) and returns the file that moves a
// process into it.
func loadGroup(t *testing.T, controller, name string) (procs string) {
	t.Helper()
	dir := filepath.Join("/sys/fs/cgroup", controller, name)
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", controller)); err != nil {
		dir = filepath.Join("/sys/fs/cgroup", name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("making a cgroup: %v", err)
	}
	t.Cleanup(func() {
		for range 100 {
			if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	return filepath.Join(dir, "cgroup.procs")
}

// startLoad starts argv in the cgroup whose cgroup.procs is procs; it is killed
// at the end of the test.
func startLoad(t *testing.T, procs string, argv ...string) *exec.Cmd {
	t.Helper()
	script := "echo $$ > " + procs + " && exec \"$@\""
	cmd := exec.Command("sh", append([]string{"-c", script, "load"}, argv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// The doctor starts and finds a crash while two busy loops in another
// cgroup take both CPUs.
func TestSickCPUSaturated(t *testing.T) {
	requireBPF(t)
	procs := loadGroup(t, "cpu", "sysray-test-busy")
	n := 2
	if b, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil {
		// "0-1": as many loops as CPUs.
		if _, hi, ok := strings.Cut(strings.TrimSpace(string(b)), "-"); ok {
			if v, err := strconv.Atoi(hi); err == nil && v+1 > n {
				n = v + 1
			}
		}
	}
	for range n {
		startLoad(t, procs, "sh", "-c", "while :; do :; done")
	}
	time.Sleep(500 * time.Millisecond) // let them take the CPUs
	r := doctorTimed(t, "--", prog("segv"))
	t.Logf("report after %s with %d busy loops", r.total.Round(time.Millisecond), n)
	if r.total > 5*time.Second {
		t.Errorf("doctor took %s with the CPUs busy, want under 5s", r.total.Round(time.Millisecond))
	}
	if len(r.report.Findings) == 0 {
		t.Fatalf("no findings; stderr:\n%s", stderrLines(r.stderr))
	}
	top(t, r.report, "fatal-signal", "critical")
}

// The doctor starts and finds a crash while one process holds most of the
// host's memory (in its own memory cgroup, and first in line for the OOM
// killer should anything else need memory).
func TestSickMemoryPressure(t *testing.T) {
	requireBPF(t)
	avail := memAvailable(t)
	// Leave 1.5 GiB: enough for the doctor and whatever else runs here,
	// little enough that page cache is gone.
	fill := avail - 1536
	if fill < 256 {
		t.Skipf("only %d MiB available: no room to make pressure", avail)
	}
	procs := loadGroup(t, "memory", "sysray-test-pressure")
	filler := exec.Command("sh", "-c", "echo $$ > "+procs+" && echo 1000 > /proc/self/oom_score_adj && exec \"$@\"",
		"fill", prog("memfill"), strconv.Itoa(fill))
	filler.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := filler.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := filler.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		filler.Process.Kill()
		filler.Wait()
	})
	filled := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		filled <- sc.Scan() && strings.HasPrefix(sc.Text(), "FILLED")
	}()
	select {
	case ok := <-filled:
		if !ok {
			t.Fatal("the filler did not fill")
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the filler took over two minutes") // a VM backs memory slowly the first time
	}
	t.Logf("%d MiB held, %d MiB available now", fill, memAvailable(t))
	r := doctorTimed(t, "--", prog("segv"))
	t.Logf("report after %s", r.total.Round(time.Millisecond))
	if r.total > 5*time.Second {
		t.Errorf("doctor took %s under memory pressure, want under 5s", r.total.Round(time.Millisecond))
	}
	if len(r.report.Findings) == 0 {
		t.Fatalf("no findings; stderr:\n%s", stderrLines(r.stderr))
	}
	top(t, r.report, "fatal-signal", "critical")
}

func memAvailable(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "MemAvailable:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return kb >> 10
		}
	}
	t.Fatal("no MemAvailable in /proc/meminfo")
	return 0
}
