package probe

import (
	"bytes"
	"os"
	"strconv"
)

// fastPath says whether syscalls are taken without task storage
// (bpf/fast.h): nothing that needs a thread's storage (sleep stacks; in
// stat, samples or exact timing), or the doctor's calls until they switch
// out (fastDoctor). It must say what fast_path() in the kernel says.
func (c *Config) fastPath() bool {
	return !c.Stacks && (!c.Stat || (c.Budget > 0 && c.Sample == 0)) || c.fastDoctor()
}

// fastDoctor is fast_doctor() in the kernel: sampled stat with sleep
// stacks and budgeted timing, whose rows keep their threads' recent calls
// too.
func (c *Config) fastDoctor() bool {
	return c.Stat && c.Budget > 0 && c.Sample > 0 && c.Stacks
}

// Rows of the fast path's table: four for each thread the host has at
// start, so that two threads in a call at once rarely share a row (the
// second one's call then takes the slower task storage path; nothing is
// lost). A row is 640 bytes (fastRowLean): from 2.5 MiB to 10 MiB; the
// doctor's rows are 960, with their threads' recent calls: 3.75 to 15 MiB.
const (
	minFastRows = 4096
	maxFastRows = 16384
	fastRowLean = 640 // FAST_ROW_LEAN in bpf/state.h
)

// fastRows sizes the fast path's table from the thread count in
// /proc/loadavg, or takes the least when opens may stall (slowOpens) or
// the file says nothing.
func fastRows(slowOpens bool) uint32 {
	rows := uint32(minFastRows)
	if slowOpens {
		return rows
	}
	threads := loadavgThreads()
	for rows < maxFastRows && uint64(rows) < 4*threads {
		rows *= 2
	}
	return rows
}

// loadavgThreads is the fourth field's denominator in /proc/loadavg
// ("running/total" scheduling entities), or 0.
func loadavgThreads() uint64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 4 {
		return 0
	}
	_, total, ok := bytes.Cut(f[3], []byte("/"))
	if !ok {
		return 0
	}
	n, err := strconv.ParseUint(string(total), 10, 64)
	if err != nil {
		return 0
	}
	return n
}
