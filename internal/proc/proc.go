package proc

// Info is what sysray knows about one process (thread group).
type Info struct {
	PID     uint32
	PPID    uint32
	Comm    string
	Exe     string   // readlink /proc/PID/exe, may be empty
	Cmdline []string // argv
	Cgroup  uint64   // cgroup v2 id (inode of the cgroup directory), 0 if unknown
	Start   uint64   // start time, ns since boot (CLOCK_MONOTONIC-ish from /proc/PID/stat)
	Threads []uint32 // tids at snapshot time
}
