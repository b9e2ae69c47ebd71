package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/units"
)

// The finding it reports. "Page cache" rather than "memory": what thrashes
// is a file's cached pages, which the kernel evicts and reads back from
// the file, not anonymous memory (that is swapping, another finding).
const PageCacheThrash ID = "page-cache-thrash"

func init() {
	register(registration{ids: []ID{PageCacheThrash},
		build: func(h *Host) Detector { return newThrash(h) }})
}

// thrashRefaultMin: pages of the cgroup's files the kernel read back in
// soon after evicting them (workingset_refault_file) during the trace.
// A cold read refaults nothing: each page is read once. Any working set
// larger than the limit, read again, refaults every page it re-reads
// (96 MiB over 32 MiB: 16,000 pages a pass). 256 pages (1 MiB) is above
// what the rest of a cgroup's life (a library paged back in, a log file
// reread) adds in seconds, and below one pass over any file worth a
// warning.
const thrashRefaultMin = 256

// Frames of a fault that waits for a file's page: filemap_fault reads the
// page or waits for the read in flight (folio_wait_bit_common under it);
// do_read_fault and __do_fault are its callers for file mappings.
var fileFaultFrames = []string{"filemap_fault", "__do_fault", "do_read_fault", "do_sync_mmap_readahead",
	"do_async_mmap_readahead", "filemap_map_pages"}

// Frames of a fault that is not a file page's: swap-in of anonymous memory
// (no swap here, but the finding must not claim it), shared memory (a
// tmpfs or memfd page is memory, not cache), and the mmap lock
// (mmap-lock-contention's).
var notFileFaultFrames = []string{"do_swap_page", "swap_read_folio", "swapin_readahead", "shmem_fault",
	"shmem_get_folio_gfp", "rwsem_down_read_slowpath", "rwsem_down_write_slowpath", "lock_mm_and_find_vma"}

// Frames of memory reclaim, which a fault runs to make room for its page.
var reclaimFrames = []string{"try_to_free_mem_cgroup_pages", "do_try_to_free_pages", "shrink_node", "shrink_lruvec"}

// Frames that say a sleep outside syscalls was in a page fault.
var faultEntryFrames = []string{"asm_exc_page_fault", "exc_page_fault", "do_user_addr_fault", "handle_mm_fault"}

type thrashFile struct {
	path  string
	size  uint64 // the largest mapping of it seen, bytes
	ns    uint64
	count uint64
}

type thrashProc struct {
	pid          uint32
	comm         string
	fileNS       uint64 // asleep in faults on file pages
	fileCount    uint64
	otherNS      uint64 // asleep outside syscalls elsewhere (anon, the mmap lock, memory.high)
	majflt       uint64
	minflt       uint64
	reclaimNS    uint64 // memory-cgroup reclaim outside syscalls (inside faults)
	reclaimPages uint64
	files        map[string]*thrashFile
	stack        []string // the longest place's frames, for the evidence
	stackNS      uint64
	// The memory cgroup's facts as first and last read for the process:
	// the refault counter is cumulative.
	first, last event.MemFacts
}

type thrash struct {
	procs map[uint32]*thrashProc
}

func newThrash(*Host) *thrash { return &thrash{procs: map[uint32]*thrashProc{}} }

func (t *thrash) proc(pid uint32, comm string) *thrashProc {
	p := t.procs[pid]
	if p == nil {
		p = &thrashProc{pid: pid, comm: comm, files: map[string]*thrashFile{}}
		t.procs[pid] = p
	}
	return p
}

