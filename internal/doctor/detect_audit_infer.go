package doctor

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/units"
)

// An imported capture has no sleep stacks, so a call asleep in
// audit_log_start cannot be seen there. What it can have is what the traced
// processes told the kernel's audit over NETLINK_AUDIT (the header's
// strace_audit: status sets, status reads, rules added). A stall is inferred
// from those when a slow call should not have slept at all (non-blocking,
// or a call that never waits), audit was on with a backlog limit and a rule
// auditing that syscall when it was made, and the audited calls were slow
// far more often than the calls no rule covered: a host too loaded (or
// strace's own cost) makes every kind of call slow, a full audit backlog
// only the audited ones.

// confirmed: the kernel's own counters, as the traced processes read
// them, show the backlog full or tasks waiting.
func (inf *auditInference) confirmed() bool {
	return inf.fullReads > 0 || inf.lost > 0 || inf.waitedJf > 0
}

// inferredFinding is audit-backlog-stall from durations and settings.
// Severity: the detector's rule (critical from one call of 100 ms, else
// warning) when the kernel's counters the processes read back confirm the
// backlog was full; one step lower when only the durations and settings
// say so, because nothing seen in the kernel ties those calls to the
// backlog: strace's own stops could have stretched them.
func (a *auditStall) inferredFinding(env *Env) Finding {
	g, inf := a.calls, a.inferred
	sev := Info
	if g.maxNS >= slowWarn {
		sev = Warning
	}
	if inf.confirmed() {
		sev++
	}
	ev := g.evidence(env)
	ev["inferred_from"] = "call durations and the audit settings the traced processes sent (strace_audit); no kernel stack"
	settings := map[string]uint32{}
	for _, k := range []string{"enabled", "backlog_limit", "backlog_wait_time", "pid", "failure"} {
		if v, ok := inf.state.fields[k]; ok {
			settings[k] = v
		}
	}
	ev["audit_settings"] = settings
	var rules []string
	for r := range inf.state.rules {
		rules = append(rules, r)
	}
	sort.Strings(rules)
	ev["audit_rules"] = rules
	ev["slow_share"] = map[string]string{
		"audited": fmt.Sprintf("%d of %d", inf.auditedSlow, inf.auditedTotal),
		"other":   fmt.Sprintf("%d of %d", inf.otherSlow, inf.otherTotal)}
	if inf.reads > 0 {
		ev["backlog_full_reads"] = fmt.Sprintf("%d of %d", inf.fullReads, inf.reads)
		ev["lost_records"] = inf.lost
		ev["waited_jiffies"] = inf.waitedJf
	}

	what := "calls that never wait"
	if g.nonblock == g.n {
		what = "non-blocking calls"
	} else if g.nonblock > 0 {
		what = fmt.Sprintf("calls that should not sleep (%d of them non-blocking)", g.nonblock)
	}
	wait := "the kernel's default backlog_wait_time"
	if v, ok := inf.state.fields["backlog_wait_time"]; ok {
		wait = fmt.Sprintf("backlog_wait_time %d jiffies", v)
	}
	summary := fmt.Sprintf("%d calls to %s took %s in all, up to %s each, though they were %s. "+
		"They were made while the traced processes had audit on (enabled=%d) with a backlog limit of %d records and %s, "+
		"and a rule auditing %s; %s of the audited calls took %s or more, against %s of the other calls that do not wait. "+
		"This is inferred from the calls' durations and those audit settings, not from a kernel stack (the capture has none): "+
		"when the audit backlog is full, every audited syscall sleeps in audit_log_start until the audit daemon drains it.",
		g.n, callList(g.calls), units.Duration(g.totalNS), units.Duration(g.maxNS), what,
		inf.state.fields["enabled"], inf.state.fields["backlog_limit"], wait, strings.Join(rules, ", "),
		ev["slow_share"].(map[string]string)["audited"], units.Duration(slowMin), ev["slow_share"].(map[string]string)["other"])
	if inf.reads > 0 {
		summary = joinSentences(summary, fmt.Sprintf("The status the traced processes read back while audit was on: %d of %d reads "+
			"found the backlog at its limit, %d records were lost, and tasks waited %d jiffies for room (backlog_wait_time_actual).",
			inf.fullReads, inf.reads, inf.lost, inf.waitedJf))
	}
	if !inf.confirmed() {
		summary = joinSentences(summary, "No status read confirms the backlog was full, so this is one step less severe than a stall seen in the kernel.")
	}
	if p := inf.state.fields["pid"]; p != 0 {
		summary = joinSentences(summary, fmt.Sprintf("The registered audit daemon was pid %d.", p))
	}
	summary = joinSentences(summary, "Applications see this as unexplained gaps: a non-blocking call that takes hundreds of milliseconds.")
	return Finding{ID: AuditBacklogStall, Severity: sev, Key: keyOf("audit backlog", "inferred"), Procs: env.refs(pidsOf(g.procs)...), Syscalls: byValue(g.calls),
		Title: fmt.Sprintf("%d audited syscalls stalled up to %s, inferred to wait for room in the audit backlog",
			g.n, units.Duration(g.maxNS)),
		Summary: summary, Evidence: ev, Score: float64(g.totalNS) * 10,
		Fix: "To confirm, run `sysray doctor -- CMD` live: it shows the sleep stacks and reads the kernel's audit counters. " +
			"Then give the audit daemon enough CPU to drain the backlog, raise the backlog (auditctl -b 8192), " +
			"or let syscalls proceed when it is full (auditctl --backlog_wait_time 0); and audit fewer syscalls (narrow the rules)."}
}
