package doctor

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/stat"
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

// readFamily are the calls that copy a file's pages out of the page cache
// (filemap_read), reading them in first when they are not there: the same
// wait as a fault on a mapping of the file, reached through a syscall.
var readFamily = map[string]bool{"read": true, "pread64": true, "readv": true, "preadv": true, "preadv2": true}

// Frames of a read call's sleep that waits for a file's page: the generic
// page cache read, its read-ahead that submits the I/O, and the wait on the
// page's lock bit until the I/O completes. A sleep in memory-cgroup reclaim
// under them (memcgFrames) is counted by the kernel's reclaim timing
// instead, so it is not counted twice.
var readPageFrames = []string{"filemap_read", "filemap_get_pages", "filemap_readahead", "page_cache_sync_ra",
	"page_cache_async_ra", "page_cache_ra_order", "ondemand_readahead", "filemap_update_page"}

// thrashRereadShare: the part of what the readers had read from storage
// that the cgroup's refaults must make up. Re-reading a file larger than
// the limit, every page a pass after the first reads from disk is one the
// kernel evicted and counts as a refault (the read scenario, one process or
// four: 0.98); a first read of many files has none, and what else the
// cgroup refaults meanwhile (the reader's binary and libraries, pushed out
// by the scan) is a few percent of it (sha256sum over 20,000 files of /usr
// in 32 MiB, cold: 3%). Half is far from both.
const thrashRereadShare = 0.5

// thrashFactsEvery: how often (event time) a reading process's memory
// cgroup is read again once it has waited for file pages in read calls. The
// refault counter is cumulative, so only the first and the last read
// count; reading often keeps the last close to the process's end (the
// cgroup may be gone by the report), and 200 ms is what fault-wait
// windows are decorated at.
const thrashFactsEvery = 200_000_000

// thrashWatchEvery: how often a watch reads the memory cgroups of the
// processes that waited for file pages, live, on its own clock. Read only
// on events, the last read may trail a reader's end by more than a pass:
// on a fast device its waits thin out, and few events cross over to read
// again (the demo's refaults read 48% to 100% of the kernel's count, in
// runs of the same 8 passes). The cgroup is often removed as its command
// ends, before the report can read it. A pass of the demo's reader takes
// about 150 ms; at 100 ms the last read trails the end by less than one.
const thrashWatchEvery = 100 * time.Millisecond

// thrashReads is what the detector reads of the host, live: tests replace it.
type thrashReads interface {
	can() bool
	memFacts(pid uint32) (event.MemFacts, bool)
	fdPath(pid uint32, fd int32) string
	// openFiles lists the files the process holds open (/proc/PID/fd).
	openFiles(pid uint32) []string
	size(path string) uint64
	// diskRead is the bytes the process has had read from storage for it
	// (/proc/PID/io read_bytes: read-ahead and reads it caused, counted
	// when submitted).
	diskRead(pid uint32) (uint64, bool)
	// born says the memory cgroup was made after the trace began (Host.CgroupBorn).
	born(cgroup string) bool
	// refaults is the memory cgroup's workingset_refault_file now; false
	// when the cgroup is gone.
	refaults(cgroup string) (uint64, bool)
}

type liveThrashReads struct{ h *Host }

func (l liveThrashReads) can() bool { return l.h.canRead() }
func (l liveThrashReads) born(cg string) bool {
	return l.h.CgroupBorn != nil && l.h.CgroupBorn(cg)
}
func (liveThrashReads) refaults(cg string) (uint64, bool) { return thrashRefaultsNow(cg) }
func (liveThrashReads) memFacts(pid uint32) (event.MemFacts, bool) {
	return proc.ReadMemFacts(pid)
}
func (liveThrashReads) fdPath(pid uint32, fd int32) string {
	t, err := os.Readlink(fmt.Sprintf("%s/%d/fd/%d", proc.Root, pid, fd))
	if err != nil {
		return ""
	}
	return t
}
func (l liveThrashReads) openFiles(pid uint32) []string {
	ents, err := os.ReadDir(fmt.Sprintf("%s/%d/fd", proc.Root, pid))
	if err != nil {
		return nil
	}
	var out []string
	for i, e := range ents {
		if i == 256 {
			break // a reader of one file holds a few
		}
		if fd, err := strconv.Atoi(e.Name()); err == nil {
			if t := l.fdPath(pid, int32(fd)); t != "" {
				out = append(out, t)
			}
		}
	}
	return out
}

