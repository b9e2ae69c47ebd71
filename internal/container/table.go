package container

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sysray/sysray/internal/proc"
)

// Options configure a Table. Zero values take the defaults.
type Options struct {
	CgroupRoot  string        // cgroup v2 mount point; default proc.CgroupV2Mount()
	ProcRoot    string        // default "/proc"
	Interval    time.Duration // background refresh period; default 5s
	MetaTimeout time.Duration // per runtime request; default 2s
	MetaTTL     time.Duration // how long fetched metadata is trusted; default 10m
	RetryAfter  time.Duration // how long a failed fetch is remembered; default 30s
	// Sources of metadata, tried in order; nil means DefaultSources(), an
	// empty non-nil slice means none (ids only).
	Sources []Source
	Workers int // metadata fetchers; default 2
}

func (o *Options) defaults() {
	if o.CgroupRoot == "" {
		o.CgroupRoot = proc.CgroupV2Mount()
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.Interval <= 0 {
		o.Interval = 5 * time.Second
	}
	if o.MetaTimeout <= 0 {
		o.MetaTimeout = 2 * time.Second
	}
	if o.MetaTTL <= 0 {
		o.MetaTTL = 10 * time.Minute
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = 30 * time.Second
	}
	if o.Sources == nil {
		o.Sources = DefaultSources()
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
}

// Table maps cgroup v2 ids and pids to Refs, and Refs to Meta. Its lookup
// methods are safe for concurrent use, never block and never do I/O: they
// read an immutable snapshot that a background goroutine replaces, and
// queue work (a new pid to probe, metadata to fetch) for other goroutines.
type Table struct {
	opts Options

	snap   atomic.Pointer[snapshot]
	parser atomic.Pointer[Parser]

	extra   sync.Map // uint32 pid -> Ref, probed since the last refresh
	pending sync.Map // uint32 pid -> struct{}, queued for probing
	probeQ  chan uint32

	meta  sync.Map // metaKey -> *metaEntry
	metaQ chan *metaEntry

	refreshMu sync.Mutex
	// placements caches parsed /proc/PID/cgroup contents: most processes
	// share a handful (every host process in one service's cgroups), and
	// a refresh reads every process's file every few seconds.
	placeMu    sync.Mutex
	placements map[placeKey]Placement
	ready      chan struct{}
	readyOnce  sync.Once
	kick       chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type snapshot struct {
	byCgroup map[uint64]Ref    // only cgroups that are not the host
	hostCg   map[uint64]Ref    // the cgroups that are the host's, the root among them
	byPID    map[uint32]Ref    // every process seen, host ones too
	fromV1   map[uint32]bool   // pids whose Ref came from a v1 hierarchy only
	cgPath   map[uint64]string // v2 path of each cgroup in byCgroup
	taken    time.Time
}

var emptySnapshot = &snapshot{}

// NewTable returns a Table and starts its background goroutines: a
// refresh now and every opts.Interval, a pid prober and metadata fetchers.
// Close stops them.
func NewTable(opts Options) *Table {
	opts.defaults()
	t := &Table{
		opts:   opts,
		probeQ: make(chan uint32, 1024),
		metaQ:  make(chan *metaEntry, 256),
		ready:  make(chan struct{}),
		kick:   make(chan struct{}, 1),
	}
	t.snap.Store(emptySnapshot)
	t.parser.Store(NewParser())
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.wg.Add(2 + opts.Workers)
	go t.refreshLoop()
	go t.probeLoop()
	for i := 0; i < opts.Workers; i++ {
		go t.metaLoop()
	}
	return t
}

// Close stops the background goroutines and closes runtime connections.
func (t *Table) Close() error {
	t.cancel()
	t.wg.Wait()
	var errs []error
	for _, s := range t.opts.Sources {
		if c, ok := s.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// Ready is closed when the first refresh has completed.
func (t *Table) Ready() <-chan struct{} { return t.ready }

// Kick asks the background goroutine for a refresh soon (e.g. after an
// exec or cgroup-change event); it never blocks.
func (t *Table) Kick() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

func (t *Table) refreshLoop() {
	defer t.wg.Done()
	tick := time.NewTicker(t.opts.Interval)
	defer tick.Stop()
	for {
		t.Refresh(t.ctx)
		select {
		case <-t.ctx.Done():
			return
		case <-tick.C:
		case <-t.kick:
		}
	}
}

// Refresh rebuilds the table now: learns containerd's namespaces (if a
// source can list them), walks the cgroup v2 hierarchy and reads
// /proc/*/cgroup. It is what the background goroutine runs; callers may
// run it too (at the start of a capture, in tests). Never call it on an
// event's path.
func (t *Table) Refresh(ctx context.Context) {
	t.refreshMu.Lock()
	defer t.refreshMu.Unlock()
	defer t.readyOnce.Do(func() { close(t.ready) })

	t.learnNamespaces(ctx)
	p := t.parser.Load()
	s := &snapshot{
		byCgroup: map[uint64]Ref{},
		hostCg:   map[uint64]Ref{},
		byPID:    map[uint32]Ref{},
		fromV1:   map[uint32]bool{},
		cgPath:   map[uint64]string{},
		taken:    time.Now(),
	}
	if root := t.opts.CgroupRoot; root != "" {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() || ctx.Err() != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return nil
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return nil
			}
			var r Ref // the root is the host's
			if rel != "." {
				rel = "/" + filepath.ToSlash(rel)
				r = p.Parse(rel)
			}
			info, err := d.Info()
			if err != nil {
				return nil
			}
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				if r.IsHost() {
					s.hostCg[st.Ino] = r
					return nil
				}
				s.byCgroup[st.Ino] = r
				s.cgPath[st.Ino] = rel
			}
			return nil
		})
	}
	if ents, err := os.ReadDir(t.opts.ProcRoot); err == nil {
		for _, e := range ents {
			pid, err := strconv.ParseUint(e.Name(), 10, 32)
			if err != nil || ctx.Err() != nil {
				continue
			}
			pl, ok := t.readPlacement(uint32(pid))
			if !ok {
				continue
			}
			s.byPID[uint32(pid)] = pl.Ref
			if pl.FromV1 {
				s.fromV1[uint32(pid)] = true
			}
		}
	}
	t.snap.Store(s)
	t.extra.Clear()
	// Forget expired metadata of containers that are gone.
	live := map[string]bool{}
	for _, r := range s.byCgroup {
		live[metaKey(r)] = true
	}
	for _, r := range s.byPID {
		live[metaKey(r)] = true
	}
	t.meta.Range(func(k, v any) bool {
		if e := v.(*metaEntry); !live[e.key] && e.finished() && t.expired(e) {
			t.meta.CompareAndDelete(k, e)
		}
		return true
	})
}

type placeKey struct {
	parser  *Parser
	content string
}

func (t *Table) readPlacement(pid uint32) (Placement, bool) {
	b, err := proc.ReadFile(filepath.Join(t.opts.ProcRoot, strconv.FormatUint(uint64(pid), 10), "cgroup"))
	if err != nil {
		return Placement{}, false
	}
	p := t.parser.Load()
	t.placeMu.Lock()
	defer t.placeMu.Unlock()
	if pl, ok := t.placements[placeKey{p, string(b)}]; ok {
		return pl, true
	}
	pl := p.ParseCgroupFile(b)
	if t.placements == nil || len(t.placements) >= 4096 {
		t.placements = map[placeKey]Placement{}
	}
	t.placements[placeKey{p, string(b)}] = pl
	return pl, true
}

func (t *Table) learnNamespaces(ctx context.Context) {
	for _, s := range t.opts.Sources {
		nl, ok := s.(NamespaceLister)
		if !ok {
			continue
		}
		c, cancel := context.WithTimeout(ctx, t.opts.MetaTimeout)
		ns, err := nl.Namespaces(c)
		cancel()
		if err != nil || len(ns) == 0 {
			continue
		}
		t.parser.Store(NewParser(append(append([]string{}, DefaultNamespaces...), ns...)...))
		return
	}
}

func (t *Table) probeLoop() {
	defer t.wg.Done()
	for {
		select {
		case <-t.ctx.Done():
			return
		case pid := <-t.probeQ:
			pl, _ := t.readPlacement(pid) // a vanished process is the host: stop asking
			t.extra.Store(pid, pl)
			t.pending.Delete(pid)
		}
	}
}

// ByCgroup returns the Ref of a cgroup v2 id, if it names something other
// than the host.
func (t *Table) ByCgroup(id uint64) (Ref, bool) {
	r, ok := t.snap.Load().byCgroup[id]
	return r, ok
}

// ByPID returns the Ref of a process as /proc/PID/cgroup said at the last
// refresh (or probe). A pid not seen yet is queued for probing.
func (t *Table) ByPID(pid uint32) (Ref, bool) {
	if r, ok := t.snap.Load().byPID[pid]; ok {
		return r, true
	}
	if v, ok := t.extra.Load(pid); ok {
		return v.(Placement).Ref, true
	}
	t.probe(pid)
	return Ref{}, false
}

// Place reads a process's /proc/PID/cgroup now, not when the probe
// queue gets to it, and keeps what it says as a probe would: for reports,
// whose first question about a process may come before the queue's
// answer. false: the process is gone.
func (t *Table) Place(pid uint32) (Ref, bool) {
	if pid == 0 {
		return Ref{}, false
	}
	pl, ok := t.readPlacement(pid)
	if !ok {
		return Ref{}, false
	}
	t.extra.Store(pid, pl)
	return pl.Ref, true
}

func (t *Table) probe(pid uint32) {
	if pid == 0 {
		return
	}
	if _, queued := t.pending.LoadOrStore(pid, struct{}{}); queued {
		return
	}
	select {
	case t.probeQ <- pid:
	default:
		t.pending.Delete(pid)
	}
}

// Lookup is the event path: what does the thread of process pid, in cgroup
// v2 id cgid, belong to? A container named by the cgroup id wins, then one
// named by the pid (hybrid hosts, where a container may live in v1 only and
// its v2 cgroup be "/" or its runtime's service; or a cgroup newer than
// the last refresh), but not a host cgroup's call by a process that has
// moved into a container since; then whatever the cgroup or pid name
// (service, pod). Unknown pids are probed in the background;
// until then the answer is the host.
func (t *Table) Lookup(pid uint32, cgid uint64) Ref {
	s := t.snap.Load()
	cr, cok := s.byCgroup[cgid]
	if cok && cr.IsContainer() {
		return cr
	}
	pr, pok := s.byPID[pid]
	v1 := s.fromV1[pid]
	if !pok {
		if v, ok := t.extra.Load(pid); ok {
			pl := v.(Placement)
			pr, v1, pok = pl.Ref, pl.FromV1, true
		} else {
			t.probe(pid)
		}
	}
	switch {
	case pok && pr.IsContainer():
		// The process is in a container now. A cgroup the walk found
		// to be the host's says where the call was made: a process
		// that moved into a container since (a runtime's or a shell's
		// echo to cgroup.procs before it execs) made it outside. Only
		// a container placed by its v1 paths leaves its processes'
		// v2 cgroup the host's, and a cgroup the walk has not seen
		// yet may be the container's.
		if h, known := s.hostCg[cgid]; known && !v1 {
			return h
		}
		return pr
	case cok:
		return cr
	}
	return pr
}

// CgroupPath returns the v2 path of a cgroup id the Table knows.
func (t *Table) CgroupPath(id uint64) (string, bool) {
	p, ok := t.snap.Load().cgPath[id]
	return p, ok
}

// Container is one container as the Table knows it.
type Container struct {
	Ref       Ref
	CgroupIDs []uint64 // v2 cgroups that belong to it
	PIDs      []uint32 // its processes at the last refresh
	OnlyV1    bool     // some of its processes are placed in v1 hierarchies only
	Meta      Meta
	HasMeta   bool
}

// Containers lists the containers (and pods, monitors) seen at the last
// refresh, with whatever metadata is cached (missing metadata is queued),
// sorted by runtime and id. For the capture's host facts.
func (t *Table) Containers() []Container {
	s := t.snap.Load()
	idx := map[string]*Container{}
	get := func(r Ref) *Container {
		k := metaKey(r) + "/" + r.PodUID + "/" + strconv.FormatBool(r.Monitor)
		c := idx[k]
		if c == nil {
			c = &Container{Ref: r}
			c.Ref.Path = ""
			idx[k] = c
		}
		return c
	}
	for id, r := range s.byCgroup {
		if r.Service != "" {
			continue
		}
		c := get(r)
		c.CgroupIDs = append(c.CgroupIDs, id)
	}
	for pid, r := range s.byPID {
		if r.IsHost() || r.Service != "" {
			continue
		}
		c := get(r)
		c.PIDs = append(c.PIDs, pid)
		c.OnlyV1 = c.OnlyV1 || s.fromV1[pid]
	}
	out := make([]Container, 0, len(idx))
	for _, c := range idx {
		sort.Slice(c.CgroupIDs, func(i, j int) bool { return c.CgroupIDs[i] < c.CgroupIDs[j] })
		sort.Slice(c.PIDs, func(i, j int) bool { return c.PIDs[i] < c.PIDs[j] })
		c.Meta, c.HasMeta = t.Meta(c.Ref)
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Ref, out[j].Ref
		if a.Runtime != b.Runtime {
			return a.Runtime < b.Runtime
		}
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		return a.PodUID < b.PodUID
	})
	return out
}

