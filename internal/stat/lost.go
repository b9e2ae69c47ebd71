package stat

import "fmt"

// Lost is how many calls the kernel's count table had no cell for, by why.
// The two have different cures: a full table wants a narrower selection
// (or processes let go sooner); a want of memory comes with a burst of new
// processes, each needing new cells faster than the kernel's per-CPU
// allocator refills, and passes with the burst.
type Lost struct {
	Full  uint64 // the table held as many cells as it may
	NoMem uint64 // no memory for a new cell (the spill full too) or for a new thread's state
}

// Total is every call lost.
func (l Lost) Total() uint64 { return l.Full + l.NoMem }

// Why says in words why calls were lost, and what helps, for a warning.
// Cells of ended processes are let go, so a full table means that many
// (process, syscall) pairs lived at once: a narrower selection helps. A
// want of memory passes with the burst of new processes that made it.
func (l Lost) Why() string {
	const full = "the kernel's table of (process, syscall) cells was full: select fewer processes (-p, --cgroup, --container) or syscalls (-e)"
	const nomem = "a burst of new processes needed kernel memory (count cells, thread state) faster than the kernel could allocate it"
	switch {
	case l.NoMem == 0:
		return full
	case l.Full == 0:
		return nomem
	default:
		return fmt.Sprintf("%d because %s; %d because %s", l.Full, full, l.NoMem, nomem)
	}
}