func (liveThrashReads) size(path string) uint64 {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return 0
	}
	return uint64(st.Size())
}

func (liveThrashReads) diskRead(pid uint32) (uint64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/io", proc.Root, pid))
	if err != nil {
		return 0, false
	}
	return proc.StatValue(bytes.ReplaceAll(b, []byte(":"), nil), "read_bytes"), true
}

var thrashHostReads = func(h *Host) thrashReads { return liveThrashReads{h} }

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
	// Through read calls: the file's size (live, stat), the calls and the
	// bytes they returned, and their sleeps waiting for its pages.
	fileSize  uint64
	readNS    uint64
	reads     uint64
	readBytes uint64
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
	// Read calls: sleeps waiting for file pages (calls slow enough to carry
	// their sleeps), memory-cgroup reclaim inside them (the kernel's timing
	// of every pass), the calls by name, and the fds' files.
	readNS, readSleeps uint64
	readReclaimNS      uint64
	readCalls          map[string]uint64
	fds                map[int32]string
	// The regular files it held open when its reads first reclaimed its
	// cgroup, by size: which file a fast device's reads were on, when no
	// read of it was kept as an event.
	open map[string]uint64
	// The read calls' time in the kernel (less waiting for a CPU), as the
	// events carry it: on files, and on anything else (pipes, sockets).
	evFileNS, evOtherNS uint64
	factsAt             uint64 // event time of the last read of the memory cgroup
	// read_bytes of /proc/PID/io at the first and last reads of the
	// memory cgroup; ioRead: read at least once.
	ioFirst, ioLast uint64
	ioRead          bool
	// The memory cgroup's facts as first and last read for the process:
	// the refault counter is cumulative. born: the cgroup was made during
	// the trace, so its counter counts from zero.
	first, last event.MemFacts
	born        bool
}

type thrash struct {
	arch  event.Arch
	host  thrashReads
	procs map[uint32]*thrashProc
	// Live, the kernel's exact count of each process's read calls and
	// their time (less waiting for a CPU): the events are a sample.
	exact bool
	reads map[uint32]*readTime
	// watch reads the waiting processes' memory cgroups on a clock
	// (thrashWatchEvery; 0 in tests, which tick it); nil until one waits.
	watch      *watch
	watchEvery time.Duration
}

type readTime struct{ n, ns uint64 }

func (t *thrash) counts(cells []stat.Cell) {
	t.exact = true
	t.reads = map[uint32]*readTime{}
	for _, c := range cells {
		if !readFamily[event.SyscallName(t.arch, c.Nr)] {
			continue
		}
		r := t.reads[c.PID]
		if r == nil {
			r = &readTime{}
			t.reads[c.PID] = r
		}
		r.n += c.Count
		r.ns += c.Total - min(c.Runq, c.Total)
	}
}

func newThrash(h *Host) *thrash {
	return &thrash{arch: h.Arch, host: thrashHostReads(h), procs: map[uint32]*thrashProc{}, watchEvery: thrashWatchEvery}
}

// pageCached says a path names a file whose reads go through the page
// cache: not a pipe, a socket, a device or a kernel file.
func pageCached(path string) bool {
	return strings.HasPrefix(path, "/") && !strings.HasPrefix(path, "/dev/") && !strings.HasPrefix(path, "/proc/") &&
		!strings.HasPrefix(path, "/sys/")
}

func (t *thrash) proc(pid uint32, comm string) *thrashProc {
	p := t.procs[pid]
	if p == nil {
		p = &thrashProc{pid: pid, comm: comm, files: map[string]*thrashFile{}, readCalls: map[string]uint64{},
			fds: map[int32]string{}}
		t.procs[pid] = p
	}
	return p
}

