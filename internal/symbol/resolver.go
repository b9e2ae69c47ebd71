package symbol

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Resolver resolves user-space addresses of any process. It is safe for
// concurrent use; one lock guards it, and a warm Resolve holds it for well
// under a microsecond.
//
// Process IDs are reused: a caller that follows process lifetimes should
// Forget a pid when its process exits or execs, and Snapshot it again if
// it runs on.
type Resolver struct {
	// DebugDir is searched for separate debug files, by build-id and by
	// .gnu_debuglink name; "" turns the search off. Set it before use.
	DebugDir string
	// CacheBytes bounds the estimated memory of loaded symbol tables. Past
	// it the least recently used tables are dropped, and read again from
	// their files if needed. Set it before use.
	CacheBytes int64

	mu    sync.Mutex
	procs map[uint32]*process
	byKey map[fileKey]*object // every file we hold or have read, by inode
	byID  map[string]*image   // loaded tables by build-id, across inodes
	live  []*image            // loaded tables, for eviction
	bytes int64               // estimated size of live
	open  int                 // files held open until their symbols are read
	tick  uint64              // use counter for LRU
	vdso  *object

	// Knobs for tests.
	procRoot   string
	noMapFiles bool
	maxProcs   int
	maxOpen    int
	refresh    time.Duration
}

// process is what we know of one pid.
type process struct {
	maps     []mapping // executable mappings, sorted by start
	perf     table     // perf map symbols
	perfPath string    // as the process sees it
	perfStat perfStat
	read     time.Time // when maps were last read, or found unreadable
	lastUse  uint64
}

type perfStat struct {
	size  int64
	mtime time.Time
}

// object is one mapped file. Its symbols (img) may be shared with files of
// the same build-id, and dropped under memory pressure.
type object struct {
	key    fileKey
	paths  []string    // where it can be opened again, checked against key
	ds     debugSearch // root and path for finding debug files
	f      *os.File    // held from Snapshot until the symbols are read
	img    *image
	err    error // the file cannot be read: its frames get no names
	refs   int   // mappings of known processes that use it
	pinned bool  // the vDSO: not a file, never released
}

var errGone = errors.New("file is gone")

// NewResolver returns a Resolver with the usual debug directory and a 256 MiB
// symbol cache.
func NewResolver() *Resolver {
	return &Resolver{
		DebugDir:   "/usr/lib/debug",
		CacheBytes: 256 << 20,
		procs:      map[uint32]*process{},
		byKey:      map[fileKey]*object{},
		byID:       map[string]*image{},
		procRoot:   "/proc",
		maxProcs:   16384,
		maxOpen:    512,
		refresh:    time.Second,
	}
}

// Snapshot reads the process's mappings now and opens the files behind them,
// so that its addresses still resolve after it exits, even when its files
// lived in a container that is gone too. A second Snapshot replaces the first.
func (r *Resolver) Snapshot(pid uint32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snapshot(pid)
}

// Resolve names an address in process pid (the thread-group id, as BPF's
// bpf_get_current_pid_tgid() >> 32 gives it). A pid never snapshotted is read
// on first use. An address outside every known mapping makes the process be
// read again (at most once a second) in case it mapped more since. Unknown
// functions come back with Func "" and File naming the mapping if there is
// one, or Unknown.
func (r *Resolver) Resolve(pid uint32, addr uint64) Frame {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tick++
	p := r.procs[pid]
	if p == nil {
		if r.snapshot(pid) != nil {
			p = &process{read: time.Now()}
			r.addProc(pid, p)
		}
		p = r.procs[pid]
	}
	p.lastUse = r.tick
	f := r.lookup(p, addr)
	// A miss may be code mapped, or JIT-compiled, since the maps were read.
	if f.Func == "" && (f.File == Unknown || f.File == anonFile) && time.Since(p.read) >= r.refresh {
		if r.snapshot(pid) == nil {
			p = r.procs[pid]
			p.lastUse = r.tick
			f = r.lookup(p, addr)
		} else {
			p.read = time.Now()
		}
	}
	return f
}

// Forget drops what is known of pid.
func (r *Resolver) Forget(pid uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.procs[pid]; p != nil {
		r.releaseMaps(p.maps)
		delete(r.procs, pid)
	}
}

// Close releases every file and table. The Resolver stays usable.
func (r *Resolver) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.byKey {
		if o.f != nil {
			o.f.Close()
			o.f = nil
		}
	}
	clear(r.procs)
	clear(r.byKey)
	clear(r.byID)
	for _, img := range r.live {
		img.live, img.syms, img.segs = false, nil, nil
	}
	r.live, r.bytes, r.open = nil, 0, 0
	return nil
}

