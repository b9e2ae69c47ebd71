package stat

import "fmt"

// Lost is how many calls the kernel's count table had no cell for, by why.
// The two have different cures: a full table wants a narrower selection
// (or processes let go sooner); a want of memory comes with a burst of new
// processes, each needing new cells faster than the kernel's per-CPU
// allocator refills, and passes with the burst.
type Lost struct {
	Full  uint64 // the table held as many cells as it may
	NoMem uint64 // no memory for a new cell, and the spill was full too
}

// Total is every call lost.
func (l Lost) Total() uint64 { return l.Full + l.NoMem }

// Why says in words why calls were lost, for a warning.
func (l Lost) Why() string {
	switch {
	case l.NoMem == 0:
		return "the kernel's table of (process, syscall) cells was full"
	case l.Full == 0:
		return "new processes needed cells faster than the kernel could allocate them"
	default:
		return fmt.Sprintf("%d because the kernel's table of (process, syscall) cells was full, "+
			"%d because new processes needed cells faster than the kernel could allocate them", l.Full, l.NoMem)
	}
}