func (t *thrash) Observe(e *event.Event) {
	switch e.Kind {
	case event.KindSyscall:
		t.observeCall(e)
	case event.KindReclaim:
		if e.Reclaim.What != event.ReclaimMemcg {
			return // the host's free memory, not the cgroup's limit
		}
		// Inside a read call, reclaim is the page cache's charge for the
		// page the read brings in, as it is a fault's outside one.
		if e.Reclaim.Nr >= 0 && readFamily[event.SyscallName(t.arch, uint32(e.Reclaim.Nr))] {
			p := t.proc(e.PID, e.Comm)
			p.readReclaimNS += e.Reclaim.Duration
			p.reclaimPages += e.Reclaim.Pages
			if p.open == nil && t.host.can() {
				p.open = map[string]uint64{}
				for _, path := range t.host.openFiles(e.PID) {
					if pageCached(path) {
						if n := t.host.size(path); n > 0 {
							p.open[path] = n
						}
					}
				}
			}
			// Its read calls may never come as events (none slow, none
			// sampled): its reclaim reads the cgroup too.
			t.readFacts(p, e)
		}
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
		t.note(p, w.Mem)
	}
}

// observeCall follows a process's fds to their files and counts its read
// calls on files: their sleeps waiting for the file's pages, and live its
// memory cgroup's counters while it waits.
func (t *thrash) observeCall(e *event.Event) {
	sc := &e.Syscall
	name := event.SyscallName(t.arch, sc.Nr)
	p := t.procs[e.PID]
	switch name {
	case "close", "dup2", "dup3":
		// The fd names another file from now on (or none).
		if p != nil {
			fd := int32(sc.Args[0])
			if name != "close" {
				fd = int32(sc.Args[1])
			}
			delete(p.fds, fd)
		}
		return
	case "open", "openat", "openat2", "creat", "dup", "fcntl":
		if p != nil && sc.Ret >= 0 {
			delete(p.fds, int32(sc.Ret))
		}
		return
	}
	if !readFamily[name] || sc.Ret < 0 {
		return
	}
	var waitNS, sleeps, longest uint64
	var stack []event.Frame
	for i := range sc.Sleeps {
		sl := &sc.Sleeps[i]
		if preempted(sl) || !hasFrame(sl.Stack, readPageFrames) || hasFrame(sl.Stack, memcgFrames) ||
			hasFrame(sl.Stack, notFileFaultFrames) {
			continue
		}
		waitNS += sl.Duration
		sleeps += uint64(max(sl.Count, 1))
		if sl.Duration > longest {
			longest, stack = sl.Duration, sl.Stack
		}
	}
	// A process that never waited for a file page in a read is none of
	// this detector's business: its fds are not followed.
	if p == nil && waitNS == 0 {
		return
	}
	p = t.proc(e.PID, e.Comm)
	fd := int32(sc.Args[0])
	path, ok := p.fds[fd]
	if !ok {
		if t.host.can() {
			path = t.host.fdPath(e.PID, fd)
		}
		p.fds[fd] = path
	}
	inKernel := sc.Latency - min(sc.Queued, sc.Latency)
	if !pageCached(path) {
		if waitNS == 0 {
			p.evOtherNS += inKernel
			return // a pipe, a socket, a device: no page cache
		}
		path = "" // a file whose name was not read
	}
	f := p.files[path]
	if f == nil {
		f = &thrashFile{path: path}
		p.files[path] = f
		if path != "" && t.host.can() {
			f.fileSize = t.host.size(path)
		}
	}
	if name == "pread64" || name == "preadv" || name == "preadv2" {
		// Where the file is gone before it could be read, the highest
		// offset read is a bound on its size.
		if name == "pread64" {
			f.fileSize = max(f.fileSize, sc.Args[3]+uint64(sc.Ret))
		}
	}
	p.evFileNS += inKernel
	f.reads++
	f.readBytes += uint64(sc.Ret)
	f.readNS += waitNS
	p.readCalls[name]++
	p.readNS += waitNS
	p.readSleeps += sleeps
	if waitNS > p.stackNS {
		p.stackNS, p.stack = waitNS, ownFrames(stack)
	}
	// From a process's first wait on, any of its read calls that crosses
	// over (a sampled one too: a call under the slow bar carries no
	// sleeps) reads the cgroup again. On a fast device the waiting calls
	// thin out, and a last read taken only at one could trail the
	// process's end by seconds: its refaults since then counted nowhere,
	// as the cgroup is gone by the report.
	// A process whose reads reclaim its own cgroup (its page cache at the
	// limit) is read too, waits or not: on a device fast enough that no
	// read waits past the slow bar, the refaults are the only witness.
	if waitNS > 0 || p.first.Read || p.readReclaimNS > 0 {
		t.readFacts(p, e)
	}
}

