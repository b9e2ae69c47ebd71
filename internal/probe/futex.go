package probe

import (
	"github.com/sysray/sysray/internal/event"
)

// futexReader turns the kernel's futex sums (bpf/futex.h, Config.Futex)
// into events: each read, one event per thread and address whose sums
// grew, carrying the growth. The sums stay in the kernel (a cell has one
// writer, its thread, and deleting it there would race that writer); the
// last values read stay here, one per cell, as many as the map holds.
type futexReader struct {
	last map[sysrayFtxKey]sysrayFtxVal
}

// readFutexes hands the growth since the last read to emit, stamped at.
func (p *Probe) readFutexes(r *futexReader, at uint64, emit func(event.Event)) {
	if p.objs.Futexes == nil || !p.futex {
		return
	}
	if r.last == nil {
		r.last = map[sysrayFtxKey]sysrayFtxVal{}
	}
	var (
		k sysrayFtxKey
		v sysrayFtxVal
	)
	seen := make(map[sysrayFtxKey]bool, len(r.last))
	it := p.objs.Futexes.Iterate()
	for it.Next(&k, &v) {
		seen[k] = true
		old, had := r.last[k]
		if had && old.Waits == v.Waits && old.Wakes == v.Wakes && old.Slept == v.Slept {
			continue
		}
		// A cell the LRU let go and made again starts from zero.
		if v.Waits < old.Waits || v.Wakes < old.Wakes {
			old, had = sysrayFtxVal{WaitStack: -1, WakeStack: -1}, false
		}
		if !had {
			old.WaitStack, old.WakeStack = -1, -1
		}
		r.last[k] = v
		e := event.Event{Kind: event.KindFutex, Time: at, PID: k.Pid, TID: k.Tid, Cgroup: v.Cgroup}
		e.Futex = event.Futex{
			Addr:     k.Uaddr,
			Waits:    v.Waits - old.Waits,
			Slept:    v.Slept - old.Slept,
			Woken:    v.Woken - old.Woken,
			Timeouts: v.Timeouts - old.Timeouts,
			Again:    v.Again - old.Again,
			ByProc:   v.ByProc - old.ByProc,
			WaitNS:   v.WaitNs - old.WaitNs,
			MaxNS:    v.MaxNs,
			Wakes:    v.Wakes - old.Wakes,
			Woke:     v.Woke - old.Woke,
			WokeOne:  v.WokeOne - old.WokeOne,
			WakerTID: v.WakerTid,
		}
		// A stack goes with the first event after the kernel took it.
		if v.WaitStack >= 0 && old.WaitStack < 0 {
			e.Futex.WaitStack = stackFrames(v.WaitStack, p.stack)
		}
		if v.WakeStack >= 0 && old.WakeStack < 0 {
			e.Futex.WakeStack = stackFrames(v.WakeStack, p.stack)
		}
		emit(e)
	}
	if len(seen) < len(r.last) {
		for k := range r.last {
			if !seen[k] {
				delete(r.last, k) // let go by the LRU
			}
		}
	}
}
