package stat

import "time"

// Source is the kernel's count table as a loaded probe holds it
// (probe.Probe): read whole, and cells deleted once read.
type Source interface {
	Stats() ([]Cell, Lost, error)
	ForgetCells([]Cell) ([]Cell, error)
}

// Drain is the one loop that reads the kernel's count table again and
// again, as stat, top, the live doctor and the agent do, and lets the
// cells of processes that ended leave it (Ended): the table then holds the
// living however long the run. Its reader says which processes ended
// (End, from exit events whose thread group died).
type Drain struct {
	ended *Ended
	keep  bool
	clock func() uint64
}

// NewDrain returns a drain. Cells go settle ns after their process's
// end (Settle, unless the reader holds cells longer, as the agent does
// while it names containers). With keep, their counts are kept for the
// run's totals (Totals); without, they are dropped once read, for readers
// that want only each interval's counts (top, the agent). clock is
// CLOCK_MONOTONIC in ns, the clock of exit events.
func NewDrain(settle uint64, keep bool, clock func() uint64) *Drain {
	return &Drain{ended: NewEnded(settle), keep: keep, clock: clock}
}

// End notes that process pid ended, seen at at (the exit event's time or
// the clock when it arrived).
func (d *Drain) End(pid uint32, at uint64) { d.ended.End(pid, at) }

// Read is one read of the table.
type Read struct {
	Cells []Cell // as the kernel held them
	Lost  Lost
	// Gone are those of Cells the kernel let go after the read: a later
	// call under one of their keys counts from zero in a new cell.
	Gone []Cell
	// Ended are the processes whose end came due with this read, with
	// cells or without (a process seen only by its page faults).
	Ended map[uint32]bool
	At    uint64 // when the read began (clock)
}

// Alive notes that pid runs again (its number reused) before its end came
// due: its cells are a living process's.
func (d *Drain) Alive(pid uint32) { d.ended.Alive(pid) }

// Read reads t once and lets the cells of processes that ended at least
// the settle time before the read began go (Ended.Due says why then). A
// cell whose delete failed stays in the kernel, read again as any; Gone
// holds what went.
func (d *Drain) Read(t Source) (Read, error) {
	r := Read{At: d.clock()}
	var err error
	r.Cells, r.Lost, err = t.Stats()
	if err != nil {
		return r, err
	}
	var due []Cell
	due, r.Ended = d.ended.Due(r.Cells, r.At)
	if len(due) > 0 {
		r.Gone, _ = t.ForgetCells(due)
		if d.keep {
			// What went is kept even on an error: the cells it names
			// are no longer in the kernel.
			d.ended.Keep(r.Gone)
		}
	}
	return r, nil
}

// Run reads t at once and then every every until stop closes,
// handing each read to fn (nil: none). It closes done, if not nil, when
// it returns.
func (d *Drain) Run(t Source, every time.Duration, stop <-chan struct{}, done chan<- struct{}, fn func(Read)) {
	if done != nil {
		defer close(done)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if r, err := d.Read(t); err == nil && fn != nil {
			fn(r)
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// Last reads t a last time, letting nothing go, and returns the
// read with the run's whole counts: the kernel's cells with the kept
// counts of those that went (keep).
func (d *Drain) Last(t Source) (r Read, whole []Cell, err error) {
	r.At = d.clock()
	if r.Cells, r.Lost, err = t.Stats(); err != nil {
		return r, nil, err
	}
	return r, d.ended.Merge(r.Cells), nil
}
