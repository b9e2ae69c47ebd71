package tests

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The audit story under the agent at its default duty cycle (the
// per-syscall programs attached 0.5 s in 10): accept4 calls that wait up to
// a second each in audit_log_start outlast the attached stretch, so the
// traced calls alone miss them. The agent reads the kernel's audit
// counters and looks for tasks asleep in audit_log_start, and finds the
// stall whether it began after the agent started or before
// (TestSickAgentAuditStall, in the sick tier: it sets the host up for
// half a minute); without CAP_AUDIT_CONTROL, as the DaemonSet runs it, from
// the looks alone.
func TestAgentAuditStall(t *testing.T) {
	agentAuditStall(t, []auditCase{
		{"story after start", false, "accept4", 16, false},
		{"without CAP_AUDIT_CONTROL", false, "accept4", 0, true},
	})
}

// The agent started on a host whose audit backlog is full already.
func TestSickAgentAuditStall(t *testing.T) {
	agentAuditStall(t, []auditCase{{"sick before start", true, "openat", 8, false}})
}

// auditDutyPeriod is the duty period (also the doctor's window) of the
// agent that reads audit's counters: its finding comes at a window's end,
// and at the default 10 s the case waited 12 s for it. Duty cycling stays
// on (0.5 s of every 2 s attached), which is what the case is about. The
// blind agent keeps the default: its evidence is the sleepers its looks
// saw over a window, and a 2 s window often holds too few looks to span
// the second it asks for (16 s against 12 in a run).
const auditDutyPeriod = "2s"

type auditCase struct {
	name   string
	before bool   // the host is sick before the agent starts
	call   string // the audited call found asleep
	limit  float64
	// blind: the agent runs with the DaemonSet's capabilities, without
	// CAP_AUDIT_CONTROL: no counters, only the tasks found asleep.
	blind bool
}

func agentAuditStall(t *testing.T, cases []auditCase) {
	requireBPF(t)
	bin := scenario(t, "audit", "audit-acceptor")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			waitAuditFree(bin)
			launch := func() *agentProc {
				if !c.blind {
					return startAgent(t, "--syscalls", "duty", "--duty-period", auditDutyPeriod)
				}
				setpriv, err := exec.LookPath("setpriv")
				if err != nil {
					t.Fatal("setpriv is needed to run the agent without CAP_AUDIT_CONTROL: " + err.Error())
				}
				return runAgent(t, exec.Command(setpriv, "--bounding-set", "-all,+bpf,+perfmon,+syslog,+sys_ptrace,+dac_read_search",
					"--inh-caps", "-all", "--no-new-privs", "--", sysray, "agent", "--listen", "127.0.0.1:0", "--interval", "500ms",
					"--capture-dir", t.TempDir()))
			}
			var a *agentProc
			if c.before {
				stop := makeSick(t, 60*time.Second)
				defer stop()
				a = launch()
			} else {
				a = launch()
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
			// One finding for the host's backlog, window after window (its
			// evidence the latest window's): a first short window may have
			// one status read and the sleepers only; a full one has the
			// counters' growth over it. Wait for the measure of the wait.
			measure := "waited_ns"
			if c.blind {
				measure = "asleep_seen_over_ns" // the looks, a second apart
			}
			done := func(f *agentFinding) bool {
				w, _ := f.Evidence[measure].(float64)
				return f.Severity == "critical" && w >= 1e9
			}
			start := time.Now()
			var f *agentFinding
			for deadline := start.Add(45 * time.Second); (f == nil || !done(f)) && time.Now().Before(deadline); time.Sleep(time.Second) {
				for _, x := range a.findings(t) {
					if x.ID == "audit-backlog-stall" {
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
			if c.blind {
				if w, _ := f.Evidence["asleep_seen_over_ns"].(float64); w < 1e9 {
					t.Errorf("asleep_seen_over_ns %v: want a second or more", f.Evidence["asleep_seen_over_ns"])
				}
				if _, ok := f.Evidence["audit_status_error"]; !ok {
					t.Errorf("the evidence does not say the status was unreadable: %v", f.Evidence)
				}
			} else {
				if w, _ := f.Evidence["waited_ns"].(float64); w < 1e9 {
					t.Errorf("waited_ns %v: want the seconds tasks waited", f.Evidence["waited_ns"])
				}
				if st, _ := f.Evidence["audit_status"].(map[string]any); st["backlog_limit"] != c.limit {
					t.Errorf("audit status during the stall %v, want backlog_limit %v", st, c.limit)
				}
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
