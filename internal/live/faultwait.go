package live

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/proc"
)

// fwFacts adds to fault-wait windows what only the host knows, while the
// process still runs: the file mapped at each fault address, and the
// memory cgroup whose limit the thread lives under. A capture keeps them,
// so the doctor reads a recording as it reads the host.
type fwFacts struct {
	maps map[uint32]*pidMaps
	mem  map[uint32]*pidMem
}

type pidMaps struct {
	read time.Time
	m    []event.Mapping
}

type pidMem struct {
	read time.Time
	f    event.MemFacts
}

// How often one process's maps and memory cgroup are read again: a
// thrashing reader sends four windows a second per thread, and its
// mappings and limit seldom change; the refault counters it carries are
// then at most this stale.
const fwReread = 200 * time.Millisecond

func newFwFacts() *fwFacts {
	return &fwFacts{maps: map[uint32]*pidMaps{}, mem: map[uint32]*pidMem{}}
}

func (f *fwFacts) decorate(e *event.Event) {
	switch e.Kind {
	case event.KindExit:
		if e.Proc.GroupDead {
			delete(f.maps, e.PID)
			delete(f.mem, e.PID)
		}
		return
	case event.KindFaultWait:
	default:
		return
	}
	now := time.Now()
	w := &e.FaultWait
	pm := f.maps[e.PID]
	for i := range w.Places {
		pl := &w.Places[i]
		if pl.Addr == 0 {
			continue
		}
		m, ok := findMapping(pm, pl.Addr)
		if !ok && (pm == nil || now.Sub(pm.read) >= fwReread) {
			if got, err := readMaps(e.PID); err == nil {
				pm = &pidMaps{read: now, m: got}
				f.maps[e.PID] = pm
			}
			m, ok = findMapping(pm, pl.Addr)
		}
		if ok {
			pl.Map = m
		}
	}
	mm := f.mem[e.PID]
	if mm == nil || now.Sub(mm.read) >= fwReread {
		// A process on its way out reads as in no cgroup: it left none.
		if facts, ok := readMemFacts(e.PID); mm == nil || ok && (!facts.Host || mm.f.Host) {
			mm = &pidMem{read: now, f: facts}
			f.mem[e.PID] = mm
		}
	}
	w.Mem = mm.f
}

func findMapping(pm *pidMaps, addr uint64) (event.Mapping, bool) {
	if pm == nil {
		return event.Mapping{}, false
	}
	for _, m := range pm.m {
		if addr >= m.Start && addr < m.End {
			return m, true
		}
	}
	return event.Mapping{}, false
}

// readMaps parses /proc/PID/maps.
func readMaps(pid uint32) ([]event.Mapping, error) {
	b, err := os.ReadFile(filepath.Join(proc.Root, strconv.Itoa(int(pid)), "maps"))
	if err != nil {
		return nil, err
	}
	return parseMaps(b), nil
}

func parseMaps(b []byte) []event.Mapping {
	var out []event.Mapping
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// "start-end perms offset dev inode path"
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		var m event.Mapping
		m.Start, _ = strconv.ParseUint(lo, 16, 64)
		m.End, _ = strconv.ParseUint(hi, 16, 64)
		m.Offset, _ = strconv.ParseUint(f[2], 16, 64)
		m.Inode, _ = strconv.ParseUint(f[4], 10, 64)
		if len(f) > 5 {
			m.Path = strings.Join(f[5:], " ")
		}
		out = append(out, m)
	}
	return out
}

// readMemFacts reads the memory cgroup that limits pid: its own, or the
// nearest ancestor with a limit (their counters count their descendants),
// else the host's counters. Cgroup v1's memory controller, where mounted,
// is the one the kernel enforces; else v2's.
func readMemFacts(pid uint32) (event.MemFacts, bool) {
	var mf event.MemFacts
	b, err := os.ReadFile(filepath.Join(proc.Root, strconv.Itoa(int(pid)), "cgroup"))
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
	case v2 != "" && proc.CgroupV2Mount() != "":
		l = layout{proc.CgroupV2Mount(), v2, "memory.max", "memory.high", "memory.current",
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
		if st, err := os.ReadFile(filepath.Join(p, "memory.stat")); err == nil {
			mf.RefaultFile = statValue(st, l.refFile)
			mf.RefaultAnon = statValue(st, l.refAnon)
			return mf, true
		}
	}
	mf.Cgroup, mf.Host, mf.Max, mf.High = l.cg, true, event.NoLimit, event.NoLimit
	if st, err := os.ReadFile(filepath.Join(proc.Root, "vmstat")); err == nil {
		mf.RefaultFile = statValue(st, "workingset_refault_file")
		mf.RefaultAnon = statValue(st, "workingset_refault_anon")
	}
	return mf, true
}

// readLimit reads a memory.* file in bytes; "max" is NoLimit, 0 unknown.
func readLimit(p string) uint64 {
	b, err := os.ReadFile(p)
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

// statValue reads one "name value" line of memory.stat or vmstat.
func statValue(b []byte, name string) uint64 {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, _ := strconv.ParseUint(v, 10, 64)
			return n
		}
	}
	return 0
}