// readFacts reads the process's memory cgroup and I/O counts, at most
// every thrashFactsEvery.
func (t *thrash) readFacts(p *thrashProc, e *event.Event) {
	if !t.host.can() || p.factsAt != 0 && e.Time < p.factsAt+thrashFactsEvery {
		return
	}
	p.factsAt = e.Time
	if m, ok := t.host.memFacts(e.PID); ok {
		t.note(p, m)
	}
	if n, ok := t.host.diskRead(e.PID); ok {
		if !p.ioRead {
			p.ioFirst, p.ioRead = n, true
		}
		p.ioLast = n
	}
}

// note keeps a read of the process's memory cgroup: the first of the
// cgroup, and the last. A process on its way out reads as in no cgroup
// (an older writer's capture): the cgroup it lived in is the one that
// counts. At the first read it asks whether the cgroup was made during
// the trace: the first read comes with the first event that shows a wait,
// live a slow call, and a fast device lets a reader refault for seconds
// before any call is slow.
func (t *thrash) note(p *thrashProc, m event.MemFacts) {
	if !m.Read || m.Host && p.last.Read && !p.last.Host {
		return
	}
	if !p.first.Read || p.first.Cgroup != m.Cgroup || p.first.Host != m.Host {
		p.first = m
		p.born = !m.Host && t.host != nil && t.host.can() && t.host.born(m.Cgroup)
	}
	p.last = m
	if !m.Host && m.Cgroup != "" && t.host.can() {
		if t.watch == nil {
			t.watch = newWatch(t.watchEvery, t.host.can)
		}
		host, cg := t.host, m.Cgroup
		t.watch.add(cg, func() (map[string]int64, bool) {
			n, ok := host.refaults(cg)
			return map[string]int64{refaultKey: int64(n)}, ok
		})
	}
}

const refaultKey = "workingset_refault_file"

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

// thrashGroup is the processes that wait for one file's pages under one
// memory cgroup: they share its cache, and the limit.
type thrashGroup struct {
	file           *thrashFile
	cgroup         string
	host           bool
	procs          map[uint32]string
	ns, count      uint64
	reclaimNS      uint64
	majflt, minflt uint64
	// refaults: the cgroup's refaults over the trace, from zero when born
	// (the cgroup was made during it), else from the first read; span: from
	// the first read, the span /proc/PID/io's diskBytes covers.
	refaults, span uint64
	first, last    event.MemFacts
	born           bool
	stack          []string
	stackNS        uint64
	// Through read calls, on all the processes' files.
	readNS, readSleeps, readReclaimNS uint64
	readCalls                         map[string]uint64
	// readTimeNS: the read calls' whole time in the kernel, of which
	// readNS and readReclaimNS are the part proven by stacks and reclaim
	// timing; readExact says it is the kernel's count of every call.
	readTimeNS uint64
	readExact  bool
	readN      uint64 // the kernel's count of the read calls, when exact
	// diskBytes: what the processes had read from storage between the
	// first and last reads of their memory cgroup (ioKnown: read live).
	diskBytes uint64
	ioKnown   bool
}

// rereads says whether what the readers read from the device was mostly
// pages read before and evicted: the cgroup's refaults against the bytes
// the processes had read from storage over the same span. Unknown (no
// /proc/PID/io: a capture, the fault path) counts as yes, the refaults
// alone deciding.
func (g *thrashGroup) rereads() bool {
	return !g.ioKnown || g.diskBytes == 0 || float64(g.span)*4096 >= thrashRereadShare*float64(g.diskBytes)
}

// proven is the time the group's processes were seen waiting for the
// file's pages and reclaiming room for them, in faults and in read calls.
func (g *thrashGroup) proven() uint64 { return g.ns + g.reclaimNS + g.readNS + g.readReclaimNS }

