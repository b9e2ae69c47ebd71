package htmlreport

import "github.com/sysray/sysray/internal/doctor"

// Data is everything the page shows, as the JSON its script reads. Times
// are ns; Timeline and Heatmap times are relative to Meta.First.
type Data struct {
	Meta       Meta             `json:"meta"`
	Findings   []doctor.Finding `json:"findings"`
	Near       []doctor.Near    `json:"near"` // the silent detectors' nearest misses
	Containers []Container      `json:"containers"`
	Heatmap    Heatmap          `json:"heatmap"`
	Timeline   Timeline         `json:"timeline"`
	Flame      Flames           `json:"flame"`
}

// Meta describes the capture.
type Meta struct {
	File         string            `json:"file"`
	Hostname     string            `json:"hostname"`
	Kernel       string            `json:"kernel"`
	Arch         string            `json:"arch"`
	VsyscallMode string            `json:"vsyscall_mode"`
	Command      []string          `json:"command"`
	Start        int64             `json:"start"` // Unix ns when recording began
	End          int64             `json:"end"`   // Unix ns when it ended; 0 if the file has no trailer
	BootTime     int64             `json:"boot_time"`
	First        uint64            `json:"first"` // CLOCK_MONOTONIC ns of the first event
	Span         uint64            `json:"span"`  // ns from the first event to the last one's end
	Events       uint64            `json:"events"`
	ByKind       map[string]uint64 `json:"by_kind"`
	Drops        uint64            `json:"drops"`         // events the kernel lost, per the trailer
	DropsPerCPU  []uint64          `json:"drops_per_cpu"` // the same, per CPU
	DropEvents   uint64            `json:"drop_events"`   // lost events reported in the stream
	Stacks       uint64            `json:"stacks"`        // syscalls carrying stacks
	Warning      string            `json:"warning,omitempty"`
	Facts        map[string]string `json:"facts"` // the header's host facts, except the container table
	Generated    int64             `json:"generated"`
	Version      string            `json:"version"`
}

// Stats are a group of syscalls' counts and latencies.
type Stats struct {
	Count  uint64            `json:"count"`
	Errors uint64            `json:"errors"`
	Time   uint64            `json:"time"` // ns in all
	P50    uint64            `json:"p50"`
	P99    uint64            `json:"p99"`
	Max    uint64            `json:"max"`
	Errnos map[string]uint64 `json:"errnos,omitempty"`
}

// SyscallRow is one syscall of one process.
type SyscallRow struct {
	Name string `json:"name"`
	Stats
}

// Process is one process and its syscalls.
type Process struct {
	PID      uint32       `json:"pid"` // 0 for the row that stands for the processes left out
	Comm     string       `json:"comm"`
	Cmd      string       `json:"cmd"`
	Threads  int          `json:"threads"`
	Syscalls []SyscallRow `json:"syscalls"`
	Stats
}

// Container is a container ("" for the host) and its processes.
type Container struct {
	Name    string    `json:"name"`
	Procs   []Process `json:"procs"`
	Omitted int       `json:"omitted"` // processes folded into the last row
	Stats
}

// Heatmap is syscall latency over time, binned: column = time, row =
// latency on a log scale (two rows per power of two).
type Heatmap struct {
	T0     uint64   `json:"t0"` // where column 0 starts
	BinNS  uint64   `json:"bin_ns"`
	Cols   int      `json:"cols"`
	RowNS  []uint64 `json:"row_ns"` // each row's lower bound; row 0 holds everything below RowNS[1]
	Series []Series `json:"series"`
	Others int      `json:"others"` // syscalls not shown on their own (they are in "all syscalls")
}

// Series is one syscall's bins, as flat (column, row, count) triples of
// the non-empty cells.
type Series struct {
	Name  string   `json:"name"`
	Count uint64   `json:"count"`
	Time  uint64   `json:"time"`
	Cells []uint64 `json:"cells"`
}

// Timeline is the most telling events of each thread.
type Timeline struct {
	Threads []Thread `json:"threads"`
	Items   []Item   `json:"items"`
	// What was there, by kind, and what of it is drawn.
	Total map[string]uint64 `json:"total"`
	Shown map[string]uint64 `json:"shown"`
	// The slowest syscalls are kept: every finished call at least this
	// slow is drawn (0: every call is).
	SlowFloor uint64 `json:"slow_floor"`
	// Threads left out (their items are not drawn).
	ThreadsOmitted int `json:"threads_omitted"`
}

// Thread is one lane of the timeline.
type Thread struct {
	TID  uint32 `json:"tid"`
	PID  uint32 `json:"pid"`
	Comm string `json:"comm"`
}

// Item is one thing drawn on a lane: Kind is syscall, fault, vsyscall,
// signal, exec or exit.
type Item struct {
	Lane  int    `json:"l"`
	T     uint64 `json:"t"`
	D     uint64 `json:"d,omitempty"`
	Kind  string `json:"k"`
	Err   bool   `json:"e,omitempty"`
	Open  bool   `json:"u,omitempty"` // a syscall cut off by its thread's exit or the capture's end
	Label string `json:"s"`
}

// Flames are the two flame graphs of time in syscalls.
type Flames struct {
	OnCPU  *Node `json:"on_cpu"`
	OffCPU *Node `json:"off_cpu"`
}

// Node is a frame of a flame graph: its name, its ns, and its callees.
// Callees too small to see are left out (their time stays in the parent).
type Node struct {
	Name  string `json:"n"`
	Value uint64 `json:"v"`
	// Bound is the part of Value that is an upper bound: on-CPU time of
	// calls whose sleeps were not recorded (faster than --slow).
	Bound    uint64  `json:"b,omitempty"`
	Children []*Node `json:"c,omitempty"`
}
