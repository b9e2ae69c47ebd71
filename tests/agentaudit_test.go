package tests

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The audit story under the agent at its default duty cycle (the
// per-syscall programs attached 1 s in 10): accept4 calls that wait up to
// a second each in audit_log_start outlast the attached stretch, so the
// traced calls alone miss them. The agent reads the kernel's audit
// counters and looks for tasks asleep in audit_log_start, and finds the
// stall whether it began after the agent started or before.
func TestAgentAuditStall(t *testing.T) {
	requireBPF(t)
	bin := scenario(t, "audit")
	for _, c := range []struct {
		name   string
		before bool   // the host is sick before the agent starts
		call   string // the audited call found asleep
		limit  float64
	}{
		{"story after start", false, "accept4", 16},
		{"sick before start", true, "openat", 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			waitAuditFree(bin)
			var a *agentProc
			if c.before {
				stop := makeSick(t, 60*time.Second)
				defer stop()
				a = startAgent(t, "--syscalls", "duty")
			} else {
				a = startAgent(t, "--syscalls", "duty")
				story := exec.Command(bin, "run", "-mode", "stall", "-d", "25s")
				story.Stderr = os.Stderr
				if err := story.Start(); err != nil {
					t.Fatal(err)
				}
				defer func() {
					story.Process.Signal(os.Interrupt) // it restores on SIGINT
					story.Wait()
				}()
			}
			// A window that saw one status read says the backlog was full;
			// the next, with the counters' growth over it, how long tasks
			// waited: the finding rises to critical.
			start := time.Now()
			var f *agentFinding
			for deadline := start.Add(45 * time.Second); (f == nil || f.Severity != "critical") && time.Now().Before(deadline); time.Sleep(time.Second) {
				for _, x := range a.findings(t) {
					if x.ID == "audit-backlog-stall" && (f == nil || x.Severity == "critical") {
						f = &x
					}
				}
			}
			if f == nil {
				t.Fatalf("no audit-backlog-stall after %s: %+v", time.Since(start).Round(time.Second), a.findings(t))
			}
			t.Logf("after %s: %s %s", time.Since(start).Round(time.Second), f.Severity, f.Title)
			if f.Severity != "critical" {
				t.Errorf("severity %s, want critical (tasks waited seconds)", f.Severity)
			}
			if w, _ := f.Evidence["waited_ns"].(float64); w < 1e9 {
				t.Errorf("waited_ns %v: want the seconds tasks waited", f.Evidence["waited_ns"])
			}
			if st, _ := f.Evidence["audit_status"].(map[string]any); st["backlog_limit"] != c.limit {
				t.Errorf("audit status during the stall %v, want backlog_limit %v", st, c.limit)
			}
			asleep := strings.Join(anyStrings(f.Evidence["asleep_in_audit_log_start"]), "; ")
			if !strings.Contains(asleep, c.call) {
				t.Errorf("tasks asleep in audit_log_start %q: want the ones in %s", asleep, c.call)
			}
			if code, _ := a.stop(t); code != 0 {
				t.Errorf("agent exited %d", code)
			}
		})
	}
}