// Metadata cache.

type metaEntry struct {
	key  string
	ref  Ref
	done chan struct{} // closed when meta/err/at are set
	meta Meta
	err  error
	at   time.Time
}

func metaKey(r Ref) string { return r.Runtime + "/" + r.Namespace + "/" + r.ID }

func (e *metaEntry) finished() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// entry returns the cache entry for r, creating and queueing one when
// there is none or the one there has expired. The second result is the
// expired entry being replaced, if any (its answer is still worth showing).
func (t *Table) entry(r Ref) (cur, stale *metaEntry) {
	k := metaKey(r)
	if v, ok := t.meta.Load(k); ok {
		e := v.(*metaEntry)
		if !e.finished() || !t.expired(e) {
			return e, nil
		}
		stale = e
	}
	e := &metaEntry{key: k, ref: r, done: make(chan struct{})}
	if stale != nil {
		if !t.meta.CompareAndSwap(k, stale, e) {
			v, _ := t.meta.Load(k)
			if v == nil {
				return stale, nil
			}
			return v.(*metaEntry), stale
		}
	} else if v, loaded := t.meta.LoadOrStore(k, e); loaded {
		return v.(*metaEntry), nil
	}
	select {
	case t.metaQ <- e:
	default:
		// Queue full: forget it so that a later call queues it again.
		t.meta.CompareAndDelete(k, e)
	}
	return e, stale
}