func (r *Resolver) lookup(p *process, addr uint64) Frame {
	f := Frame{Addr: addr, File: Unknown}
	var m *mapping
	i, _ := slices.BinarySearchFunc(p.maps, addr, func(m mapping, a uint64) int {
		if m.start > a {
			return 1
		}
		return -1
	})
	if i > 0 && addr < p.maps[i-1].end {
		m = &p.maps[i-1]
	}
	if m == nil || m.path == "" {
		// JIT code lives in anonymous memory; so may code that the
		// maps we hold predate.
		if j := p.perf.find(addr); j >= 0 {
			f.Func, f.Offset, f.File = p.perf.name(j), addr-p.perf[j].addr, p.perfPath
		} else if m != nil {
			f.File = anonFile
		}
		return f
	}
	f.File = m.path
	if m.path == vsyscallFile {
		f.Func, f.Offset = vsyscall(addr, m.start)
		return f
	}
	o := m.obj
	if o == nil {
		return f
	}
	img := o.img
	if img == nil || !img.live {
		r.load(o)
		if img = o.img; img == nil || !img.live {
			return f
		}
	}
	img.lastUse = r.tick
	v, ok := img.vaddr(addr - m.start + m.off)
	if !ok {
		return f
	}
	j := img.syms.find(v)
	if j < 0 {
		f.Offset = v // for addr2line
		return f
	}
	f.Func, f.Offset = img.syms.name(j), v-img.syms[j].addr
	return f
}

func (r *Resolver) snapshot(pid uint32) error {
	dir := r.procRoot + "/" + strconv.FormatUint(uint64(pid), 10)
	data, err := os.ReadFile(dir + "/maps")
	if err != nil {
		return err
	}
	maps, err := parseMaps(bytes.NewReader(data))
	if err != nil {
		return err
	}
	seen := map[string]*object{}
	for i := range maps {
		m := &maps[i]
		switch {
		case m.path == vdsoFile:
			m.obj = r.vdsoObject()
		case m.isFile():
			id := m.dev + " " + strconv.FormatUint(m.ino, 10) + " " + m.path
			o, ok := seen[id]
			if !ok {
				o = r.attach(dir, m)
				seen[id] = o
			} else if o != nil {
				o.refs++
			}
			m.obj = o
		}
	}
	old := r.procs[pid]
	p := &process{maps: maps, read: time.Now()}
	if old != nil {
		p.perf, p.perfPath, p.perfStat, p.lastUse = old.perf, old.perfPath, old.perfStat, old.lastUse
	}
	r.readPerfMap(pid, dir, p)
	r.addProc(pid, p)
	// Only now, so that files shared by old and new maps stay cached.
	if old != nil {
		r.releaseMaps(old.maps)
	}
	return nil
}

func (r *Resolver) addProc(pid uint32, p *process) {
	r.procs[pid] = p
	if len(r.procs) <= r.maxProcs {
		return
	}
	// Drop the least recently used eighth, so that this sort is rare.
	type use struct {
		pid  uint32
		tick uint64
	}
	all := make([]use, 0, len(r.procs))
	for id, q := range r.procs {
		if id != pid {
			all = append(all, use{id, q.lastUse})
		}
	}
	slices.SortFunc(all, func(a, b use) int {
		switch {
		case a.tick < b.tick:
			return -1
		case a.tick > b.tick:
			return 1
		}
		return 0
	})
	for _, u := range all[:len(all)/8+1] {
		r.releaseMaps(r.procs[u.pid].maps)
		delete(r.procs, u.pid)
	}
}

// attach finds the file behind a mapping and holds it open until its symbols
// are needed: by then the process, its map_files and its root may be gone.
// map_files opens exactly the mapped file, even deleted or in another mount
// namespace; /proc/PID/root/path works without CAP_SYS_ADMIN; the host path
// is the last resort, accepted only if its inode matches.
func (r *Resolver) attach(dir string, m *mapping) *object {
	root := dir + "/root"
	paths := []string{root + m.path, m.path}
	if !r.noMapFiles {
		paths = append([]string{fmt.Sprintf("%s/map_files/%x-%x", dir, m.start, m.end)}, paths...)
	}
	for i, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		k, err := keyOf(f)
		// A path may name another file than the one mapped: replaced
		// since, or the host's file rather than the container's.
		if err != nil || (i > 0 || r.noMapFiles) && k.ino != m.ino {
			f.Close()
			continue
		}
		if o := r.byKey[k]; o != nil {
			f.Close()
			o.refs++
			return o
		}
		o := &object{key: k, paths: paths[i:], ds: debugSearch{root: root, path: m.path}, f: f, refs: 1}
		r.byKey[k] = o
		r.open++
		if r.open > r.maxOpen {
			r.load(o) // bounded descriptors: read it now instead
		}
		return o
	}
	return nil
}

// load reads the object's symbols, or finds them already read from another
// file with the same build-id.
func (r *Resolver) load(o *object) {
	if o.err != nil || o.pinned {
		return
	}
	f := o.f
	if f != nil {
		o.f = nil
		r.open--
	} else if f = r.reopen(o); f == nil {
		o.err = errGone
		return
	}
	defer f.Close()
	var (
		img    *image
		shared bool // read already from another file with this build-id
	)
	err := guard(func() error {
		ef, err := elf.NewFile(f)
		if err != nil {
			return err
		}
		id := buildID(ef)
		if img = r.byID[id]; id != "" && img != nil && img.live {
			shared = true
			return nil
		}
		ds := o.ds
		ds.dir, ds.key = r.DebugDir, o.key
		img, err = readImage(ef, id, ds)
		return err
	})
	if err != nil {
		o.err = err
		return
	}
	o.img = img
	if shared {
		return
	}
	img.lastUse = r.tick
	if img.id != "" {
		r.byID[img.id] = img
	}
	r.live = append(r.live, img)
	r.bytes += img.bytes
	r.evict(img)
}

