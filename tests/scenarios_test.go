package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

type finding struct {
	ID       string         `json:"id"`
	Severity string         `json:"severity"`
	Title    string         `json:"title"`
	Summary  string         `json:"summary"`
	Evidence map[string]any `json:"evidence"`
	Fix      string         `json:"fix"`
}

type doctorReport struct {
	Findings  []finding `json:"findings"`
	Drops     uint64    `json:"drops"`
	Uncounted uint64    `json:"uncounted"`
	NoMem     uint64    `json:"uncounted_no_memory"`
}

// demo runs one bundled reproduction live under the doctor (sysray demo
// builds scenarios/ itself) and returns its report.
func demo(t *testing.T, name string) doctorReport {
	t.Helper()
	rep, _ := demoOut(t, name)
	return rep
}

// demoOut is demo, and what the scenario said on stderr (its ground truth).
func demoOut(t *testing.T, name string) (doctorReport, string) {
	t.Helper()
	cmd := exec.Command(sysray, "demo", name, "--json", "--scenarios", "../scenarios")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	stderr := errb.String()
	var all map[string]doctorReport
	if jerr := json.Unmarshal(out, &all); jerr != nil {
		t.Fatalf("demo %s: %v; %v\n%s\n%s", name, err, jerr, out, stderr)
	}
	rep := all[name]
	if err != nil {
		t.Errorf("demo %s failed: %v\n%s\nfindings: %s", name, err, stderr, titles(rep))
	}
	if len(rep.Findings) == 0 {
		t.Fatalf("demo %s: no findings", name)
	}
	return rep, stderr
}

// doctorCmd runs the doctor on a command that must exit with code, and
// returns its JSON report.
func doctorCmd(t *testing.T, code int, argv ...string) doctorReport {
	t.Helper()
	out := t.TempDir() + "/report.json"
	r := run(t, append([]string{"doctor", "--json", "-o", out, "--"}, argv...)...)
	if r.code != code {
		t.Errorf("doctor exited %d, want %d (the command's status)", r.code, code)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep doctorReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("bad report: %v\n%s", err, b)
	}
	return rep
}

func titles(r doctorReport) string {
	var s []string
	for _, f := range r.Findings {
		s = append(s, fmt.Sprintf("%s %s: %s", f.Severity, f.ID, f.Title))
	}
	return strings.Join(s, "\n")
}

// top checks the first finding; id may list alternatives as "a|b".
func top(t *testing.T, r doctorReport, id, severity string) finding {
	t.Helper()
	f := r.Findings[0]
	if !strings.Contains("|"+id+"|", "|"+f.ID+"|") || f.Severity != severity {
		t.Fatalf("top finding is %s %s, want %s %s:\n%s", f.Severity, f.ID, severity, id, titles(r))
	}
	if f.Summary == "" || f.Fix == "" {
		t.Errorf("finding without summary or fix: %+v", f)
	}
	return f
}

func has(t *testing.T, f finding, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := f.Evidence[k]; !ok {
			t.Errorf("%s: evidence lacks %q: %v", f.ID, k, f.Evidence)
		}
	}
}

func TestStoryVsyscallCrash(t *testing.T) {
	requireBPF(t)
	r := demo(t, "vsyscall-crash")
	f := top(t, r, "legacy-vsyscall", "critical")
	has(t, f, "fault_addr", "fault_ip", "fault_flags", "vsyscall_mode", "exit")
	if a := f.Evidence["fault_addr"].(string); !strings.HasPrefix(a, "0xffffffffff600") {
		t.Errorf("fault address %s is not in the vsyscall page", a)
	}
	if f.Evidence["exit"] != "killed by SIGSEGV" {
		t.Errorf("exit %v", f.Evidence["exit"])
	}
	var fatal bool
	for _, g := range r.Findings {
		if g.ID == "fatal-signal" && g.Severity == "critical" && g.Evidence["address_is"] == "the legacy vsyscall page" {
			fatal = true
		}
	}
	if !fatal {
		t.Errorf("no fatal-signal finding naming the vsyscall page:\n%s", titles(r))
	}
}

func TestStoryVsyscallEmulated(t *testing.T) {
	requireBPF(t)
	f := top(t, demo(t, "vsyscall"), "legacy-vsyscall", "warning")
	has(t, f, "calls", "by_call", "calls_per_second", "vsyscall_mode", "emulated_ns_per_call", "vdso_ns_per_call", "slowdown")
	if bc, _ := f.Evidence["by_call"].(map[string]any); bc["time"] == nil {
		t.Errorf("by_call %v lacks time()", f.Evidence["by_call"])
	}
}

