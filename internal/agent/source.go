package agent

import (
	"time"

	"github.com/sysray/sysray/internal/stat"
)

// Snapshot is one read of a Source: counts accumulated since generation
// Gen began. A Source starts a new generation whenever its counters start
// again from zero (a probe reloaded, a new sampling window): the Aggregator
// then forgets the previous values instead of reading the drop as a reset
// of each cell.
type Snapshot struct {
	Gen uint64
	// Final marks the last read of its generation: counts cannot wait for
	// a later read to be named, they are folded as named now.
	Final bool
	Cells []stat.Cell
	Procs map[uint32]ProcCounts
	// Lost counts syscalls the kernel could not count: its table of
	// (process, cgroup, syscall) cells was full, or a new cell found no
	// memory (a burst of new cells can outrun the kernel's allocator).
	Lost stat.Lost
	// RingDrops counts events lost because a ring buffer was full.
	RingDrops uint64
	// BPF is the run time of each of the probe's programs by name; nil
	// when the kernel does not keep it (kernel.bpf_stats_enabled is 0).
	BPF map[string]time.Duration
	// Reloads counts the probe's reloads since the agent started, and
	// Untraced the time they left the host untraced: from the old load's
	// last read to the new one's attach. Calls in it are not counted.
	Reloads  uint64
	Untraced time.Duration
	// InFlight counts the calls in flight across a reload's handover for
	// longer than its grace since the agent started: the old load saw
	// them enter and stopped before they ended, and the new one did not
	// see them enter. Counted by neither.
	InFlight uint64
	// Scale multiplies the growth of Cells: with the per-syscall programs
	// attached one period in Scale (duty cycling), the calls counted are
	// about one in Scale of those made. 0 or 1: exact.
	Scale uint64
}

// ProcCounts are one process's page faults and legacy vsyscall emulations.
type ProcCounts struct {
	Faults, Vsyscalls uint64
}

// Source is where the counts come from: the kernel's stat tables of an
// always-attached probe today; a duty-cycled probe or a replay later.
type Source interface {
	Read() (Snapshot, error)
}

// Labels name the container a count belongs to. Processes outside any
// container are Host; containers beyond the cap are Other.
type Labels struct {
	Container string `json:"container"`
	Pod       string `json:"pod,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// Names of the folded series.
var (
	Host  = Labels{Container: "host"}
	Other = Labels{Container: "other"}
)

// OtherSyscall names a container's syscalls beyond its cap.
const OtherSyscall = "other"

// Namer says which container a process in a cgroup belongs to. sure is
// false while the answer may still change: a container table learns new
// cgroups a few seconds after they appear, and until then calls them host.
type Namer func(pid uint32, cgroup uint64) (l Labels, sure bool)
