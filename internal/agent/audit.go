package agent

import (
	"log/slog"
	"time"

	"github.com/sysray/sysray/internal/audit"
	"github.com/sysray/sysray/internal/checkup"
	"github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/probe"
)

// auditWatch follows the kernel's audit status for the agent's whole life.
// It serves two ends: the doctor's audit-backlog-stall in each window (a
// call that waits longer than the per-syscall programs stay attached is
// seen nowhere else, and a host can be sick before the agent starts), and
// the agent's own safety: while the backlog is full every open by an
// audited process may wait, the agent's included, so what reads files on
// the way of events or of the metrics does without (Stalling).
type auditWatch struct {
	*audit.Watcher
	probe func() *probe.Probe // the probe loaded now, for the task iterator
}

// newAuditWatch reads the status first: it answers at once, sick host or
// not, and says whether what follows may wait on files. Without looks (no
// doctor to report what they find) no task is ever walked.
func newAuditWatch(log *slog.Logger, looks bool) *auditWatch {
	w := &auditWatch{}
	first, err := audit.GetStatus()
	if err != nil {
		log.Info("the audit status is unreadable: audit stalls are found from the tasks asleep in audit_log_start alone",
			"error", err.Error())
		first = nil
	} else if first.Full() {
		log.Warn("the audit backlog is full: every audited syscall on this host waits for room in it; the agent reads files only when it must",
			"backlog", first.Backlog, "backlog_limit", first.BacklogLimit, "backlog_wait_time", first.BacklogWaitTime)
	}
	var sleepers func() []audit.Sleeper
	if looks {
		sleepers = func() []audit.Sleeper { return checkup.AuditSleepers(w.probe()) }
	}
	w.Watcher = audit.NewWatcher(first, host.Mono, sleepers)
	// Walk the tasks only while the backlog is full, or unknown.
	w.Lazy = true
	return w
}

// run starts following the status (once a second) and, while the backlog
// is full or the status unreadable, the tasks asleep in audit_log_start,
// found by the probe p returns.
func (w *auditWatch) run(p func() *probe.Probe) {
	w.probe = p
	w.Run(time.Second)
}

// stop ends the watch, if it ran.
func (w *auditWatch) stop() {
	if w.probe != nil {
		w.Stop(0)
	}
}