func (r *Resolver) reopen(o *object) *os.File {
	for _, path := range o.paths {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		if k, err := keyOf(f); err == nil && k == o.key {
			return f
		}
		f.Close()
	}
	return nil
}

// evict drops least recently used tables until the cache is within bounds,
// never keep, which is in use.
func (r *Resolver) evict(keep *image) {
	if r.bytes <= r.CacheBytes {
		return
	}
	slices.SortFunc(r.live, func(a, b *image) int {
		switch {
		case a.lastUse < b.lastUse:
			return -1
		case a.lastUse > b.lastUse:
			return 1
		}
		return 0
	})
	// Down to three quarters, so that a working set just over the bound
	// does not reload on every miss.
	n := 0
	for _, img := range r.live {
		if r.bytes <= r.CacheBytes/4*3 || img == keep {
			r.live[n] = img
			n++
			continue
		}
		r.bytes -= img.bytes
		img.live, img.syms, img.segs = false, nil, nil
		if r.byID[img.id] == img {
			delete(r.byID, img.id)
		}
	}
	clear(r.live[n:])
	r.live = r.live[:n]
	for k, o := range r.byKey {
		if o.refs == 0 && (o.img == nil || !o.img.live) {
			delete(r.byKey, k)
		}
	}
}

func (r *Resolver) releaseMaps(maps []mapping) {
	seen := map[*object]bool{}
	for i := range maps {
		o := maps[i].obj
		if o == nil || o.pinned || seen[o] {
			continue
		}
		seen[o] = true
		if o.refs--; o.refs > 0 {
			continue
		}
		if o.f != nil {
			o.f.Close()
			o.f = nil
			r.open--
		}
		// Keep a loaded table for the next process of the same binary;
		// eviction removes the object with it.
		if o.img == nil || !o.img.live {
			delete(r.byKey, o.key)
		}
	}
}

// vdsoObject returns the vDSO's symbols. Every 64-bit process on a kernel
// shares one vDSO image, so our own serves for all.
func (r *Resolver) vdsoObject() *object {
	if r.vdso != nil {
		return r.vdso
	}
	r.vdso = &object{pinned: true}
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		r.vdso.err = err
		return r.vdso
	}
	maps, _ := parseMaps(bytes.NewReader(data))
	r.vdso.err = errGone
	for _, m := range maps {
		if m.path != vdsoFile {
			continue
		}
		mem, err := os.Open("/proc/self/mem")
		if err != nil {
			r.vdso.err = err
			break
		}
		buf := make([]byte, m.end-m.start)
		_, err = mem.ReadAt(buf, int64(m.start))
		mem.Close()
		if err != nil {
			r.vdso.err = err
			break
		}
		r.vdso.err = guard(func() error {
			ef, err := elf.NewFile(bytes.NewReader(buf))
			if err == nil {
				r.vdso.img, err = readImage(ef, buildID(ef), debugSearch{})
			}
			return err
		})
		break
	}
	return r.vdso
}

// readPerfMap reads the process's perf map, unless it is unchanged since
// last read. A containerized JIT writes it in its own /tmp under its own
// pid-namespace pid.
func (r *Resolver) readPerfMap(pid uint32, dir string, p *process) {
	ns := nsPid(dir, pid)
	name := "/tmp/perf-" + strconv.FormatUint(uint64(ns), 10) + ".map"
	for _, path := range []string{dir + "/root" + name, "/tmp/perf-" + strconv.FormatUint(uint64(pid), 10) + ".map"} {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			continue
		}
		ps := perfStat{st.Size(), st.ModTime()}
		if p.perf != nil && ps == p.perfStat {
			f.Close()
			return
		}
		t, err := parsePerfMap(f)
		f.Close()
		if err == nil {
			p.perf, p.perfPath, p.perfStat = t, name, ps
			return
		}
	}
}

// nsPid returns the pid as the process's own pid namespace numbers it.
func nsPid(dir string, pid uint32) uint32 {
	data, err := os.ReadFile(dir + "/status")
	if err != nil {
		return pid
	}
	for line := range bytes.Lines(data) {
		if rest, ok := bytes.CutPrefix(line, []byte("NSpid:")); ok {
			f := bytes.Fields(rest)
			if len(f) > 0 {
				if n, err := strconv.ParseUint(string(f[len(f)-1]), 10, 32); err == nil {
					return uint32(n)
				}
			}
		}
	}
	return pid
}

// guard turns a panic into an error. The files come from any process on the
// host, possibly crafted, and debug/elf and debug/gosym do not promise to
// survive malformed input.
func guard(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed ELF file: %v", p)
		}
	}()
	return f()
}
