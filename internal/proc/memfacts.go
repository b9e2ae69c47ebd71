package proc

import (
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/event"
)

// ReadMemFacts reads the memory cgroup that limits pid: its own, or the
// nearest ancestor with a limit (their counters count their descendants),
// else the host's counters. Cgroup v1's memory controller, where mounted,
// is the one the kernel enforces; else v2's.
func ReadMemFacts(pid uint32) (event.MemFacts, bool) {
	var mf event.MemFacts
	b, err := ReadFile(filepath.Join(Root, strconv.Itoa(int(pid)), "cgroup"))
	if err != nil {
		return mf, false
	}
	var v1, v2 string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			v2 = f[2]
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == "memory" {
				v1 = f[2]
			}
		}
	}
	type layout struct{ root, cg, max, high, current, refFile, refAnon string }
	var l layout
	switch {
	case v1 != "":
		l = layout{"/sys/fs/cgroup/memory", v1, "memory.limit_in_bytes", "", "memory.usage_in_bytes",
			"total_workingset_refault_file", "total_workingset_refault_anon"}
	case v2 != "" && CgroupV2Mount() != "":
		l = layout{CgroupV2Mount(), v2, "memory.max", "memory.high", "memory.current",
			"workingset_refault_file", "workingset_refault_anon"}
	default:
		return mf, false
	}
	mf.Read = true
	for dir := path.Clean(l.cg); dir != "/" && dir != "."; dir = path.Dir(dir) {
		p := filepath.Join(l.root, dir)
		max, high := readLimit(filepath.Join(p, l.max)), uint64(event.NoLimit)
		if l.high != "" {
			high = readLimit(filepath.Join(p, l.high))
		}
		if (max == 0 || max == event.NoLimit) && (high == 0 || high == event.NoLimit) {
			continue
		}
		mf.Cgroup, mf.Max, mf.High = dir, max, high
		if l.high == "" {
			mf.High = 0 // cgroup v1 has none
		}
		mf.Current = readLimit(filepath.Join(p, l.current))
		if st, err := ReadFile(filepath.Join(p, "memory.stat")); err == nil {
			mf.RefaultFile = StatValue(st, l.refFile)
			mf.RefaultAnon = StatValue(st, l.refAnon)
			return mf, true
		}
	}
	mf.Cgroup, mf.Host, mf.Max, mf.High = l.cg, true, event.NoLimit, event.NoLimit
	if st, err := ReadFile(filepath.Join(Root, "vmstat")); err == nil {
		mf.RefaultFile = StatValue(st, "workingset_refault_file")
		mf.RefaultAnon = StatValue(st, "workingset_refault_anon")
	}
	return mf, true
}

// readLimit reads a memory.* file in bytes; "max" is NoLimit, 0 unknown.
func readLimit(p string) uint64 {
	b, err := ReadFile(p)
	if err != nil {
		return 0
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return event.NoLimit
	}
	n, _ := strconv.ParseUint(s, 10, 64)
	if n >= 1<<62 {
		return event.NoLimit // cgroup v1's "unlimited": the largest page multiple of a long
	}
	return n
}

// StatValue reads one "name value" line of memory.stat or vmstat.
func StatValue(b []byte, name string) uint64 {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, _ := strconv.ParseUint(v, 10, 64)
			return n
		}
	}
	return 0
}
