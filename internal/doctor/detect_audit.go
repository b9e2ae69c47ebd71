package doctor

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/audit"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/units"
)

// The finding it reports.
const AuditBacklogStall ID = "audit-backlog-stall"

func init() {
	register(registration{ids: []ID{AuditBacklogStall},
		build: func(h *Host) Detector {
			a := newAuditStall(h.Arch)
			a.bar = h.slowBar()
			return a
		}})
}

// auditStall reports audited syscalls that waited for room in a full audit
// backlog. Two sources feed it: traced calls of the slow bar or more whose
// sleep stack passes through audit_log_start, and, live,
// the kernel's own counters over the run (Host.Audit): the time tasks
// waited (backlog_wait_time_actual), the records lost, the backlog at its
// limit, and the tasks found asleep in audit_log_start. The counters cover
// the whole host, so the stall is reported also when no traced call was
// audited, or when the backlog was full before the doctor started.
type auditStall struct {
	arch  event.Arch
	bar   uint64     // ns: a call this long carries its sleeps (Host.slowBar)
	calls *slowGroup // traced calls seen stalled; nil if none
	// stacked: some slow call carried where it slept; then no stall is
	// inferred, since one would have been seen.
	stacked   bool
	unstacked []unstackedCall // slow calls without sleeps, for inferAudit
	counts    []uint64        // calls by syscall number, fast or slow (inferAudit)
	alloc     allocStalls     // the calls compaction-stall explains
	// inferred: the calls were not seen asleep in audit_log_start but
	// inferred to be from an imported capture's audit settings
	// (detect_audit_infer.go).
	inferred *auditInference
}

func newAuditStall(arch event.Arch) *auditStall {
	return &auditStall{arch: arch, bar: slowMin, alloc: allocStalls{}}
}

// Observe keeps the slow calls that slept in audit_log_start, and for an
// imported capture without sleeps what inferAudit needs: the slow calls
// slow-syscall would look at, and every call's count.
func (a *auditStall) Observe(e *event.Event) {
	if e.Kind == event.KindReclaim {
		a.alloc.observe(e)
		return
	}
	if e.Kind != event.KindSyscall {
		return
	}
	sc := &e.Syscall
	inAlloc := a.alloc.owns(e)
	if int(sc.Nr) < 1<<12 {
		if int(sc.Nr) >= len(a.counts) {
			a.counts = append(a.counts, make([]uint64, int(sc.Nr)+1-len(a.counts))...)
		}
		a.counts[sc.Nr]++
	}
	if sc.Latency < a.bar {
		return
	}
	if len(sc.Sleeps) > 0 {
		a.stacked = true
	}
	if sc.Unfinished {
		return
	}
	name := event.SyscallName(a.arch, sc.Nr)
	if inAlloc || ownedElsewhere(name, sc) {
		return
	}
	if len(sc.Sleeps) == 0 {
		if unstacked(name, sc) && len(a.unstacked) < unstackedMax {
			a.unstacked = append(a.unstacked, unstackedCall{pid: e.PID, comm: e.Comm, at: e.Time, sc: *sc})
		}
		return
	}
	if c := sleptIn(name, sc, a.bar); c.audit {
		a.add(e.PID, e.Comm, sc, name, c.key, c.stack, c.blocked, c.queued)
	}
}

// add counts a stalled call: in one group, named after the first.
func (a *auditStall) add(pid uint32, comm string, sc *event.Syscall, name, key string, stack []string, blocked, queued uint64) {
	if a.calls == nil {
		a.calls = newGroup(key, stack)
	}
	a.calls.add(a.arch, pid, comm, sc, name, stack, blocked, queued, 0)
}