func TestStoryFadviseContention(t *testing.T) {
	requireBPF(t)
	// Contention when the latency curve shows it; on a 2-CPU host the
	// callers often just queue for a CPU, and the hotspot is what remains.
	f := top(t, demo(t, "fadvise"), "kernel-contention|kernel-hotspot", "warning")
	has(t, f, "processes", "cgroups", "latency_by_concurrent_callers", "mean_share", "on_cpu_kernel_stack")
	if f.Evidence["syscall"] != "fadvise64" {
		t.Errorf("contended syscall %v, want fadvise64", f.Evidence["syscall"])
	}
	// The writers run one, then two, then four at a time: the curve has levels.
	if c := anyStrings(f.Evidence["latency_by_concurrent_callers"]); len(c) < 2 {
		t.Errorf("latency by callers %v: want at least two levels", c)
	}
	// Sampled on the CPU, the kernel was in fadvise's own path.
	if s := strings.Join(anyStrings(f.Evidence["on_cpu_kernel_stack"]), " "); !strings.Contains(s, "fadvise") {
		t.Errorf("on-CPU kernel stack %q does not pass through fadvise", s)
	}
	if n, _ := f.Evidence["cgroups"].(float64); n < 3 {
		t.Errorf("%v cgroups, want the writers' own (4)", f.Evidence["cgroups"])
	}
	if !strings.Contains(f.Fix, "drop_log_memory") {
		t.Errorf("fix does not name --drop_log_memory: %s", f.Fix)
	}
}

func TestStoryAuditBacklog(t *testing.T) {
	requireBPF(t)
	f := top(t, demo(t, "audit"), "audit-backlog-stall", "critical")
	has(t, f, "syscalls", "count", "max_ns", "stack", "audit_status")
	if sc, _ := f.Evidence["syscalls"].(map[string]any); sc["accept4"] == nil {
		t.Errorf("stalled syscalls %v lack accept4", f.Evidence["syscalls"])
	}
	if m, _ := f.Evidence["max_ns"].(float64); m < 1e8 {
		t.Errorf("max stall %v ns, want hundreds of ms", m)
	}
	if st, _ := f.Evidence["audit_status"].(map[string]any); st["backlog_limit"] != float64(16) {
		t.Errorf("audit status during the stall: %v, want backlog_limit 16", st)
	}
	if !strings.Contains(strings.Join(anyStrings(f.Evidence["stack"]), " "), "audit_log_start") {
		t.Errorf("stack lacks audit_log_start: %v", f.Evidence["stack"])
	}
}

func TestStoryMAP32BIT(t *testing.T) {
	requireBPF(t)
	f := top(t, demo(t, "map32"), "failed-syscall-retry", "warning")
	has(t, f, "count", "errno", "flags_removed", "example_failed", "example_retry")
	if f.Evidence["syscall"] != "mmap" || f.Evidence["errno"] != "ENOMEM" {
		t.Errorf("retry of %v with %v, want mmap ENOMEM", f.Evidence["syscall"], f.Evidence["errno"])
	}
	if !strings.Contains(strings.Join(anyStrings(f.Evidence["flags_removed"]), " "), "MAP_32BIT") {
		t.Errorf("flags removed %v lack MAP_32BIT", f.Evidence["flags_removed"])
	}
}

func TestStoryRefused(t *testing.T) {
	requireBPF(t)
	f := top(t, demo(t, "refused"), "syscall-refused", "warning")
	has(t, f, "syscalls", "errno", "refused", "examples", "filter_installed_by")
	if got := strings.Join(anyStrings(f.Evidence["syscalls"]), ","); got != "clone3,faccessat2" || f.Evidence["errno"] != "EPERM" {
		t.Errorf("refused %s with %v, want clone3,faccessat2 with EPERM", got, f.Evidence["errno"])
	}
	// newlibc's defaults: 4 threads, 30 access checks, each refused once.
	if n, _ := f.Evidence["refused"].(float64); n != 34 {
		t.Errorf("%v refused calls, want 34", f.Evidence["refused"])
	}
	if n, _ := f.Evidence["fell_back"].(float64); n != 0 {
		t.Errorf("%v fallbacks, want 0: glibc does not fall back on EPERM", f.Evidence["fell_back"])
	}
}

func TestStoryMmapLock(t *testing.T) {
	requireBPF(t)
	f := top(t, demo(t, "mmaplock"), "mmap-lock-contention", "warning")
	has(t, f, "syscalls", "count", "waiting_threads", "max_wait_ns", "stack", "released_by")
	if sc, _ := f.Evidence["syscalls"].(map[string]any); sc["mprotect"] == nil {
		t.Errorf("waiting calls %v lack mprotect", f.Evidence["syscalls"])
	}
	// The holder is the thread that maps 512 MiB with MAP_POPULATE.
	if !strings.Contains(strings.Join(anyStrings(f.Evidence["released_by"]), " "), "MAP_POPULATE") {
		t.Errorf("released_by %v does not name the populating mmap", f.Evidence["released_by"])
	}
}

