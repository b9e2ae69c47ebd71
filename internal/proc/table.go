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
	ended map[uint32]uint64 // event time a process's last thread exited
}

// NewTable starts a table from a snapshot.
func NewTable(snap []Info) *Table {
	t := &Table{procs: make(map[uint32]*Info, len(snap)), ended: map[uint32]uint64{}}
	for i := range snap {
		p := snap[i]
		t.procs[p.PID] = &p
	}
	return t
}

// Fill adds a snapshot taken while events were already applied: a process
// the table knows is left as its events made it, being newer news.
func (t *Table) Fill(snap []Info) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range snap {
		p := snap[i]
		if _, ok := t.procs[p.PID]; !ok {
			t.procs[p.PID] = &p
		}
	}
}

// Update applies a lifecycle event. Exited processes are kept: their
// events may still be in flight or read later (Prune forgets them).
func (t *Table) Update(e *event.Event) {
	switch e.Kind {
	case event.KindExit:
		if e.Proc.GroupDead {
			t.mu.Lock()
			if _, ok := t.procs[e.PID]; ok {
				t.ended[e.PID] = e.Time
			}
			t.mu.Unlock()
		}
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
		delete(t.ended, child.PID)
		t.mu.Unlock()
	case event.KindExec:
		t.mu.Lock()
		p, ok := t.procs[e.PID]
		if !ok {
			p = &Info{PID: e.PID}
			t.procs[e.PID] = p
		}
		delete(t.ended, e.PID) // a reused pid
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

// Prune forgets the processes that exited before the event time before,
// and says how many: a table that lives as long as a host's agent would
// otherwise keep every process the host ever ran.
func (t *Table) Prune(before uint64) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for pid, at := range t.ended {
		if at < before {
			delete(t.procs, pid)
			delete(t.ended, pid)
			n++
		}
	}
	return n
}

// Forget drops those of pids that have ended (and were not used again
// since): for a reader that needs no more of them (the doctor past its
// bound on ended processes).
func (t *Table) Forget(pids map[uint32]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for pid := range pids {
		if _, ok := t.ended[pid]; ok {
			delete(t.procs, pid)
			delete(t.ended, pid)
		}
	}
}

// All returns what is known of every process, exited ones included.
func (t *Table) All() []Info {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]Info, 0, len(t.procs))
	for _, p := range t.procs {
		out = append(out, *p)
	}
	return out
}