// Findings: critical when one traced call waited a visible stall (slowWarn),
// or when the counters say tasks waited that long in all; a warning for
// shorter waits and for records lost without waits.
func (a *auditStall) Findings(env *Env) []Finding {
	if !a.stacked {
		if facts := readAuditFacts(env.Host.Meta); facts != nil {
			inf, picked, _ := inferAudit(a.arch, facts, a.unstacked, a.counts)
			for i := range picked {
				u := &picked[i]
				name := event.SyscallName(a.arch, u.sc.Nr)
				a.add(u.pid, u.comm, &u.sc, name, name, nil, 0, 0)
			}
			a.inferred = inf
		}
	}
	a.unstacked = nil
	if a.inferred != nil && a.calls != nil {
		return []Finding{a.inferredFinding(env)}
	}
	var win *audit.Window
	if env.Host.Audit != nil {
		win = env.Host.Audit()
	}
	waitedNS := uint64(0)
	if win != nil && win.HZ > 0 {
		waitedNS = uint64(win.Waited()) * 1e9 / uint64(win.HZ)
	}
	full, reads, _ := win.FullSamples()
	stalled := win != nil && (waitedNS > 0 || win.Lost() > 0 || full > 0 || len(win.Sleepers) > 0)
	if a.calls == nil && !stalled {
		return nil
	}

	ev := map[string]any{}
	sev := Warning
	var title, summary string
	g := a.calls
	if g != nil {
		ev = g.evidence(env)
		if g.maxNS >= slowWarn {
			sev = Critical
		}
		title = fmt.Sprintf("%d syscalls stalled up to %s waiting for room in the audit backlog", g.n, units.Duration(g.maxNS))
		summary = fmt.Sprintf("%d calls to %s slept %s in all, up to %s each, in audit_log_start: the kernel's audit backlog was full, "+
			"so every audited syscall waited (schedule_timeout) for the audit daemon to drain it.",
			g.n, callList(g.calls), units.Duration(g.totalNS), units.Duration(g.maxNS))
	}
	if waitedNS >= slowWarn {
		sev = Critical
	}
	score := 0.0
	if g != nil {
		score = float64(g.totalNS) * 10
	}
	score = max(score, float64(waitedNS)*10)

	if win != nil {
		during := duringStall(win)
		if during != nil {
			ev["audit_status"] = during
		}
		if win.Start != nil {
			ev["audit_status_start"] = win.Start.Status
		}
		if win.End != nil {
			ev["audit_status_end"] = win.End.Status
		}
		if reads > 0 {
			ev["backlog_full_reads"] = fmt.Sprintf("%d of %d", full, reads)
		}
		if win.Start != nil && win.End != nil || len(win.Samples) > 1 {
			ev["waited_ns"] = waitedNS
			ev["lost_records"] = win.Lost()
		}
		if win.Err != "" {
			ev["audit_status_error"] = win.Err
		}
		if g == nil {
			switch {
			case waitedNS > 0:
				title = fmt.Sprintf("Tasks waited %s in all for room in the full audit backlog", units.Duration(waitedNS))
			case full > 0 || len(win.Sleepers) > 0:
				title = "The audit backlog was full: audited syscalls waited for room in it"
			default:
				title = fmt.Sprintf("The audit backlog overflowed: %d audit records were lost", win.Lost())
			}
		}
		summary = joinSentences(summary, countersText(win, waitedNS, full, reads, g != nil))
		if win.Err != "" {
			// Said in the report as on stderr: a reader must know why
			// the counters are missing, and that it is sysray's
			// privileges, not the host, that hid them.
			summary = joinSentences(summary, fmt.Sprintf("The audit status could not be read (%s), "+
				"so the kernel's counters of the wait are not in this report.", win.Err))
		}
		if s := sleepersText(env, win); s != "" {
			summary = joinSentences(summary, s)
			ev["looked_every_ns"] = win.Every
			// Without the counters (no CAP_AUDIT_CONTROL) the looks are
			// the one measure of the wait: a thread found there over
			// a stall's length is a stall.
			if span := win.AsleepSpan(); span > 0 {
				ev["asleep_seen_over_ns"] = span
				summary = joinSentences(summary, fmt.Sprintf("One thread was found there in looks %s apart.", units.Duration(span)))
				if span >= slowWarn {
					sev = Critical
				}
				score = max(score, float64(span)*10)
			}
			ev["asleep_in_audit_log_start"] = sleeperNames(env, win)
			if _, ok := ev["stack"]; !ok && len(win.Sleepers[0].Stack) > 0 {
				ev["stack"] = win.Sleepers[0].Stack
			}
		}
		if g == nil && stalled {
			summary = joinSentences(summary, "None of the traced calls waited: the traced processes made no audited call "+
				"while the backlog was full, but any audited call on this host would have.")
		}
		if during != nil {
			summary = joinSentences(summary, daemonText(during, win.Daemon, ev))
		}
	}
	if g != nil {
		summary = joinSentences(summary, strings.TrimSpace(nonblockText(g)))
	}
	summary = joinSentences(summary, "Applications see this as unexplained gaps: a non-blocking call that takes hundreds of milliseconds.")
	fix := "Give the audit daemon enough CPU to drain the backlog (raise its cgroup CPU limit), raise the backlog " +
		"(auditctl -b 8192), or let syscalls proceed when it is full (auditctl --backlog_wait_time 0); " +
		"and audit fewer syscalls (narrow the rules)."
	// One backlog: whether a window saw stalled calls, the counters' waits
	// or sleepers only, it is one stall of the host's audit, not three.
	return []Finding{{ID: AuditBacklogStall, Severity: sev, Title: title, Summary: summary,
		Evidence: ev, Fix: fix, Score: score, Key: keyOf("audit backlog"), Procs: env.refs(a.pids(win)...)}}
}

// duringStall is the status read that best shows the stall: the fullest
// backlog while audit was on (the latest such read), else the first read.
func duringStall(win *audit.Window) *audit.Status {
	var best *audit.Status
	for i := range win.Samples {
		s := &win.Samples[i].Status
		if s.Enabled == 0 {
			continue
		}
		if best == nil || s.Backlog >= best.Backlog {
			best = s
		}
	}
	if best == nil && len(win.Samples) > 0 {
		best = &win.Samples[0].Status
	}
	return best
}

