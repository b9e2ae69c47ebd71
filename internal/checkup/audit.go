package checkup

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/sysray/sysray/internal/audit"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/probe"
	"github.com/sysray/sysray/internal/profile"
	"github.com/sysray/sysray/internal/symbol"
)

// auditGuard decides from the audit status, read at the start and again
// later, whether the host is sick: its backlog full or filling, or tasks
// waiting for room in it. It says so on warn once, as a first finding.
type auditGuard struct {
	first        *audit.Status // nil: audit could not be read
	hz           int
	warn         io.Writer
	sick, warned atomic.Bool
}

// frugal says audit is on with a backlog limit: then every open may wait
// behind the audit daemon, and the doctor reads nothing it can put off
// until tracing has started.
func (g *auditGuard) frugal() bool {
	return g.first != nil && g.first.Enabled != 0 && g.first.BacklogLimit > 0
}

// begin judges the first status read; it says whether the host is sick
// already.
func (g *auditGuard) begin() bool {
	if !filling(g.first) {
		return false
	}
	g.sick.Store(true)
	g.warned.Store(true)
	warnAuditFull(g.warn, g.first, 0, g.hz)
	return true
}

// check judges a later status read. The backlog goes up and down around
// its limit while full (kauditd empties it, the callers fill it again), so
// one read can miss it, but not the waits it caused.
func (g *auditGuard) check(now *audit.Status) {
	if g.first == nil || now == nil {
		return
	}
	waited := now.BacklogWaitTimeActual - g.first.BacklogWaitTimeActual
	if filling(now) || waited != 0 || now.Lost != g.first.Lost {
		g.sick.Store(true)
		if !g.warned.Swap(true) {
			warnAuditFull(g.warn, now, time.Duration(waited)*time.Second/time.Duration(max(g.hz, 1)), g.hz)
		}
	}
}

// asleep judges a look at the tasks when the status could not be read:
// n tasks were asleep in audit_log_start, so the backlog is full.
func (g *auditGuard) asleep(n int, why error) {
	g.sick.Store(true)
	if !g.warned.Swap(true) {
		fmt.Fprintf(g.warn, "sysray: CRITICAL [audit-backlog-stall] %d tasks are asleep in audit_log_start, waiting for room in "+
			"the full audit backlog: every audited syscall on this host waits while it is full (sysray's own too: it may "+
			"run slowly). The audit status could not be read (%v); the report follows.\n", n, why)
	}
}

// filling says the audit backlog is at least half full. A daemon that keeps
// up holds it near empty; past half, it is full or about to be, and every
// open sysray makes may wait and adds to it. (It goes up and down around
// its limit while full: kauditd empties it, the callers fill it again.)
func filling(st *audit.Status) bool {
	return st != nil && st.Enabled != 0 && st.BacklogLimit > 0 && 2*st.Backlog >= st.BacklogLimit
}

// warnAuditFull says on w that the audit backlog is full, as a first
// finding: a user who runs the doctor because the host is slow learns why at
// once, before the doctor's own audited calls wait too (the report, with
// the counters over the run, follows). waited, if not 0, is how long tasks
// waited for room in it while sysray started. The daemon is named by its
// pid: its name would cost an open (the report names it).
func warnAuditFull(w io.Writer, st *audit.Status, waited time.Duration, hz int) {
	state := "full"
	if !st.Full() {
		state = "filling up"
	}
	if waited > 0 {
		state += fmt.Sprintf(", tasks waited %s for room in it while sysray started", waited)
	}
	daemon := "no audit daemon is registered"
	if st.PID != 0 {
		daemon = fmt.Sprintf("the registered audit daemon, pid %d, is not draining it", st.PID)
	}
	fmt.Fprintf(w, "sysray: CRITICAL [audit-backlog-stall] the audit backlog is %s: backlog %d, limit %d, lost %d, "+
		"backlog_wait_time %d jiffies%s; %s. Every audited syscall on this host waits in audit_log_start while it is full "+
		"(sysray's own too: it may start slowly); the report follows.\n",
		state, st.Backlog, st.BacklogLimit, st.Lost, st.BacklogWaitTime, waitText(st.BacklogWaitTime, hz), daemon)
}

func waitText(jiffies uint32, hz int) string {
	if hz > 0 {
		return " (" + (time.Duration(jiffies) * time.Second / time.Duration(hz)).String() + ")"
	}
	return ""
}

// AuditSleepers lists the tasks asleep in audit_log_start, from the
// kernel's list of tasks in uninterruptible sleep (nil until the probe
// runs).
func AuditSleepers(p *probe.Probe) []audit.Sleeper {
	if p == nil {
		return nil
	}
	tasks, err := p.Blocked()
	if err != nil || len(tasks) == 0 {
		return nil
	}
	kernel, err := symbol.LoadKernel()
	if err != nil {
		return nil
	}
	return sleepersIn(tasks, event.HostArch(), kernel.Resolve)
}

// sleepersIn keeps the tasks whose kernel stack passes through
// audit_log_start.
func sleepersIn(tasks []probe.Blocked, arch event.Arch, resolve func(uint64) symbol.Frame) []audit.Sleeper {
	var out []audit.Sleeper
	for _, t := range tasks {
		var frames []string
		in := false
		for _, a := range t.Kernel {
			f := resolve(a)
			in = in || f.Func == "audit_log_start"
			frames = append(frames, profile.Frame(live.FrameName(f), a))
		}
		if !in {
			continue
		}
		s := audit.Sleeper{PID: t.PID, TID: t.TID, Comm: t.Comm, Stack: frames}
		if t.Syscall >= 0 {
			s.Syscall = event.SyscallName(arch, uint32(t.Syscall))
		}
		out = append(out, s)
	}
	return out
}