func (t *thrash) Observe(e *event.Event) {
	switch e.Kind {
	case event.KindReclaim:
		// Outside a syscall, reclaim is a fault's charge for the page it
		// brings in: at the limit, every new page evicts an old one first.
		if e.Reclaim.Nr < 0 {
			if p := t.procs[e.PID]; p != nil {
				p.reclaimNS += e.Reclaim.Duration
				p.reclaimPages += e.Reclaim.Pages
			} else {
				p := t.proc(e.PID, e.Comm)
				p.reclaimNS += e.Reclaim.Duration
				p.reclaimPages += e.Reclaim.Pages
			}
		}
	case event.KindFaultWait:
		w := &e.FaultWait
		p := t.proc(e.PID, e.Comm)
		p.comm = e.Comm
		p.majflt += w.MajFaults
		p.minflt += w.MinFaults
		var placed uint64
		for i := range w.Places {
			pl := &w.Places[i]
			placed += pl.Duration
			// Reclaim inside the fault is counted by its own events
			// (reclaimNS), sleeps and all.
			if !fileFault(pl) || hasFrame(pl.Stack, reclaimFrames) {
				p.otherNS += pl.Duration
				continue
			}
			p.fileNS += pl.Duration
			p.fileCount += uint64(pl.Count)
			f := p.files[pl.Map.Path]
			if f == nil {
				f = &thrashFile{path: pl.Map.Path}
				p.files[pl.Map.Path] = f
			}
			f.size = max(f.size, pl.Map.Size())
			f.ns += pl.Duration
			f.count += uint64(pl.Count)
			if pl.Duration > p.stackNS {
				p.stackNS, p.stack = pl.Duration, ownFrames(pl.Stack)
			}
		}
		// Time at places the kernel had no slot for is not known to be a
		// file's: counted elsewhere.
		if w.Duration > placed {
			p.otherNS += w.Duration - placed
		}
		// A process on its way out reads as in no cgroup (an older
		// writer's capture): the cgroup it lived in is the one that counts.
		if w.Mem.Read && !(w.Mem.Host && p.last.Read && !p.last.Host) {
			if !p.first.Read || p.first.Cgroup != w.Mem.Cgroup || p.first.Host != w.Mem.Host {
				p.first = w.Mem
			}
			p.last = w.Mem
		}
	}
}

// fileFault says a place is a fault waiting for a file's page: the fault
// handler's file path on the stack, or, with no names (a capture without
// them), a fault address in a file mapping.
func fileFault(pl *event.FaultPlace) bool {
	if named(pl.Stack) {
		if hasFrame(pl.Stack, notFileFaultFrames) {
			return false
		}
		return hasFrame(pl.Stack, fileFaultFrames) && hasFrame(pl.Stack, faultEntryFrames)
	}
	return pl.Map.Path != "" && pl.Map.Inode != 0 && !strings.HasPrefix(pl.Map.Path, "/memfd:") &&
		!strings.HasPrefix(pl.Map.Path, "/dev/shm/")
}

// ownFrames are a stack's function names without the scheduler's and the
// tracer's frames.
func ownFrames(st []event.Frame) []string {
	var out []string
	for _, f := range st {
		fn := funcOf(f.Name)
		if fn == "" || contains(schedFrames, fn) || tracingFrame(fn) || fn == "__schedule" {
			continue
		}
		out = append(out, fn)
	}
	return out
}

// thrashGroup is the processes that fault on one file under one memory
// cgroup: they share its cache, and the limit.
type thrashGroup struct {
	file           *thrashFile
	cgroup         string
	host           bool
	procs          map[uint32]string
	ns, count      uint64
	reclaimNS      uint64
	majflt, minflt uint64
	refaults       uint64
	first, last    event.MemFacts
	stack          []string
	stackNS        uint64
}