func countersText(win *audit.Window, waitedNS uint64, full, reads int, traced bool) string {
	var parts []string
	if win.Start != nil && win.Start.Status.Full() && !win.Continued() {
		parts = append(parts, fmt.Sprintf("The audit backlog was already full when the doctor started (%d records of at most %d).",
			win.Start.Status.Backlog, win.Start.Status.BacklogLimit))
	}
	if len(win.Samples) < 2 {
		return strings.Join(parts, " ")
	}
	run := "this run"
	if win.Continued() {
		run = "this window"
	}
	what := "over " + run
	if traced {
		what = "over the whole host during " + run
	}
	s := fmt.Sprintf("The kernel's own counters %s: tasks waited %s in all for room in the backlog (backlog_wait_time_actual), "+
		"%d audit records were lost", what, units.Duration(waitedNS), win.Lost())
	if reads > 0 {
		s += fmt.Sprintf(", and %d of %d status reads found the backlog at its limit", full, reads)
	}
	parts = append(parts, s+".")
	return strings.Join(parts, " ")
}

// sleepersText names the tasks found asleep in audit_log_start.
func sleepersText(env *Env, win *audit.Window) string {
	names := sleeperNames(env, win)
	if len(names) == 0 {
		return ""
	}
	more := ""
	if len(names) > 6 {
		more = fmt.Sprintf(" and %d more", len(names)-6)
		names = names[:6]
	}
	return fmt.Sprintf("Found asleep in audit_log_start (looking every %s): %s%s.",
		units.Duration(win.Every), strings.Join(names, "; "), more)
}

// sleeperNames lists the processes whose threads were found asleep in
// audit_log_start, most seen first.
func sleeperNames(env *Env, win *audit.Window) []string {
	type proc struct {
		pid     uint32
		comm    string
		threads int
		seen    int // looks that found one of its threads there, at most
		calls   map[string]bool
	}
	byPID := map[uint32]*proc{}
	var order []*proc
	for _, s := range win.Sleepers {
		p := byPID[s.PID]
		if p == nil {
			p = &proc{pid: s.PID, comm: s.Comm, calls: map[string]bool{}}
			byPID[s.PID] = p
			order = append(order, p)
		}
		p.threads++
		p.seen = max(p.seen, s.Seen)
		if s.Syscall != "" {
			p.calls[s.Syscall] = true
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].seen > order[j].seen })
	self := uint32(os.Getpid())
	var out []string
	for _, p := range order {
		name := env.ProcName(p.pid, p.comm)
		if env.Host.Live && p.pid == self {
			name += " (this doctor itself)"
		}
		var calls []string
		for c := range p.calls {
			calls = append(calls, c)
		}
		sort.Strings(calls)
		in := ""
		if len(calls) > 0 {
			in = " in " + strings.Join(calls, ", ")
		}
		threads := ""
		if p.threads > 1 {
			threads = fmt.Sprintf(", %d threads", p.threads)
		}
		out = append(out, fmt.Sprintf("%s%s%s, seen in %d of %d looks", name, in, threads, p.seen, win.Looks))
	}
	return out
}

// daemonText says what the registered audit daemon was doing.
func daemonText(st *audit.Status, d *audit.Daemon, ev map[string]any) string {
	s := fmt.Sprintf("During the stall the audit backlog held %d of at most %d records (backlog_wait_time %d jiffies, %d records lost since boot).",
		st.Backlog, st.BacklogLimit, st.BacklogWaitTime, st.Lost)
	if d != nil && d.PID == st.PID {
		ev["audit_daemon"] = d
		state := "seemed to keep up"
		switch {
		case st.Full():
			state = "was not draining it: the backlog was full"
			if d.Queued > 0 {
				state += fmt.Sprintf(", and %d bytes waited unread in its socket", d.Queued)
			}
		case !d.Reading():
			state = fmt.Sprintf("was not keeping up: %d bytes waited unread in its socket, %d dropped", d.Queued, d.Dropped)
		}
		s += fmt.Sprintf(" The registered audit daemon was %s[%d], which %s.", orUnknownComm(d.Comm), d.PID, state)
		if d.NrThrottled > 0 {
			s += fmt.Sprintf(" Its cgroup was CPU-throttled in %d of %d periods (%s in all, cpu.max %s).",
				d.NrThrottled, d.NrPeriods, units.Duration(d.ThrottledUsec*1000), d.CPUMax)
		}
	} else if st.PID != 0 {
		s += fmt.Sprintf(" The registered audit daemon was pid %d.", st.PID)
	} else if st.Enabled != 0 {
		s += " No audit daemon was registered."
	}
	return s
}

func orUnknownComm(c string) string {
	if c == "" {
		return "?"
	}
	return c
}

func nonblockText(g *slowGroup) string {
	if g.nonblock == 0 {
		return ""
	}
	return fmt.Sprintf(" %d of them were non-blocking calls.", g.nonblock)
}

// pids is the processes the finding is about: those of the stalled calls
// it keeps (a few), and those found asleep in audit_log_start.
func (a *auditStall) pids(win *audit.Window) []uint32 {
	var out []uint32
	if a.calls != nil {
		out = pidsOf(a.calls.procs)
	}
	if win != nil {
		for _, s := range win.Sleepers {
			out = append(out, s.PID)
		}
	}
	return out
}
