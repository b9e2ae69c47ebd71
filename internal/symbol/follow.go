package symbol

import "time"

// Follow snapshots the processes that pids lists, as they appear, until
// stop is closed, so that the user frames of processes that exit before
// their stacks are named still resolve. pids is asked every 200 ms.
func (r *Resolver) Follow(pids func() []uint32, stop <-chan struct{}) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	f := follower{}
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		f.round(pids(), time.Now, r.Snapshot)
	}
}

// follower is when each followed process was last read; the zero time
// once it has been read twice.
type follower map[uint32]time.Time

// round reads the processes due. A process maps its libraries early: one
// read when first seen, another a second later, catches nearly every code
// mapping. A second read that fails is tried again a second later.
func (f follower) round(pids []uint32, now func() time.Time, snapshot func(uint32) error) {
	for _, pid := range pids {
		at, ok := f[pid]
		if ok && (at.IsZero() || now().Sub(at) <= time.Second) {
			continue
		}
		if snapshot(pid) == nil && ok {
			f[pid] = time.Time{} // read twice: enough
		} else {
			f[pid] = now()
		}
	}
}