// lost is the time the file cost them: the faults' waits, and the read
// calls' whole time. Under refaults a read call's time is the wait for the
// disk: copying a cached page out is memory speed (about a microsecond a
// page), reading it in is the device's.
func (g *thrashGroup) lost() uint64 {
	return g.ns + g.reclaimNS + max(g.readTimeNS, g.readNS+g.readReclaimNS)
}

// viaRead says the time was mostly in read calls rather than faults.
func (g *thrashGroup) viaRead() bool { return g.readNS+g.readReclaimNS > g.ns+g.reclaimNS }

// workingSet is the file's size as the processes used it: the largest
// mapping of it, or the file's own size where it was read by calls.
func (g *thrashGroup) workingSet() uint64 { return max(g.file.size, g.file.fileSize) }

func (t *thrash) Findings(env *Env) []Finding {
	if t.watch != nil {
		t.watch.close()
	}
	threadNS, _ := env.threadTime()
	groups := map[string]*thrashGroup{}
	for _, p := range t.procs {
		if p.fileNS == 0 && p.readNS == 0 && p.readReclaimNS == 0 {
			continue
		}
		// The file the process waited for most; with no wait seen (a fast
		// device), the file it read most.
		var f *thrashFile
		for _, x := range p.files {
			if x.ns == 0 && x.readNS == 0 && (p.fileNS > 0 || p.readNS > 0 || x.readBytes == 0) {
				continue
			}
			if f == nil || x.ns+x.readNS > f.ns+f.readNS ||
				x.ns+x.readNS == f.ns+f.readNS && (x.readBytes > f.readBytes || x.readBytes == f.readBytes && x.path < f.path) {
				f = x
			}
		}
		if (f == nil || f.reads == 0) && p.readReclaimNS > 0 {
			// Reads reclaimed, and none was kept on a file (a fast device:
			// no read slow enough, no sampled one): the largest regular
			// file it held open is the one read.
			var best string
			for path, n := range p.open {
				if best == "" || n > p.open[best] || n == p.open[best] && path < best {
					best = path
				}
			}
			if best != "" {
				of := &thrashFile{path: best, fileSize: p.open[best]}
				if f != nil {
					of.ns, of.count, of.size = f.ns, f.count, f.size
				}
				f = of
			}
		}
		if f == nil {
			continue
		}
		k := keyOf(p.last.Cgroup, f.path)
		g := groups[k]
		if g == nil {
			g = &thrashGroup{file: &thrashFile{path: f.path}, cgroup: p.last.Cgroup, host: !p.last.Read || p.last.Host,
				procs: map[uint32]string{}, first: p.first, last: p.last, born: p.born, readCalls: map[string]uint64{}}
			groups[k] = g
		}
		g.procs[p.pid] = p.comm
		g.file.size = max(g.file.size, f.size)
		g.file.fileSize = max(g.file.fileSize, f.fileSize)
		g.file.reads += f.reads
		g.file.readBytes += f.readBytes
		g.ns += p.fileNS
		g.count += p.fileCount
		g.reclaimNS += p.reclaimNS
		g.readNS += p.readNS
		g.readSleeps += p.readSleeps
		if p.ioRead {
			g.ioKnown = true
			g.diskBytes += p.ioLast - p.ioFirst
		}
		g.readReclaimNS += p.readReclaimNS
		// The exact time is the process's read calls on every fd: taken
		// only when its traced read calls spent more time on files than on
		// anything else (a server blocked reading a socket is not waiting
		// for a file). A process never seen waiting for a page in a read
		// (a reader of a mapping that also reads cached files) lost
		// nothing in its reads.
		if p.readNS > 0 || p.readReclaimNS > 0 {
			rt := p.evFileNS
			if r := t.reads[p.pid]; t.exact && r != nil && p.evOtherNS <= p.evFileNS {
				rt, g.readExact = r.ns, true
				g.readN += r.n
			}
			g.readTimeNS += max(rt, p.readNS+p.readReclaimNS)
		}
		for c, n := range p.readCalls {
			g.readCalls[c] += n
		}
		g.majflt += p.majflt
		g.minflt += p.minflt
		if p.stackNS > g.stackNS {
			g.stackNS, g.stack = p.stackNS, p.stack
		}
		// One cgroup's counter, read by each process: the widest span.
		if p.first.Read && p.first.RefaultFile < g.first.RefaultFile {
			g.first = p.first
		}
		g.born = g.born || p.born && p.first.Cgroup == g.cgroup
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
		lost := g.lost()
		var share float64
		var threads uint64
		for pid := range g.procs {
			threads += threadNS[pid]
		}
		if threads > 0 {
			share = float64(lost) / float64(threads)
		}
		// The watch's last read, when the cgroup is gone by now. Else the
		// kernel folds its per-CPU counts into memory.stat every 2 s or
		// so: in a short trace the last read may not have moved yet. Live,
		// a read now, once the trace is over, is the freshest.
		if !g.host && t.watch != nil {
			if s := t.watch.latest(g.cgroup); s != nil && uint64(s[refaultKey]) > g.last.RefaultFile {
				g.last.RefaultFile = uint64(s[refaultKey])
			}
		}
		if !g.host && t.host.can() {
			if n, ok := t.host.refaults(g.cgroup); ok && n > g.last.RefaultFile {
				g.last.RefaultFile = n
			}
		}
		if g.first.Read && g.last.RefaultFile >= g.first.RefaultFile {
			g.span = g.last.RefaultFile - g.first.RefaultFile
			g.refaults = g.span
			if g.born {
				g.refaults = g.last.RefaultFile
			}
		}
		limited := !g.host && g.last.Read
		proof := g.proven()
		// The reads went to the device (read_bytes of /proc/PID/io) and
		// the cgroup's refaults say at least half of that was pages read
		// before and evicted: the kernel's exact time in the read calls is
		// then what the re-reading cost, waits seen or not. On a device
		// fast enough that no read waits past the slow bar (a disk the
		// hypervisor caches, NVMe) it is the only measure there is.
		readProof := limited && g.readExact && g.ioKnown && g.diskBytes >= thrashRefaultMin*4096 &&
			g.refaults >= thrashRefaultMin && g.rereads()
		if readProof && g.readTimeNS > proof {
			proof = g.readTimeNS
		}
		if g.ns+g.readNS == 0 && !readProof {
			continue // reclaim alone, no page waited for: cgroup-limit's
		}
		sev := Info
		if limited && g.refaults >= thrashRefaultMin && g.rereads() && share >= warnShare && proof >= warnWaitNS {
			sev = Warning
		} else if proof < warnWaitNS {
			continue // a few waits: felt by no one
		}
		out = append(out, thrashFinding(env, g, sev, lost, share))
	}
	return out
}

