package live

import (
	"bufio"
	"bytes"
	"os"
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

// readMemFacts reads the memory cgroup that limits pid (proc.ReadMemFacts).
func readMemFacts(pid uint32) (event.MemFacts, bool) { return proc.ReadMemFacts(pid) }

func statValue(b []byte, name string) uint64 { return proc.StatValue(b, name) }