func (t *Table) expired(e *metaEntry) bool {
	ttl := t.opts.MetaTTL
	if e.err != nil {
		ttl = t.opts.RetryAfter
	}
	return time.Since(e.at) > ttl
}

// Meta returns the cached metadata of a container without waiting. On a
// miss it queues a fetch and returns false: callers show the id and ask
// again later. A runtime that is down is asked again after RetryAfter.
func (t *Table) Meta(r Ref) (Meta, bool) {
	if r.ID == "" {
		return Meta{}, false
	}
	e, stale := t.entry(r)
	if e.finished() && e.err == nil {
		return e.meta, true
	}
	if stale != nil && stale.err == nil {
		return stale.meta, true
	}
	return Meta{}, false
}

// MetaWait returns a container's metadata, fetching it if needed and
// waiting until ctx is done. Not for the event path.
func (t *Table) MetaWait(ctx context.Context, r Ref) (Meta, error) {
	if r.ID == "" {
		return Meta{}, errors.New("not a container")
	}
	e, _ := t.entry(r)
	select {
	case <-e.done:
		return e.meta, e.err
	case <-ctx.Done():
		return Meta{}, ctx.Err()
	}
}

func (t *Table) metaLoop() {
	defer t.wg.Done()
	for {
		select {
		case <-t.ctx.Done():
			return
		case e := <-t.metaQ:
			e.meta, e.err = t.fetch(e.ref)
			e.at = time.Now()
			close(e.done)
		}
	}
}

func (t *Table) fetch(r Ref) (Meta, error) {
	var errs []error
	for _, s := range t.opts.Sources {
		if !s.Handles(r) {
			continue
		}
		ctx, cancel := context.WithTimeout(t.ctx, t.opts.MetaTimeout)
		m, err := s.Fetch(ctx, r)
		cancel()
		if err == nil {
			if m.Source == "" {
				m.Source = s.Name()
			}
			return m, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return Meta{}, errors.New("no metadata source for " + r.Runtime)
	}
	return Meta{}, errors.Join(errs...)
}
