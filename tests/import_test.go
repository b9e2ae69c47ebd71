package tests

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/capture"
)

// straceLog runs argv under strace with opts and returns the log's path.
func straceLog(t *testing.T, opts []string, argv ...string) string {
	t.Helper()
	if _, err := exec.LookPath("strace"); err != nil {
		t.Fatalf("strace is needed: %v", err)
	}
	log := filepath.Join(t.TempDir(), "strace.log")
	cmd := exec.Command("strace", append(append(opts, "-o", log), argv...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("strace: %v\n%s", err, out)
		}
	}
	return log
}

// importLog imports a strace log and returns the capture's path.
func importLog(t *testing.T, logs ...string) string {
	t.Helper()
	capPath := filepath.Join(t.TempDir(), "imported.sysray")
	r := run(t, append(append([]string{"import", "--from", "strace"}, logs...), "-w", capPath)...)
	if r.code != 0 {
		t.Fatalf("import failed (%d): %s", r.code, r.stderr)
	}
	fi, err := os.Stat(capPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("capture mode %v, want 0600", fi.Mode().Perm())
	}
	return capPath
}

func doctorRead(t *testing.T, capPath string) doctorReport {
	t.Helper()
	r := runOut(t, "doctor", "--json", "-r", capPath)
	if r.code != 0 {
		t.Fatalf("doctor -r: %d %s", r.code, r.stderr)
	}
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("bad report: %v\n%s", err, r.stdout)
	}
	return rep
}

