package export

import (
	"time"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/proc"
)

// Source is a capture to export.
type Source struct {
	Arch     event.Arch
	BootTime int64       // Unix ns of CLOCK_MONOTONIC zero, from the capture header
	Procs    []proc.Info // the process table when the capture began
	// Container names the container a process runs in, "" for none. It is
	// asked during the first pass, right after Events has handed over the
	// process's first event and each of its execs, so a table that learns
	// containers from exec events knows them by then. May be nil.
	Container func(pid uint32, cgroup uint64) string
	// Events calls fn for every event of the capture, from the first, each
	// time it is called (once per pass).
	Events func(fn func(*event.Event) error) error
}

// Options tune an export.
type Options struct {
	// RateBucket is the width of the buckets the per-process syscall rate
	// is counted in; 0 means DefaultRateBucket.
	RateBucket time.Duration
}

// DefaultRateBucket is fine enough to show bursts a person would look for
// in a timeline and coarse enough to keep the counter tracks small.
const DefaultRateBucket = 10 * time.Millisecond

// TrackKind says what a track holds.
type TrackKind uint8

const (
	TrackProcess TrackKind = iota + 1 // a process: the parent of its threads and counter
	TrackThread                       // a thread's syscalls and instants
	TrackLane                         // a thread's calls that overlap its others (child of the thread)
	TrackCounter                      // a process's syscall rate (child of the process)
	TrackGlobal                       // what belongs to no thread: events the kernel lost
)

// Track is one row of the timeline.
type Track struct {
	UUID    uint64 // unique, non-zero
	Parent  uint64 // UUID of the parent track, 0 for a root
	Kind    TrackKind
	PID     uint32
	TID     uint32 // threads and lanes
	Name    string // process, thread, lane or counter name
	Labels  []string
	Cmdline []string // processes
	Lane    int      // lanes: 1, 2, ...
	Unit    string   // counters
}

// ItemKind says what an Item is.
type ItemKind uint8

const (
	Slice   ItemKind = iota + 1 // Time to Time+Dur
	Instant                     // at Time
	Counter                     // Value from Time on
)

// ArgKind says which field of an Arg holds its value.
type ArgKind uint8

const (
	ArgString ArgKind = iota + 1
	ArgInt
	ArgUint
	ArgBool
)

// Arg is one named value attached to an item.
type Arg struct {
	Name string
	Kind ArgKind
	Str  string
	Int  int64
	Uint uint64
	Bool bool
}

// Item is one thing on a track. A Sink must not keep an Item or its slices
// past the call that hands it over: they are reused.
type Item struct {
	Kind  ItemKind
	Track *Track
	Time  uint64 // ns on CLOCK_MONOTONIC
	Dur   uint64 // slices
	Cat   string
	Name  string
	Args  []Arg
	Value int64 // counters
	// FlowOut are flows that leave this item for a later one; FlowIn are
	// flows that arrive here. An id appears in exactly one FlowOut and at
	// most one FlowIn, and the item it leaves begins before the item it
	// arrives at ends.
	FlowOut []uint64
	FlowIn  []uint64
}

// Header is what a Sink learns before the items.
type Header struct {
	BootTime    int64  // Unix ns of CLOCK_MONOTONIC zero
	First, Last uint64 // times of the first and last event, ns
	RateBucket  uint64 // ns
}

// Sink writes a timeline in some file format.
type Sink interface {
	// Begin receives every track, parents before their children.
	Begin(h Header, tracks []*Track) error
	Item(it *Item) error
	End() error
}

// Stats counts what an export wrote.
type Stats struct {
	Processes, Threads, Lanes int
	Slices                    int // one per syscall; a zero-length call is an instant, but counts here
	Instants                  int // faults, signals, fork, exec, exit, vsyscalls, drops
	Counters                  int // counter values
	WakeFlows, SignalFlows    int
}