func (t *thrash) Findings(env *Env) []Finding {
	threadNS, _ := env.threadTime()
	groups := map[string]*thrashGroup{}
	for _, p := range t.procs {
		if p.fileNS == 0 {
			continue
		}
		// The file the process waited for most.
		var f *thrashFile
		for _, x := range p.files {
			if f == nil || x.ns > f.ns || x.ns == f.ns && x.path < f.path {
				f = x
			}
		}
		k := keyOf(p.last.Cgroup, f.path)
		g := groups[k]
		if g == nil {
			g = &thrashGroup{file: &thrashFile{path: f.path}, cgroup: p.last.Cgroup, host: !p.last.Read || p.last.Host,
				procs: map[uint32]string{}, first: p.first, last: p.last}
			groups[k] = g
		}
		g.procs[p.pid] = p.comm
		g.file.size = max(g.file.size, f.size)
		g.ns += p.fileNS
		g.count += p.fileCount
		g.reclaimNS += p.reclaimNS
		g.majflt += p.majflt
		g.minflt += p.minflt
		if p.stackNS > g.stackNS {
			g.stackNS, g.stack = p.stackNS, p.stack
		}
		// One cgroup's counter, read by each process: the widest span.
		if p.first.Read && p.first.RefaultFile < g.first.RefaultFile {
			g.first = p.first
		}
		if p.last.RefaultFile > g.last.RefaultFile {
			g.last = p.last
		}
	}
	var out []Finding
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		g := groups[k]
		lost := g.ns + g.reclaimNS
		var share float64
		var threads uint64
		for pid := range g.procs {
			threads += threadNS[pid]
		}
		if threads > 0 {
			share = float64(lost) / float64(threads)
		}
		// The kernel folds its per-CPU counts into memory.stat every 2 s or
		// so: in a short trace the last read may not have moved yet. Live,
		// a read now, once the trace is over, is the freshest.
		if !g.host && env.Host.canRead() {
			if n, ok := thrashRefaultsNow(g.cgroup); ok && n > g.last.RefaultFile {
				g.last.RefaultFile = n
			}
		}
		if g.first.Read && g.last.RefaultFile >= g.first.RefaultFile {
			g.refaults = g.last.RefaultFile - g.first.RefaultFile
		}
		limited := !g.host && g.last.Read
		sev := Info
		if limited && g.refaults >= thrashRefaultMin && share >= warnShare && lost >= warnWaitNS {
			sev = Warning
		} else if lost < warnWaitNS {
			continue // a few faults' wait: felt by no one
		}
		out = append(out, thrashFinding(env, g, sev, lost, share))
	}
	return out
}