// refaultsAre says what refaulted_pages counted.
func refaultsAre(g *thrashGroup, where string) string {
	if g.born {
		return "workingset_refault_file of " + where + ", made during the trace, at its last read: all of its refaults"
	}
	return "workingset_refault_file of " + where + " between the first and last reads during the trace (at least what happened in it)"
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
		"working_set_bytes": g.workingSet(),
		"fault_sleep_ns":    g.ns, "fault_sleeps": g.count, "reclaim_in_faults_ns": g.reclaimNS,
		"time_lost_ns": lost, "share_of_thread_time": share,
		"major_faults": g.majflt, "minor_faults": g.minflt,
		"major_faults_are": "counted by the kernel per thread, from each thread's first sleep in a fault sysray saw",
		"refaulted_pages":  g.refaults, "refaulted_pages_are": refaultsAre(g, where),
		"cgroup": g.cgroup, "stack": g.stack}
	if g.file.reads > 0 || g.viaRead() {
		ev["file_bytes"], ev["traced_read_calls"], ev["traced_bytes_read"] = g.file.fileSize, g.readCalls, g.file.readBytes
		ev["traced_are"] = "the read calls on the file sysray kept as events: live, the slow ones and a sample of the others"
		ev["read_wait_ns"], ev["read_waits"], ev["reclaim_in_reads_ns"] = g.readNS, g.readSleeps, g.readReclaimNS
		ev["read_wait_ns_are"] = "sleeps waiting for the file's pages in the read calls slow enough to carry their sleeps (at least: a faster call's wait is not seen)"
		ev["read_time_ns"] = g.readTimeNS
		if g.readNS == 0 {
			ev["read_waits_seen"] = "none: no read was slow enough to carry its stack; the refaults and the device's reads are the proof"
		}
		if g.ioKnown {
			ev["read_from_disk_bytes"] = g.diskBytes
			ev["read_from_disk_bytes_are"] = "read_bytes of the processes' /proc/PID/io between their first and last reads of the memory cgroup"
			if g.diskBytes > 0 {
				ev["refaulted_share_of_read_from_disk"] = float64(g.span) * 4096 / float64(g.diskBytes)
			}
		}
		ev["read_time_is"] = "the traced read calls on the file, in the kernel less waiting for a CPU"
		if g.readExact {
			ev["read_time_is"] = "the kernel's sum over every read call of the processes, in the kernel less waiting for a CPU"
			ev["read_calls"] = g.readN
		}
	}
	if limit > 0 {
		ev["limit_bytes"], ev["limit_file"] = limit, limitName
		ev["memory_current_bytes"] = g.last.Current
	}
	size := "size unknown" // a deleted file's, read after it went
	if ws := g.workingSet(); ws > 0 {
		size = thrashBytes(ws)
	}
	var title, summary string
	faults := fmt.Sprintf("%s asleep in %d page faults on it, and %s reclaiming memory inside faults: %s in all, %.0f%% of the threads' time",
		units.Duration(g.ns), g.count, units.Duration(g.reclaimNS), units.Duration(lost), 100*share)
	how := fmt.Sprintf("faulted %s (%s) in from disk", file, size)
	if g.viaRead() {
		calls := callList(g.readCalls)
		faults = fmt.Sprintf("the %s calls took %s in the kernel; %s of it seen asleep waiting for the file's pages (in %d sleeps "+
			"of the calls slow enough to carry their stacks: a faster call's wait is not seen), and %s reclaiming memory inside the reads",
			calls, units.Duration(g.readTimeNS), units.Duration(g.readNS), g.readSleeps, units.Duration(g.readReclaimNS))
		if g.readNS == 0 {
			faults = fmt.Sprintf("the %s calls took %s in the kernel, none slow enough to carry its stack (a fast device: each "+
				"wait for the file's pages is short), and %s reclaiming memory inside the reads; the device read %s for them, "+
				"%.0f%% of it pages the cgroup had read before and evicted",
				calls, units.Duration(g.readTimeNS), units.Duration(g.readReclaimNS), thrashBytes(g.diskBytes),
				100*float64(g.span)*4096/float64(max(g.diskBytes, 1)))
		}
		if g.ns+g.reclaimNS > 0 {
			faults += fmt.Sprintf(", %s in page faults on it", units.Duration(g.ns+g.reclaimNS))
		}
		faults += fmt.Sprintf(": %s in all, %.0f%% of the threads' time", units.Duration(lost), 100*share)
		how = fmt.Sprintf("read %s (%s) from disk with %s", file, size, calls)
	}
	switch {
	case sev == Warning && g.viaRead():
		title = fmt.Sprintf("%s read %s from disk again and again: the %sfile does not fit the %s limit of %s (%s lost waiting for its pages in %s)",
			who, file, sized(size), thrashBytes(limit), where, units.Duration(lost), callList(g.readCalls))
		summary = fmt.Sprintf("%s reads %s (%s) pass after pass with %s, but %s holds at most %s (%s; %s in use at the last read). "+
			"Each page a read brings into the page cache makes the kernel evict an older one, and with a working set larger than the limit "+
			"the page evicted is the one a later pass needs: the kernel read %d pages of the cgroup's files back in soon after evicting them "+
			"(workingset_refault_file) while sysray watched. So each read waits for the disk instead of copying from memory: %s.",
			who, file, size, callList(g.readCalls), where, thrashBytes(limit), limitName, thrashBytes(g.last.Current), g.refaults,
			faults)
		if len(g.stack) > 0 {
			summary += " Where they slept: " + strings.Join(firstN(g.stack, 6), " ← ") + "."
		}
	case sev == Warning:
		title = fmt.Sprintf("%s read %s from disk again and again: its %smapping does not fit the %s limit of %s (%s lost in page faults)",
			who, file, sized(size), thrashBytes(limit), where, units.Duration(lost))
		summary = fmt.Sprintf("%s maps %s (%s) and reads it pass after pass, but %s holds at most %s (%s; %s in use at the last read). "+
			"Each new page the reader faults in makes the kernel evict an older one, and with a working set larger than the limit the page "+
			"evicted is the one a later pass needs: the kernel read %d pages of the cgroup's files back in soon after evicting them "+
			"(workingset_refault_file) while sysray watched. So the file is read from disk on every pass instead of from memory: %s. "+
			"The kernel counted %d major faults (a fault that read the page itself) and %d minor ones; read-ahead brings most pages "+
			"in before they are touched, so many waits are minor faults waiting for a read in flight. Where they slept: %s.",
			who, file, size, where, thrashBytes(limit), limitName, thrashBytes(g.last.Current), g.refaults, faults,
			g.majflt, g.minflt, strings.Join(firstN(g.stack, 6), " ← "))
	case (g.refaults < thrashRefaultMin || !g.rereads()) && !g.host:
		title = fmt.Sprintf("%s waited %s reading %s (a first read: nothing was read twice)", who, units.Duration(lost), file)
		fewer := fmt.Sprintf("fewer than %d", thrashRefaultMin)
		if g.refaults >= thrashRefaultMin {
			fewer = fmt.Sprintf("%.0f%% of the %s the processes had read from storage meanwhile (under %.0f%%)",
				100*float64(g.span)*4096/float64(g.diskBytes), thrashBytes(g.diskBytes), 100*thrashRereadShare)
		}
		summary = fmt.Sprintf("%s %s: %s. The kernel read back %d evicted pages of %s while sysray watched, "+
			"%s: the pages were read for the first time (a cold start, a single pass), not evicted and read again. "+
			"page-cache-thrash warns when they are.", who, how, faults, g.refaults, where, fewer)
	default:
		title = fmt.Sprintf("%s waited %s reading %s", who, units.Duration(lost), file)
		summary = fmt.Sprintf("%s %s: %s. The kernel read back %d evicted file pages on %s while sysray watched. "+
			"page-cache-thrash warns only when the processes live under a memory cgroup limit, their refaults are counted apart from the "+
			"rest of the host's, and the waits take at least a quarter of their time.", who, how, faults, g.refaults, where)
	}
	fix := fmt.Sprintf("Give %s room for the file: raise %s to more than the working set (%s here, plus the process's own memory), or "+
		"read less of it at a time: process the file in pieces that fit and munmap (or madvise(MADV_DONTNEED)) each before the next; "+
		"for one sequential pass, madvise(MADV_SEQUENTIAL) reads ahead harder and drops pages behind; data read once and not kept "+
		"can bypass the cache with O_DIRECT, or be dropped after use with posix_fadvise(POSIX_FADV_DONTNEED).",
		where, nonEmpty(limitName, "the memory limit"), size)
	if g.viaRead() {
		fix = fmt.Sprintf("Give %s room for the file: raise %s to more than the working set (%s here, plus the process's own memory), "+
			"and every pass after the first is a copy from memory. Otherwise the passes cannot be faster than the disk: a sequential "+
			"pass over a file larger than the cache finds none of it cached (each page was evicted before the pass came back to it), "+
			"and neither O_DIRECT nor posix_fadvise(POSIX_FADV_DONTNEED) changes that; they only keep the scan from evicting the rest of "+
			"the cgroup's cache and save the reclaim. What helps is reading less: do the passes' work in one pass, keep what a pass "+
			"computes instead of reading the file again for it, or read only the part needed (an index, pread at known offsets) so "+
			"that the part read fits under the limit.", where, nonEmpty(limitName, "the memory limit"), size)
	}
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

// sized is a size before a noun ("96.0 MiB "), or nothing when unknown.
func sized(size string) string {
	if size == "size unknown" {
		return ""
	}
	return size + " "
}
