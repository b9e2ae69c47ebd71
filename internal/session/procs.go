package session

import (
	"slices"

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

// Selected is the part of snap a selection can trace: the processes of
// pids (and, with children, their descendants running now), or those in
// cgroups; none when the selection is only a command yet to start; all of
// it for the whole host. A capture's header carries this table, with each
// process's command line: the rest of the host's are none of its business.
func Selected(snap []proc.Info, pids []uint32, children bool, cgroups []uint64, command bool) []proc.Info {
	if len(pids) == 0 && len(cgroups) == 0 {
		if command {
			return nil
		}
		return snap
	}
	keep := map[uint32]bool{}
	for _, p := range pids {
		keep[p] = true
	}
	if children {
		// Parents may come after their children in snap: repeat until
		// no new descendant turns up.
		for grew := true; grew; {
			grew = false
			for _, p := range snap {
				if !keep[p.PID] && keep[p.PPID] {
					keep[p.PID], grew = true, true
				}
			}
		}
	}
	var out []proc.Info
	for _, p := range snap {
		if keep[p.PID] || slices.Contains(cgroups, p.Cgroup) {
			out = append(out, p)
		}
	}
	return out
}