func thrashFinding(env *Env, g *thrashGroup, sev Severity, lost uint64, share float64) Finding {
	var procs []string
	for pid, comm := range g.procs {
		procs = append(procs, env.ProcName(pid, comm))
	}
	sort.Strings(procs)
	who := strings.Join(procs, ", ")
	if len(procs) > 1 {
		who = fmt.Sprintf("%d processes (%s)", len(procs), who)
	}
	file := g.file.path
	if file == "" {
		file = "a file (its name was not read)"
	}
	limit, limitName := uint64(0), ""
	if m := &g.last; m.Read && !m.Host {
		switch {
		case m.Max != 0 && m.Max != event.NoLimit:
			limit, limitName = m.Max, "memory.max"
			if m.High == 0 {
				limitName = "memory.limit_in_bytes" // cgroup v1
			}
		case m.High != 0 && m.High != event.NoLimit:
			limit, limitName = m.High, "memory.high"
		}
	}
	where := "the host"
	if !g.host {
		where = "memory cgroup " + g.cgroup
	}
	ev := map[string]any{"processes": procs, "file": g.file.path, "mapping_bytes": g.file.size,
		"fault_sleep_ns": g.ns, "fault_sleeps": g.count, "reclaim_in_faults_ns": g.reclaimNS,
		"time_lost_ns": lost, "share_of_thread_time": share,
		"major_faults": g.majflt, "minor_faults": g.minflt,
		"major_faults_are": "counted by the kernel per thread, from each thread's first sleep in a fault sysray saw",
		"refaulted_pages":  g.refaults, "refaulted_pages_are": "workingset_refault_file of " + where + " between the first and last reads during the trace (at least what happened in it)",
		"cgroup": g.cgroup, "stack": g.stack}
	if limit > 0 {
		ev["limit_bytes"], ev["limit_file"] = limit, limitName
		ev["memory_current_bytes"] = g.last.Current
	}
	size := thrashBytes(g.file.size)
	var title, summary string
	faults := fmt.Sprintf("%s asleep in %d page faults on it, and %s reclaiming memory inside faults: %s in all, %.0f%% of the threads' time",
		units.Duration(g.ns), g.count, units.Duration(g.reclaimNS), units.Duration(lost), 100*share)
	switch {
	case sev == Warning:
		title = fmt.Sprintf("%s read %s from disk again and again: its %s mapping does not fit the %s limit of %s (%s lost in page faults)",
			who, file, size, thrashBytes(limit), where, units.Duration(lost))
		summary = fmt.Sprintf("%s maps %s (%s) and reads it pass after pass, but %s holds at most %s (%s; %s in use at the last read). "+
			"Each new page the reader faults in makes the kernel evict an older one, and with a working set larger than the limit the page "+
			"evicted is the one a later pass needs: the kernel read %d pages of the cgroup's files back in soon after evicting them "+
			"(workingset_refault_file) while sysray watched. So the file is read from disk on every pass instead of from memory: %s. "+
			"The kernel counted %d major faults (a fault that read the page itself) and %d minor ones; read-ahead brings most pages "+
			"in before they are touched, so many waits are minor faults waiting for a read in flight. Where they slept: %s.",
			who, file, size, where, thrashBytes(limit), limitName, thrashBytes(g.last.Current), g.refaults, faults,
			g.majflt, g.minflt, strings.Join(firstN(g.stack, 6), " ← "))
	case g.refaults < thrashRefaultMin && !g.host:
		title = fmt.Sprintf("%s waited %s in page faults reading %s (a first read: nothing was read twice)", who, units.Duration(lost), file)
		summary = fmt.Sprintf("%s faulted %s (%s) in from disk: %s. The kernel read back %d evicted pages of %s while sysray watched, "+
			"fewer than %d: the pages were read for the first time (a cold start, a single pass), not evicted and read again. "+
			"page-cache-thrash warns when they are.", who, file, size, faults, g.refaults, where, thrashRefaultMin)
	default:
		title = fmt.Sprintf("%s waited %s in page faults reading %s", who, units.Duration(lost), file)
		summary = fmt.Sprintf("%s faulted %s (%s) in from disk: %s. The kernel read back %d evicted file pages on %s while sysray watched. "+
			"page-cache-thrash warns only when the processes live under a memory cgroup limit, their refaults are counted apart from the "+
			"rest of the host's, and the faults take at least a quarter of their time.", who, file, size, faults, g.refaults, where)
	}
	fix := fmt.Sprintf("Give %s room for the file: raise %s to more than the working set (%s here, plus the process's own memory), or "+
		"read less of it at a time: process the file in pieces that fit and munmap (or madvise(MADV_DONTNEED)) each before the next; "+
		"for one sequential pass, madvise(MADV_SEQUENTIAL) reads ahead harder and drops pages behind; data read once and not kept "+
		"can bypass the cache with O_DIRECT, or be dropped after use with posix_fadvise(POSIX_FADV_DONTNEED).",
		where, nonEmpty(limitName, "the memory limit"), size)
	return Finding{
		ID:       PageCacheThrash,
		Key:      keyOf(g.cgroup, g.file.path),
		Procs:    env.refs(pidsOf(g.procs)...),
		Severity: sev,
		Title:    title,
		Summary:  summary,
		Evidence: ev,
		Fix:      fix,
		Score:    float64(lost),
	}
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func nonEmpty(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// thrashBytes says a size in MiB (KiB below one), as limits are set.
func thrashBytes(n uint64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// thrashRefaultsNow reads a memory cgroup's file refault counter: cgroup
// v1's memory controller where the cgroup is there, else v2's.
func thrashRefaultsNow(cg string) (uint64, bool) {
	for _, c := range []struct{ file, key string }{
		{filepath.Join("/sys/fs/cgroup/memory", cg, "memory.stat"), "total_workingset_refault_file "},
		{filepath.Join("/sys/fs/cgroup", cg, "memory.stat"), "workingset_refault_file "},
		{filepath.Join("/sys/fs/cgroup/unified", cg, "memory.stat"), "workingset_refault_file "},
	} {
		b, err := os.ReadFile(c.file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, c.key); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}