func TestStoryFDLeak(t *testing.T) {
	requireBPF(t)
	f := top(t, demo(t, "fdleak"), "fd-exhaustion", "critical")
	if !strings.Contains(f.Title, "busy accept loop") {
		t.Errorf("title %q does not name the busy accept loop", f.Title)
	}
	if !strings.Contains(f.Summary, "RLIMIT_NOFILE is 128") {
		t.Errorf("summary does not give the limit of 128: %s", f.Summary)
	}
}

// The files written and read back through a 32 MiB limit cost time in
// reclaim and in reads from disk: the top finding is either's, and the
// reclaim is a warning whichever cost more.
func TestStoryMemcg(t *testing.T) {
	requireBPF(t)
	r := demo(t, "memcg")
	top(t, r, "cgroup-limit|page-cache-thrash", "warning")
	f := findingOf(t, r, "cgroup-limit")
	if f.Severity != "warning" {
		t.Errorf("cgroup-limit is %s, want warning", f.Severity)
	}
	if !strings.Contains(f.Title, "memory-cgroup reclaim") || !strings.Contains(f.Title, "at its memory limit") {
		t.Errorf("title %q does not say reclaim at the memory limit", f.Title)
	}
}

func TestStoryHotcall(t *testing.T) {
	requireBPF(t)
	f := top(t, demo(t, "hotcall"), "hot-syscall", "warning")
	if f.Evidence["syscall"] != "getppid" {
		t.Errorf("hot call %v, want getppid", f.Evidence["syscall"])
	}
	if n, _ := f.Evidence["calls"].(float64); n < 500_000 {
		t.Errorf("%v calls counted, want about a million a second for 2 s", f.Evidence["calls"])
	}
}

func TestStoryWriteback(t *testing.T) {
	requireBPF(t)
	f := top(t, demo(t, "writeback"), "blocked-in-kernel-io", "warning")
	has(t, f, "stack", "mount", "wait_ns", "vm.dirty_bytes")
	if f.Evidence["cause"] != "dirty-throttle" {
		t.Errorf("cause %v, want dirty-throttle", f.Evidence["cause"])
	}
	// The scenario lowers the limit to 4 MiB while it runs.
	if f.Evidence["vm.dirty_bytes"] != "4194304" {
		t.Errorf("vm.dirty_bytes %v, want the scenario's 4194304", f.Evidence["vm.dirty_bytes"])
	}
	if sc, _ := f.Evidence["syscalls"].(map[string]any); sc["write"] == nil {
		t.Errorf("throttled calls %v lack write", f.Evidence["syscalls"])
	}
}

// The nagle demo: 40 requests, the first acknowledged at once, each of
// the others waiting for the server's delayed ACK (≥ 40 ms, TCP_DELACK_MIN).
func TestStoryNagle(t *testing.T) {
	requireBPF(t)
	f := top(t, demo(t, "nagle"), "nagle-delayed-ack", "warning")
	has(t, f, "peer", "requests_stalled", "median_wait_ns", "stalled_ns", "write_calls", "read_calls")
	if n, _ := f.Evidence["requests_stalled"].(float64); n < 35 || n > 40 {
		t.Errorf("%v requests stalled, want 35 to 40 of 40 (the first is usually acknowledged at once)", f.Evidence["requests_stalled"])
	}
	if m, _ := f.Evidence["median_wait_ns"].(float64); m < 40e6 || m > 60e6 {
		t.Errorf("median wait %v ns, want the delayed-ACK timer's 40 ms and a few jiffies", f.Evidence["median_wait_ns"])
	}
	if p, _ := f.Evidence["peer"].(string); !strings.HasPrefix(p, "127.0.0.1:") {
		t.Errorf("peer %q, want the loopback server", p)
	}
}

// Ordinary work yields nothing at warning or above.
func TestBenignWorkloads(t *testing.T) {
	requireBPF(t)
	dir := t.TempDir()
	src, _ := os.ReadFile("progs/getppid.c")
	os.WriteFile(dir+"/a.c", src, 0o644)
	for name, script := range map[string]string{
		"compile": "gcc -O2 -c " + dir + "/a.c -o " + dir + "/a.o && gcc -O2 -o " + dir + "/a " + dir + "/a.c",
		"gzip":    "gzip -c /usr/bin/bash > " + dir + "/b.gz && gzip -dc " + dir + "/b.gz > /dev/null",
		"find":    "find /usr/include /etc -name '*.h' -o -name '*.conf' | wc -l",
		"python":  "python3 -c 'import json, os, subprocess; json.dumps(sorted(os.listdir(\"/usr/lib\"))); subprocess.run([\"true\"])'",
		"idle":    "sleep 1",
		// yes and seq die of SIGPIPE when head stops reading: ordinary.
		"pipeline": "yes | head -1 > /dev/null && seq 1000000 | head -3 > /dev/null",
	} {
		t.Run(name, func(t *testing.T) {
			r := doctorCmd(t, 0, "sh", "-c", script)
			for _, f := range r.Findings {
				if f.Severity != "info" {
					t.Errorf("%s on ordinary work: %s", f.Severity, f.Title)
				}
			}
		})
	}
}

func anyStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// A process over its cgroup's memory limit is killed by the OOM killer; the
// doctor says so, not just "SIGKILL".
func TestOOMKill(t *testing.T) {
	requireBPF(t)
	// cgroup v1's memory controller on hybrid hosts, v2's memory.max otherwise.
	dir, limit, procs := "/sys/fs/cgroup/memory/sysray-test-oom", "memory.limit_in_bytes", "cgroup.procs"
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err != nil {
		dir, limit = "/sys/fs/cgroup/sysray-test-oom", "memory.max"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("making a memory cgroup: %v", err)
	}
	defer os.Remove(dir)
	if err := os.WriteFile(dir+"/"+limit, []byte("67108864"), 0o644); err != nil {
		t.Fatalf("setting the memory limit: %v", err)
	}
	script := "echo $$ > " + dir + "/" + procs + "; exec " + prog("hog")
	rep := doctorCmd(t, 128+9, "sh", "-c", script)
	f := top(t, rep, "oom-kill", "critical")
	has(t, f, "oom_kills", "signal", "last_syscalls")
}

// A stack overflow is named as one, on the main thread's stack (nothing
// mapped below it) and on a thread's (a PROT_NONE guard page), and the
// process is reported with the thread that overflowed.
func TestStackOverflow(t *testing.T) {
	requireBPF(t)
	for _, mode := range []string{"main", "thread"} {
		t.Run(mode, func(t *testing.T) {
			rep := doctorCmd(t, 128+11, prog("overflow"), mode)
			f := top(t, rep, "fatal-signal", "critical")
			has(t, f, "fault_addr", "stack_pointer", "si_code")
			if s, _ := f.Evidence["address_is"].(string); !strings.Contains(s, "stack overflow") {
				t.Errorf("address is %q, want a stack overflow", s)
			}
			want := map[string]string{"main": "SEGV_MAPERR", "thread": "SEGV_ACCERR"}[mode]
			if f.Evidence["si_code"] != want {
				t.Errorf("si_code %v, want %s", f.Evidence["si_code"], want)
			}
			// The kernel kept the thread's last calls, though the doctor
			// records few of them as events.
			last := anyStrings(f.Evidence["last_syscalls"])
			if n := strings.Count(strings.Join(last, ";"), "getppid("); n != 3 {
				t.Errorf("last syscalls %q: want the three getppid calls made just before", last)
			}
			if mode == "thread" && f.Evidence["tid"] == f.Evidence["pid"] {
				t.Errorf("reported thread %v is the main thread, not the one that overflowed", f.Evidence["tid"])
			}
		})
	}
}

// A syscall that runs long on the CPU is slow whether or not it was
// preempted on the way, and is said to be running, not sleeping. Four
// getrandom calls of 128 MiB (~0.4 s each) made the bytes asked for at a
// copying rate: large copies, info, not a stall (bulkWork).
func TestSlowOnCPU(t *testing.T) {
	requireBPF(t)
	rep := doctorCmd(t, 0, prog("slowcpu"), "4", "128")
	var f finding
	for _, g := range rep.Findings {
		if g.Severity != "info" {
			t.Errorf("%s %s on calls that did what they were asked: %s", g.Severity, g.ID, g.Title)
		}
		if g.ID == "slow-syscall" {
			f = g
		}
	}
	if f.ID == "" {
		t.Fatalf("no slow-syscall finding:\n%s", titles(rep))
	}
	if n, _ := f.Evidence["count"].(float64); n != 4 {
		t.Errorf("%v slow calls, want the 4 getrandom calls: %s", f.Evidence["count"], f.Summary)
	}
	if n, _ := f.Evidence["bulk_calls"].(float64); n != 4 {
		t.Errorf("%v bulk calls, want the 4 getrandom calls of 128 MiB: %s", f.Evidence["bulk_calls"], f.Summary)
	}
	if !strings.Contains(f.Title, "getrandom") || !strings.Contains(f.Title, "running in the kernel on large copies") {
		t.Errorf("title %q", f.Title)
	}
}