// The counts, errnos and paths of an imported log are strace's own, and
// the header says where the events came from and what they lack.
func TestImportStraceRoundTrip(t *testing.T) {
	const n = 3000
	target := filepath.Join(t.TempDir(), "made")
	logs := []string{
		straceLog(t, []string{"-f", "-ttt", "-T", "-yy"}, prog("getppid"), strconv.Itoa(n)),
		straceLog(t, []string{"-f", "-ttt", "-T", "-yy", "-s", "4096"}, prog("openat"), target),
		straceLog(t, []string{"-f", "-ttt", "-T"}, prog("segv")),
	}
	want := [](counts){
		straceCounts(t, prog("getppid"), strconv.Itoa(n)),
		straceCounts(t, prog("openat"), target),
		straceCounts(t, prog("segv")),
	}
	for i, log := range logs {
		capPath := importLog(t, log)
		got := sysrayCounts(t, runOut(t, "stat", "-r", capPath, "--json").stdout)
		sameCounts(t, filepath.Base(log), got, want[i])
		if i == 0 && got["getppid"] != [2]uint64{n, 0} {
			t.Errorf("getppid: %v, want %d calls", got["getppid"], n)
		}
	}

	// openat's arguments as strace printed them.
	capPath := importLog(t, logs[1])
	recs := parseJSON(t, runOut(t, "read", "--json", capPath).stdout)
	logText, _ := os.ReadFile(logs[1])
	openRe := regexp.MustCompile(`openat\(AT_FDCWD(?:<[^>]*>)?, ("[^"]*"(?:\.\.\.)?), ([A-Z_|]+)(?:, (0\d+))?\) = (-1 (E[A-Z]+)|\d+)`)
	lines := openRe.FindAllStringSubmatch(string(logText), -1)
	var opens []record
	var exec, exit *record
	for i := range recs {
		switch {
		case recs[i].Syscall != nil && recs[i].Syscall.Name == "openat":
			opens = append(opens, recs[i])
		case recs[i].Kind == "exec":
			exec = &recs[i]
		case recs[i].Kind == "exit":
			exit = &recs[i]
		}
	}
	if len(lines) != 2 || len(opens) != len(lines) {
		t.Fatalf("%d openat lines in the log, %d imported:\n%s", len(lines), len(opens), logText)
	}
	for i, m := range lines {
		o := opens[i]
		if o.arg("pathname") != m[1] || o.arg("flags") != m[2] || o.Syscall.Errno != m[5] {
			t.Errorf("openat %d: pathname %s flags %s errno %q; strace printed %s %s %q", i,
				o.arg("pathname"), o.arg("flags"), o.Syscall.Errno, m[1], m[2], m[5])
		}
		if m[3] != "" && o.arg("mode") != m[3] {
			t.Errorf("mode %s, strace %s", o.arg("mode"), m[3])
		}
	}
	if opens[0].arg("pathname") != strconv.Quote(target) || opens[1].Syscall.Ret != -2 {
		t.Errorf("want the first open of %s and the second failing: %+v", target, opens)
	}
	if exec == nil || exec.Exec.Filename != prog("openat") || len(exec.Exec.Argv) != 2 || exec.Exec.Argv[1] != target || exec.Comm != "openat" {
		t.Errorf("exec %+v", exec)
	}
	if exit == nil || exit.Exit.Code != 0 || !exit.Exit.GroupDead {
		t.Errorf("exit %+v", exit)
	}

	// -X raw prints numbers and -X verbose adds the names in comments:
	// the same registers either way.
	for _, x := range []string{"raw", "verbose"} {
		log := straceLog(t, []string{"-f", "-ttt", "-T", "-X", x}, prog("openat"), target)
		recs := parseJSON(t, runOut(t, "read", "--json", "-f", "evt.type = openat", importLog(t, log)).stdout)
		if len(recs) != 2 {
			t.Fatalf("-X %s: %d openat calls", x, len(recs))
		}
		for i, r := range recs {
			if r.arg("pathname") != opens[i].arg("pathname") || r.arg("flags") != opens[i].arg("flags") ||
				r.arg("dirfd") != "AT_FDCWD" || r.Syscall.Ret != opens[i].Syscall.Ret {
				t.Errorf("-X %s: %s, without it %s", x, r.Text, opens[i].Text)
			}
		}
	}

	// The child of segv dies of SIGSEGV; the doctor sees the death.
	rep := doctorRead(t, importLog(t, logs[2]))
	if f := findingByID(rep, "fatal-signal"); f == nil || f.Evidence["signal"] != "SIGSEGV" {
		t.Errorf("no fatal-signal SIGSEGV from the strace log:\n%s", titles(rep))
	}

	c, err := capture.Open(capPath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := c.Header().Meta
	if m["source"] != "strace" || !strings.Contains(m["absent"], "stacks") || !strings.Contains(m["absent"], "page_faults") || !strings.Contains(m["absent"], "cgroups") {
		t.Errorf("header meta %v: want source strace and the absent features", m)
	}
}

// Not strace output: a clear error and no capture.
func TestImportNotStrace(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk")
	os.WriteFile(junk, []byte("GET / HTTP/1.1\nHost: example\n"), 0o600)
	capPath := filepath.Join(dir, "out.sysray")
	r := run(t, "import", "--from", "strace", junk, "-w", capPath)
	if r.code == 0 || !strings.Contains(r.stderr, "not strace output") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(capPath); err == nil {
		t.Errorf("a capture was written from junk")
	}
	// Some lines that are not strace's: imported, counted and named.
	mixed := filepath.Join(dir, "mixed")
	os.WriteFile(mixed, []byte("1 1.0 getppid() = 0 <0.000001>\nnoise here\n1 1.1 getppid() = 0 <0.000001>\n1 1.2 getpp"), 0o600)
	r = run(t, "import", "--from", "strace", mixed, "-w", capPath)
	if r.code != 0 || !strings.Contains(r.stderr, "2 lines skipped") || !strings.Contains(r.stderr, mixed+":2, "+mixed+":4") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// scenarioBin builds one of scenarios/ and returns its path.
func scenarioBin(t *testing.T, names ...string) string {
	t.Helper()
	var targets []string
	for _, n := range names {
		targets = append(targets, "bin/"+n)
	}
	if out, err := exec.Command("make", append([]string{"-C", "../scenarios"}, targets...)...).CombinedOutput(); err != nil {
		t.Fatalf("building %v: %v\n%s", names, err, out)
	}
	p, _ := filepath.Abs("../scenarios/bin/" + names[0])
	return p
}

// The doctor finds glibc's MAP_32BIT retry in a strace log alone.
func TestImportStraceMap32(t *testing.T) {
	bin := scenarioBin(t, "map32")
	log := straceLog(t, []string{"-f", "-ttt", "-T"}, bin, "-n", "1500")
	b, _ := os.ReadFile(log)
	failed := failedMap32(string(b))
	if failed < 20 {
		t.Fatalf("only %d failing MAP_32BIT mmaps in the log", failed)
	}
	rep := doctorRead(t, importLog(t, log))
	// Not necessarily the top finding: strace's own cost makes calls slow
	// on a loaded host, and without stacks the doctor cannot tell why.
	f := findingByID(rep, "failed-syscall-retry")
	if f == nil || f.Severity != "warning" {
		t.Fatalf("no failed-syscall-retry warning:\n%s", titles(rep))
	}
	if f.Evidence["syscall"] != "mmap" || f.Evidence["errno"] != "ENOMEM" || !strings.Contains(strings.Join(anyStrings(f.Evidence["flags_removed"]), " "), "MAP_32BIT") {
		t.Errorf("finding %+v", f.Evidence)
	}
	if c, _ := f.Evidence["count"].(float64); int(c) != failed {
		t.Errorf("%v retries, the log has %d failing MAP_32BIT mmaps", f.Evidence["count"], failed)
	}
}

// failedMap32 counts the MAP_32BIT mmaps that failed with ENOMEM in a
// `strace -f` log, pairing a thread's unfinished call with its own resumed
// half (another thread's may come between).
func failedMap32(log string) int {
	n := 0
	pending := map[string]bool{} // pid: its unfinished mmap asked for MAP_32BIT
	for _, line := range strings.Split(log, "\n") {
		pid, rest, _ := strings.Cut(strings.TrimLeft(line, " "), " ")
		switch {
		case strings.Contains(rest, " mmap(") && strings.Contains(rest, "MAP_32BIT"):
			if strings.HasSuffix(rest, "<unfinished ...>") {
				pending[pid] = true
			} else if strings.Contains(rest, ") = -1 ENOMEM") {
				n++
			}
		case strings.Contains(rest, "<... mmap resumed>"):
			if pending[pid] && strings.Contains(rest, "= -1 ENOMEM") {
				n++
			}
			delete(pending, pid)
		}
	}
	return n
}

// The audit-backlog stall from a strace log alone (scenarios/audit: a rule
// on accept4, backlog_limit 16, a daemon that never reads; the scenario
// restores the audit settings itself). strace has no kernel stacks, so the
// doctor cannot see audit_log_start: it infers the stall from the
// non-blocking accept4 calls that slept while the audit settings the
// scenario sent (AUDIT_SET, AUDIT_ADD_RULE, carried in the capture with
// the AUDIT_GET replies) had audit on with a backlog limit and a rule on
// accept4, and says it inferred it.
func TestImportStraceAudit(t *testing.T) {
	requireBPF(t) // root, for the kernel's audit settings
	bin := scenarioBin(t, "audit", "audit-acceptor")
	log := filepath.Join(t.TempDir(), "audit.log")
	out, err := exec.Command("strace", "-f", "-ttt", "-T", "-s", "512", "-o", log, bin, "run", "-d", "4s").CombinedOutput()
	if err != nil {
		t.Fatalf("audit scenario under strace: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "restored=yes") {
		t.Fatalf("the scenario did not restore audit:\n%s", out)
	}
	// Ground truth from the log itself: accept4 calls of 10 ms or more.
	b, _ := os.ReadFile(log)
	// (Every accept4 there is non-blocking: the acceptor's listening
	// socket; a call's halves may be split across two lines.)
	if all, nb := strings.Count(string(b), "accept4("), regexp.MustCompile(`accept4\([^\n]*SOCK_NONBLOCK`).FindAll(b, -1); len(nb) != all {
		t.Fatalf("%d accept4 calls, %d non-blocking", all, len(nb))
	}
	slowRe := regexp.MustCompile(`(?m)accept4(?:\(| resumed>).*\) = .* <(\d+\.\d+)>$`)
	slow := 0
	var maxNS float64
	for _, m := range slowRe.FindAllStringSubmatch(string(b), -1) {
		s, _ := strconv.ParseFloat(m[1], 64)
		if s >= 0.010 {
			slow++
			maxNS = max(maxNS, math.Round(s*1e9))
		}
	}
	if slow == 0 {
		t.Fatalf("no accept4 stalled in the log; scenario said:\n%s", out)
	}
	capPath := importLog(t, log)
	rep := doctorRead(t, capPath)
	f := findingByID(rep, "audit-backlog-stall")
	if f == nil {
		t.Fatalf("no audit-backlog-stall from the strace log:\n%s", titles(rep))
	}
	if sc, _ := f.Evidence["syscalls"].(map[string]any); len(sc) != 1 || sc["accept4"] != float64(slow) {
		t.Errorf("%s counts %v stalls, the log has %d accept4 calls of 10 ms or more:\n%s", f.ID, sc, slow, titles(rep))
	}
	if f.Evidence["max_ns"] != maxNS || f.Evidence["non_blocking_calls"] != float64(slow) {
		t.Errorf("max %v (log %v), non-blocking %v", f.Evidence["max_ns"], maxNS, f.Evidence["non_blocking_calls"])
	}
	for _, g := range rep.Findings {
		if sc, _ := g.Evidence["syscalls"].(map[string]any); g.ID == "slow-syscall" && sc["accept4"] != nil {
			t.Errorf("the stalled accept4 calls are also slow-syscall's: %s", g.Title)
		}
	}
	if _, ok := f.Evidence["inferred_from"]; !ok || !strings.Contains(f.Summary, "not from a kernel stack") {
		t.Errorf("the finding does not say it is inferred: %v\n%s", f.Evidence, f.Summary)
	}
	if st, _ := f.Evidence["audit_settings"].(map[string]any); st["enabled"] != float64(1) || st["backlog_limit"] != float64(16) {
		t.Errorf("audit settings %v: want enabled 1, backlog_limit 16", f.Evidence["audit_settings"])
	}
	if r := anyStrings(f.Evidence["audit_rules"]); strings.Join(r, ",") != "accept4" {
		t.Errorf("audit rules %v: want accept4", r)
	}
	// The scenario's own reads of the kernel's counters, before and after
	// serving; the doctor's span at least those (its first read while audit
	// was on is no later, its last no earlier).
	m := regexp.MustCompile(`at HZ=(\d+)\).*\n(?:.*\n)*?audit during: .* lost=\+(\d+) backlog_wait_time_actual=\+(\d+) ms`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("no HZ and counters in the scenario's output:\n%s", out)
	}
	hz, _ := strconv.ParseFloat(m[1], 64)
	lost, _ := strconv.ParseFloat(m[2], 64)
	waitedMS, _ := strconv.ParseFloat(m[3], 64)
	gotLost, _ := f.Evidence["lost_records"].(float64)
	gotJiffies, _ := f.Evidence["waited_jiffies"].(float64)
	if gotLost < lost || math.Floor(gotJiffies*1000/hz) < waitedMS {
		t.Errorf("counters: %v lost, %v jiffies waited; the scenario read %v lost, %v ms (HZ %v)", gotLost, gotJiffies, lost, waitedMS, hz)
	}
	// Confirmed by those counters, the detector's own rule: critical from
	// one 100 ms stall; else one step lower.
	// (The doctor's wider span may see what the scenario's reads did not.)
	sevs := []string{"info", "warning", "critical"}
	want := 0
	if maxNS >= 100e6 {
		want = 1
	}
	if lost > 0 || waitedMS > 0 {
		want++
	}
	wider := want < 2 && (gotLost > lost || gotJiffies > 0) && f.Severity == sevs[want+1]
	if f.Severity != sevs[want] && !wider {
		t.Errorf("severity %s, want %s (max stall %v ns, lost %v, waited %v ms)", f.Severity, sevs[want], maxNS, lost, waitedMS)
	}
	t.Logf("from the strace log alone: %s %s: %s", f.Severity, f.ID, f.Title)

	c, err := capture.Open(capPath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var facts []struct {
		Message  string            `json:"message"`
		Fields   map[string]uint32 `json:"fields"`
		Syscalls []string          `json:"syscalls"`
	}
	if err := json.Unmarshal([]byte(c.Header().Meta["strace_audit"]), &facts); err != nil {
		t.Fatalf("strace_audit meta: %v", err)
	}
	var set, rule bool
	for _, x := range facts {
		if x.Message == "AUDIT_SET" && x.Fields["enabled"] == 1 && x.Fields["backlog_limit"] == 16 {
			set = true
		}
		if x.Message == "AUDIT_ADD_RULE" && strings.Join(x.Syscalls, ",") == "accept4" {
			rule = true
		}
	}
	if !set || !rule {
		t.Errorf("audit facts %+v: want the AUDIT_SET of backlog_limit 16 and the rule on accept4", facts)
	}
}
