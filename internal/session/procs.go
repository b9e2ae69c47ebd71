package session

import (
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/proc"
)

// AddRunning adds the processes already running to t, unless events told
// of them first (they are newer).
func AddRunning(t *proc.Table) {
	snap, _ := proc.Snapshot()
	addRunning(t, snap)
}

func addRunning(t *proc.Table, snap []proc.Info) {
	for _, p := range snap {
		if _, ok := t.Get(p.PID); ok {
			continue
		}
		t.Update(&event.Event{Kind: event.KindExec, PID: p.PID, TID: p.PID, Comm: p.Comm, Cgroup: p.Cgroup,
			Proc: event.Proc{Filename: p.Exe, Argv: p.Cmdline}})
	}
}
