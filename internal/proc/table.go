package proc

import (
	"strings"
	"sync"

	"github.com/sysray/sysray/internal/event"
)

// Table follows processes through fork, exec and exit events, starting from
// a snapshot. It is safe for concurrent use.
type Table struct {
	mu    sync.RWMutex
	procs map[uint32]*Info
}

// NewTable starts a table from a snapshot.
func NewTable(snap []Info) *Table {
	t := &Table{procs: make(map[uint32]*Info, len(snap))}
	for i := range snap {
		p := snap[i]
		t.procs[p.PID] = &p
	}
	return t
}

// Update applies a lifecycle event. Exited processes are kept: their
// events may still be in flight or read later.
func (t *Table) Update(e *event.Event) {
	switch e.Kind {
	case event.KindFork:
		if e.Proc.Thread {
			return
		}
		t.mu.Lock()
		child := Info{PID: e.Proc.ChildPID, PPID: e.PID, Comm: e.Proc.ChildComm, Cgroup: e.Cgroup, Start: e.Time}
		if parent, ok := t.procs[e.PID]; ok {
			child.Exe = parent.Exe
			child.Cmdline = parent.Cmdline
		}
		t.procs[child.PID] = &child
		t.mu.Unlock()
	case event.KindExec:
		t.mu.Lock()
		p, ok := t.procs[e.PID]
		if !ok {
			p = &Info{PID: e.PID}
			t.procs[e.PID] = p
		}
		p.Comm = e.Comm
		p.Exe = e.Proc.Filename
		p.Cmdline = e.Proc.Argv
		p.Cgroup = e.Cgroup
		t.mu.Unlock()
	}
}

// Get returns what is known of pid.
func (t *Table) Get(pid uint32) (Info, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	p, ok := t.procs[pid]
	if !ok {
		return Info{}, false
	}
	return *p, true
}

// Cmdline is the command line of pid joined by spaces, or "".
func (t *Table) Cmdline(pid uint32) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if p, ok := t.procs[pid]; ok {
		return strings.Join(p.Cmdline, " ")
	}
	return ""
}
