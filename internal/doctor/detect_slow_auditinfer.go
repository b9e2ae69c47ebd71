package doctor

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/strace"
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

// auditFacts is the audit traffic an imported capture recorded, in time
// order.
type auditFacts []strace.AuditFact

func readAuditFacts(meta map[string]string) auditFacts {
	s := meta["strace_audit"]
	if s == "" {
		return nil
	}
	var fs auditFacts
	if json.Unmarshal([]byte(s), &fs) != nil {
		return nil
	}
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Time < fs[j].Time })
	return fs
}

// auditState is what the facts said of audit at one time: the status
// fields last set or read, and the syscalls the rules added so far audit.
// Deleted rules are not in the log's facts (strace's AUDIT_DEL_RULE is not
// read), so a rule counts from when it was added; a later status set of
// enabled=0 ends it all.
type auditState struct {
	fields map[string]uint32
	rules  map[string]bool
}

func (fs auditFacts) at(t uint64) auditState {
	st := auditState{fields: map[string]uint32{}, rules: map[string]bool{}}
	for _, f := range fs {
		if f.Time > t {
			break
		}
		for k, v := range f.Fields {
			st.fields[k] = v
		}
		for _, s := range f.Syscalls {
			st.rules[s] = true
		}
	}
	return st
}

// stalls reports whether a full backlog would make an audited call sleep:
// audit on, a backlog limit (0 is none), and a wait time not set to 0 (with
// 0 the kernel drops records instead of waiting). An unknown wait time is
// the kernel's default, 60 s.
func (st auditState) stalls() bool {
	wait, known := st.fields["backlog_wait_time"]
	return st.fields["enabled"] >= 1 && st.fields["backlog_limit"] > 0 && (!known || wait > 0)
}

func (st auditState) covers(name string) bool { return st.rules[name] || st.rules["all"] }

// auditInference is an audit stall inferred from an imported capture.
type auditInference struct {
	state          auditState // at the first stalled call
	auditedSlow    uint64
	auditedTotal   uint64
	otherSlow      uint64
	otherTotal     uint64
	reads          int    // status reads while audit was on
	fullReads      int    // of them, at the backlog limit
	lost, waitedJf uint32 // growth over those reads
}

// A share of slow calls among the audited ones at least this many times
// that among the calls no rule covered: the backlog, not the host. The
// audit scenario under strace saw 7 of 106 accept4 calls stall against 0
// of 2,103 other calls that do not wait (a clone of 12 ms was a vfork
// parent's wait); a loaded host slows every kind of call alike (a factor
// near 1).
const auditShareFactor = 10

// inferAudit picks from the slow calls without sleep records those the
// audit facts explain, and hands them to the audit detector; it returns
// the rest.
func (s *slow) inferAudit(facts auditFacts, calls []unstackedCall) []unstackedCall {
	type pick struct {
		u  *unstackedCall
		st auditState
	}
	var picked []pick
	audited := map[uint32]bool{}
	for i := range calls {
		u := &calls[i]
		name := event.SyscallName(s.arch, u.sc.Nr)
		if !nonBlocking(s.arch, &u.sc) && !event.Is(name, event.NeverWaits) {
			continue
		}
		st := facts.at(u.at)
		if !st.stalls() || !st.covers(name) {
			continue
		}
		picked = append(picked, pick{u, st})
		audited[u.sc.Nr] = true
	}
	if len(picked) == 0 {
		return calls
	}
	inf := &auditInference{state: picked[0].st, auditedSlow: uint64(len(picked))}
	for nr, n := range s.counts {
		name := event.SyscallName(s.arch, uint32(nr))
		switch {
		case audited[uint32(nr)]:
			inf.auditedTotal += n
		case !event.Is(name, event.MayWait) && !event.Is(name, event.Waits):
			inf.otherTotal += n
		}
	}
	for i := range calls {
		name := event.SyscallName(s.arch, calls[i].sc.Nr)
		if !audited[calls[i].sc.Nr] && !event.Is(name, event.MayWait) && !vforkCall(name, &calls[i].sc) {
			inf.otherSlow++
		}
	}
	// auditedSlow/auditedTotal ≥ factor × otherSlow/otherTotal
	if inf.otherTotal > 0 && inf.auditedSlow*inf.otherTotal < auditShareFactor*inf.otherSlow*inf.auditedTotal {
		return calls
	}
	inf.counters(facts)
	var rest []unstackedCall
	in := map[*unstackedCall]bool{}
	for _, p := range picked {
		in[p.u] = true
		name := event.SyscallName(s.arch, p.u.sc.Nr)
		s.add(p.u.pid, p.u.comm, &p.u.sc, name, name, nil, true, 0, 0)
	}
	for i := range calls {
		if !in[&calls[i]] {
			rest = append(rest, calls[i])
		}
	}
	s.audit.inferred = inf
	return rest
}

// counters reads what the status replies said while audit was on: a
// backlog at its limit, records lost, time tasks waited.
func (inf *auditInference) counters(facts auditFacts) {
	var first, last map[string]uint32
	for _, f := range facts {
		if f.Message != "AUDIT_GET" || f.Fields["enabled"] == 0 {
			continue
		}
		inf.reads++
		if lim := f.Fields["backlog_limit"]; lim > 0 && f.Fields["backlog"] >= lim {
			inf.fullReads++
		}
		if first == nil {
			first = f.Fields
		}
		last = f.Fields
	}
	if first == nil {
		return
	}
	grow := func(k string) uint32 {
		a, ok1 := first[k]
		b, ok2 := last[k]
		if ok1 && ok2 && b > a {
			return b - a
		}
		return 0
	}
	inf.lost, inf.waitedJf = grow("lost"), grow("backlog_wait_time_actual")
}

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
	return Finding{ID: AuditBacklogStall, Severity: sev, Key: keyOf("audit backlog", "inferred"), Syscalls: byValue(g.calls),
		Title: fmt.Sprintf("%d audited syscalls stalled up to %s, inferred to wait for room in the audit backlog",
			g.n, units.Duration(g.maxNS)),
		Summary: summary, Evidence: ev, Score: float64(g.totalNS) * 10,
		Fix: "To confirm, run `sysray doctor -- CMD` live: it shows the sleep stacks and reads the kernel's audit counters. " +
			"Then give the audit daemon enough CPU to drain the backlog, raise the backlog (auditctl -b 8192), " +
			"or let syscalls proceed when it is full (auditctl --backlog_wait_time 0); and audit fewer syscalls (narrow the rules)."}
}
