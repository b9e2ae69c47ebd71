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
		if facts, ok := readMemFacts(e.PID); ok || mm == nil {
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
// nearest ancestor with a memory.max or memory.high (their memory.stat
// counts their descendants), else the host's counters.
func readMemFacts(pid uint32) (event.MemFacts, bool) {
	var mf event.MemFacts
	b, err := os.ReadFile(filepath.Join(proc.Root, strconv.Itoa(int(pid)), "cgroup"))
	if err != nil {
		return mf, false
	}
	cg := ""
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			cg = p
		}
	}
	root := proc.CgroupV2Mount()
	if cg == "" || root == "" {
		return mf, false
	}
	mf.Read = true
	for dir := path.Clean(cg); dir != "/" && dir != "."; dir = path.Dir(dir) {
		p := filepath.Join(root, dir)
		max, high := readLimit(filepath.Join(p, "memory.max")), readLimit(filepath.Join(p, "memory.high"))
		if (max == 0 || max == event.NoLimit) && (high == 0 || high == event.NoLimit) {
			continue
		}
		mf.Cgroup, mf.Max, mf.High = dir, max, high
		mf.Current = readLimit(filepath.Join(p, "memory.current"))
		if st, err := os.ReadFile(filepath.Join(p, "memory.stat")); err == nil {
			mf.RefaultFile, mf.RefaultAnon = refaults(st)
			return mf, true
		}
	}
	mf.Cgroup, mf.Host, mf.Max, mf.High = cg, true, event.NoLimit, event.NoLimit
	if st, err := os.ReadFile(filepath.Join(proc.Root, "vmstat")); err == nil {
		mf.RefaultFile, mf.RefaultAnon = refaults(st)
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
	return n
}

// refaults reads the workingset refault counters of memory.stat or vmstat
// (both say "name value").
func refaults(b []byte) (file, anon uint64) {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "workingset_refault_file "); ok {
			file, _ = strconv.ParseUint(v, 10, 64)
		} else if v, ok := strings.CutPrefix(line, "workingset_refault_anon "); ok {
			anon, _ = strconv.ParseUint(v, 10, 64)
		}
	}
	return file, anon
}
