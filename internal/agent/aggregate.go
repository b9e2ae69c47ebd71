package agent

import (
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
)

// Options bound and name the series.
type Options struct {
	Arch event.Arch
	Name Namer
	// MaxContainers is how many containers get series of their own; the
	// rest share Other. The host does not count against it.
	MaxContainers int
	// MaxSyscalls is how many syscalls each container gets series for; the
	// rest share OtherSyscall.
	MaxSyscalls int
	// Grace is how long a container, or one syscall of it, may stay idle
	// before its series are removed and its slot freed.
	Grace time.Duration
	// Reclaim is how long a slot must have been idle for a newcomer that
	// finds no room to take it (its series are removed); 0 leaves slots to
	// Grace alone. Without it the calls of a container's start (execve,
	// mount, clone...) would hold the slots its work needs for Grace.
	Reclaim time.Duration
	// Settle is how long the counts of a cgroup first seen wait for Name to
	// be sure of its container before they are given to the host.
	Settle time.Duration
	// Unnamed, if set, is told once per cgroup when counts of a container
	// Name was unsure of are folded under the name it had then (its
	// runtime did not answer within Settle): those series carry a bare id
	// and no pod for good. It is called with the Aggregator locked and
	// must not block.
	Unnamed func(pid uint32, cgroup uint64, l Labels)
}

// Aggregator folds Source snapshots into monotonic, bounded series.
type Aggregator struct {
	opts Options

	mu      sync.Mutex
	started bool
	gen     uint64
	prev    map[stat.Key]cellPrev
	prevErr map[errKey]uint64
	prevPC  map[uint32]ProcCounts
	first   map[uint64]*sighting // cgroups Name was unsure of
	final   bool                 // folding the last read of a generation
	scale   uint64               // the read's Snapshot.Scale, at least 1
	sigs    map[sigKey]uint64    // signals not folded yet
	ctrs    map[Labels]*ctr
	lost    mono // calls the full count table refused
	lostMem mono // calls no memory was found for
	ring    mono
	bpf     map[string]*mono
	bpfOn   bool
	cells   int
	// The source's reloads and the time they left untraced (Snapshot):
	// its own totals, which never go back.
	reloads  uint64
	untraced time.Duration
	inFlight uint64

	view atomic.Pointer[View]
}

// cellPrev is what a kernel cell held at the last read.
type cellPrev struct {
	count, total, errors uint64
	hist                 promHist
	nat                  natHist
}

// sighting is when a cgroup was first and last seen, and whether Unnamed
// was told of it.
type sighting struct {
	first, last time.Time
	told        bool
}

// forget is how long a cgroup is remembered once no count mentions it: a
// reload empties the kernel's table, and a cgroup seen again must not wait
// to be named all over.
const forget = 10 * time.Minute

type errKey struct {
	pid, nr uint32
	err     int
}

type sigKey struct {
	pid uint32
	cg  uint64
	sig int
}

// mono turns a counter that may restart from zero into one that never
// goes back.
type mono struct{ last, total uint64 }

func (m *mono) set(cur uint64) {
	if cur >= m.last {
		m.total += cur - m.last
	} else {
		m.total += cur
	}
	m.last = cur
}

type series struct {
	count, sumNS uint64
	buckets      [promBuckets]uint64
	native       [nativeBuckets]uint64
	errnos       map[string]uint64
	last         time.Time
}

type ctr struct {
	labels           Labels
	sys              map[string]*series
	faults, vsyscall uint64
	signals          map[string]uint64
	last             time.Time
}

// New returns an empty Aggregator.
func New(opts Options) *Aggregator {
	a := &Aggregator{opts: opts, prev: map[stat.Key]cellPrev{}, prevErr: map[errKey]uint64{},
		prevPC: map[uint32]ProcCounts{}, first: map[uint64]*sighting{}, sigs: map[sigKey]uint64{},
		ctrs: map[Labels]*ctr{}, bpf: map[string]*mono{}}
	a.view.Store(&View{})
	return a
}

// Signal counts a signal delivered to process pid in cgroup cg; it is
// folded, by that process's container, at the next Fold.
func (a *Aggregator) Signal(pid uint32, cg uint64, sig int) {
	a.mu.Lock()
	a.sigs[sigKey{pid, cg, sig}]++
	a.mu.Unlock()
}

// delta is what one container did since the last read.
type delta struct {
	sys      map[string]*sysDelta
	faults   uint64
	vsyscall uint64
	signals  map[string]uint64
	activity uint64 // calls plus ns in calls: the rank among newcomers
}

type sysDelta struct {
	count, total uint64
	hist         [promBuckets]uint64
	nat          [nativeBuckets]uint64
	errnos       map[string]uint64
}

func (d *delta) syscall(name string) *sysDelta {
	s := d.sys[name]
	if s == nil {
		s = &sysDelta{}
		d.sys[name] = s
	}
	return s
}

// labels names a process's container, or says to wait (ready false): the
// namer is unsure and the cgroup is younger than Settle.
func (a *Aggregator) labels(pid uint32, cg uint64, now time.Time) (Labels, bool) {
	l, sure := a.opts.Name(pid, cg)
	if l.Container == "" {
		l = Host
	}
	if sure {
		return l, true
	}
	f := a.first[cg]
	if f == nil {
		f = &sighting{first: now}
		a.first[cg] = f
	}
	f.last = now
	ready := a.final || now.Sub(f.first) >= a.opts.Settle
	if ready && !f.told && l != Host && a.opts.Unnamed != nil {
		f.told = true
		a.opts.Unnamed(pid, cg, l)
	}
	return l, ready
}

// Fold adds what changed since the last snapshot to the series and
// publishes a new View.
func (a *Aggregator) Fold(now time.Time, s Snapshot) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.final = s.Final
	a.scale = max(s.Scale, 1)
	if !a.started || s.Gen != a.gen {
		// New counters: every cell, errno and process starts from zero.
		a.started, a.gen = true, s.Gen
		a.prev = map[stat.Key]cellPrev{}
		a.prevErr = map[errKey]uint64{}
		a.prevPC = map[uint32]ProcCounts{}
		a.lost.last, a.lostMem.last, a.ring.last = 0, 0, 0
		for _, m := range a.bpf {
			m.last = 0
		}
	}
	pend := map[Labels]*delta{}
	get := func(l Labels) *delta {
		d := pend[l]
		if d == nil {
			d = &delta{sys: map[string]*sysDelta{}, signals: map[string]uint64{}}
			pend[l] = d
		}
		return d
	}

	live := make(map[stat.Key]bool, len(s.Cells))
	livePN := map[[2]uint32]bool{}
	fails := map[[2]uint32]*failGroup{}
	pidCg := map[uint32]uint64{}
	for i := range s.Cells {
		c := &s.Cells[i]
		live[c.Key] = true
		pn := [2]uint32{c.PID, c.Nr}
		livePN[pn] = true
		pidCg[c.PID] = c.Cgroup
		g := fails[pn]
		if g == nil {
			g = &failGroup{errnos: c.Errnos}
			fails[pn] = g
		}
		l, ready := a.labels(c.PID, c.Cgroup, now)
		if !ready {
			g.deferred = true
			continue // its counts stay in the kernel until the next read
		}
		p := a.prev[c.Key]
		if c.Count < p.count {
			// The kernel made the cell anew: all it holds is new.
			p = cellPrev{}
		}
		cur := cellPrev{count: c.Count, total: c.Total, errors: c.Errors, hist: fold(&c.Hist), nat: foldNative(&c.Hist)}
		a.prev[c.Key] = cur
		name := event.SyscallName(a.opts.Arch, c.Nr)
		if cur.count != p.count {
			d := get(l)
			sd := d.syscall(name)
			var h [promBuckets]uint64
			for j := range cur.hist {
				h[j] = uint64(cur.hist[j] - p.hist[j]) // modulo 2^32: see promHist
			}
			// Budgeted timing weighs the timed calls by what they stand
			// for, so the buckets sum to about the count, not to it: the
			// count is exact, and the buckets are spread to match it, as a
			// histogram's +Inf bucket must be.
			cnt := cur.count - p.count
			spread(&h, cnt, &cur.hist)
			var nh [nativeBuckets]uint64
			for j := range cur.nat {
				nh[j] = uint64(cur.nat[j] - p.nat[j])
			}
			spreadSlice(nh[:], cnt, cur.nat[:])
			n := cnt * a.scale
			for j := range h {
				sd.hist[j] += h[j] * a.scale
			}
			for j := range nh {
				sd.nat[j] += nh[j] * a.scale
			}
			sd.count += n
			t := cur.total - p.total
			if cur.total < p.total {
				t = cur.total
			}
			t *= a.scale
			sd.total += t
			d.activity += n + t
		}
		errs := cur.errors - p.errors
		if cur.errors < p.errors {
			errs = cur.errors
		}
		g.cells = append(g.cells, failCell{errs: errs, sd: func() *sysDelta { return get(l).syscall(name) }})
	}
	for pn, g := range fails {
		a.foldErrnos(pn, g)
	}
	for k := range a.prev {
		if !live[k] {
			delete(a.prev, k)
		}
	}
	for k := range a.prevErr {
		if !livePN[[2]uint32{k.pid, k.nr}] {
			delete(a.prevErr, k)
		}
	}

	for pid, pc := range s.Procs {
		cg := pidCg[pid]
		l, ready := a.labels(pid, cg, now)
		if !ready {
			continue
		}
		p := a.prevPC[pid]
		if pc.Faults < p.Faults {
			p.Faults = 0
		}
		if pc.Vsyscalls < p.Vsyscalls {
			p.Vsyscalls = 0
		}
		if pc.Faults != p.Faults || pc.Vsyscalls != p.Vsyscalls {
			d := get(l)
			d.faults += pc.Faults - p.Faults
			d.vsyscall += pc.Vsyscalls - p.Vsyscalls
		}
		a.prevPC[pid] = pc
	}
	for pid := range a.prevPC {
		if _, ok := s.Procs[pid]; !ok {
			delete(a.prevPC, pid)
		}
	}

	for k, n := range a.sigs {
		l, ready := a.labels(k.pid, k.cg, now)
		if !ready {
			continue
		}
		get(l).signals[signalLabel(k.sig)] += n
		delete(a.sigs, k)
	}
	for cg, f := range a.first {
		if now.Sub(f.last) >= forget {
			delete(a.first, cg)
		}
	}

	a.evictContainers(now, pend)
	a.apply(now, pend)
	a.evictSyscalls(now)

	a.lost.set(s.Lost.Full)
	a.lostMem.set(s.Lost.NoMem)
	a.ring.set(s.RingDrops)
	a.bpfOn = s.BPF != nil
	for name, d := range s.BPF {
		m := a.bpf[name]
		if m == nil {
			m = &mono{}
			a.bpf[name] = m
		}
		m.set(uint64(d))
	}
	a.cells = len(s.Cells)
	a.reloads, a.untraced = max(a.reloads, s.Reloads), max(a.untraced, s.Untraced)
	a.inFlight = max(a.inFlight, s.InFlight)
	a.publish(now)
}

// failGroup is the cells of one (process, syscall) pair: the kernel keys
// errnos by the pair, not by cgroup, so a process that moved has several
// cells sharing one set of errno counts.
type failGroup struct {
	errnos   map[int]uint64
	cells    []failCell
	deferred bool
}

type failCell struct {
	errs uint64 // failures since the last read
	sd   func() *sysDelta
}

// foldErrnos hands the pair's new errno counts to its cells as their
// failures since the last read say: exact whenever one cell failed.
func (a *Aggregator) foldErrnos(pn [2]uint32, g *failGroup) {
	if g.deferred || len(g.cells) == 0 {
		return // all of it, next time
	}
	sort.SliceStable(g.cells, func(i, j int) bool { return g.cells[i].errs > g.cells[j].errs })
	errnos := make([]int, 0, len(g.errnos))
	for e := range g.errnos {
		errnos = append(errnos, e)
	}
	sort.Ints(errnos)
	for _, e := range errnos {
		n := g.errnos[e]
		k := errKey{pn[0], pn[1], e}
		pv := a.prevErr[k]
		if n < pv {
			pv = 0
		}
		a.prevErr[k] = n
		left := n - pv
		give := func(c *failCell, n uint64) {
			sd := c.sd()
			if sd.errnos == nil {
				sd.errnos = map[string]uint64{}
			}
			sd.errnos[errnoLabel(e)] += n * a.scale
		}
		for i := range g.cells {
			if take := min(left, g.cells[i].errs); take > 0 {
				g.cells[i].errs -= take
				left -= take
				give(&g.cells[i], take)
			}
		}
		if left > 0 { // the counts disagree (a cell reset): the busiest failer takes the rest
			give(&g.cells[0], left)
		}
	}
}

// apply adds the deltas to the series, admitting newcomers busiest first
// while there is room and folding the rest into Other.
func (a *Aggregator) apply(now time.Time, pend map[Labels]*delta) {
	var fresh []Labels
	for l := range pend {
		if _, ok := a.ctrs[l]; !ok && l != Host && l != Other {
			fresh = append(fresh, l)
		}
	}
	sort.Slice(fresh, func(i, j int) bool {
		x, y := pend[fresh[i]].activity, pend[fresh[j]].activity
		if x != y {
			return x > y
		}
		return less(fresh[i], fresh[j])
	})
	room := a.opts.MaxContainers - a.containers()
	target := map[Labels]Labels{}
	for _, l := range fresh {
		if room > 0 {
			room--
			continue
		}
		if v, ok := a.idlest(now, pend); ok {
			delete(a.ctrs, v)
			continue
		}
		target[l] = Other
	}
	// Apply in a fixed order so that which syscalls win a slot does not
	// depend on map order.
	order := make([]Labels, 0, len(pend))
	for l := range pend {
		order = append(order, l)
	}
	sort.Slice(order, func(i, j int) bool { return less(order[i], order[j]) })
	for _, l := range order {
		d := pend[l]
		to := l
		if t, ok := target[l]; ok {
			to = t
		}
		c := a.ctrs[to]
		if c == nil {
			c = &ctr{labels: to, sys: map[string]*series{}, signals: map[string]uint64{}}
			a.ctrs[to] = c
		}
		a.merge(now, c, d)
	}
}

// idlest is the container holding a slot that has been idle longest, if
// for at least Reclaim and not busy now.
func (a *Aggregator) idlest(now time.Time, pend map[Labels]*delta) (Labels, bool) {
	var v Labels
	var last time.Time
	found := false
	for l, c := range a.ctrs {
		if _, busy := pend[l]; busy || l == Host || l == Other {
			continue
		}
		if !found || c.last.Before(last) || (c.last.Equal(last) && less(l, v)) {
			v, last, found = l, c.last, true
		}
	}
	return v, found && a.opts.Reclaim > 0 && now.Sub(last) >= a.opts.Reclaim
}

// idlestSyscall is the syscall of c idle longest, if for at least Reclaim.
func (a *Aggregator) idlestSyscall(now time.Time, c *ctr) (string, bool) {
	var v string
	var last time.Time
	for n, s := range c.sys {
		if n == OtherSyscall {
			continue
		}
		if v == "" || s.last.Before(last) || (s.last.Equal(last) && n < v) {
			v, last = n, s.last
		}
	}
	return v, v != "" && a.opts.Reclaim > 0 && now.Sub(last) >= a.opts.Reclaim
}

// containers counts the containers holding a slot.
func (a *Aggregator) containers() int {
	n := 0
	for l := range a.ctrs {
		if l != Host && l != Other {
			n++
		}
	}
	return n
}

func (a *Aggregator) merge(now time.Time, c *ctr, d *delta) {
	names := make([]string, 0, len(d.sys))
	for n := range d.sys {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		x, y := d.sys[names[i]], d.sys[names[j]]
		if x.count+x.total != y.count+y.total {
			return x.count+x.total > y.count+y.total
		}
		return names[i] < names[j]
	})
	used := len(c.sys)
	if _, ok := c.sys[OtherSyscall]; ok {
		used--
	}
	active := false
	for _, n := range names {
		sd := d.sys[n]
		s := c.sys[n]
		if s == nil {
			if used < a.opts.MaxSyscalls {
				used++
			} else if v, ok := a.idlestSyscall(now, c); ok {
				delete(c.sys, v)
			} else {
				n = OtherSyscall
			}
			if s = c.sys[n]; s == nil {
				s = &series{}
				c.sys[n] = s
			}
		}
		s.count += sd.count
		s.sumNS += sd.total
		for j, x := range sd.hist {
			s.buckets[j] += x
		}
		for j, x := range sd.nat {
			s.native[j] += x
		}
		for e, x := range sd.errnos {
			if s.errnos == nil {
				s.errnos = map[string]uint64{}
			}
			s.errnos[e] += x
		}
		s.last = now
		active = true
	}
	c.faults += d.faults
	c.vsyscall += d.vsyscall
	for sig, n := range d.signals {
		c.signals[sig] += n
	}
	if active || d.faults > 0 || d.vsyscall > 0 || len(d.signals) > 0 {
		c.last = now
	}
}

// evictContainers removes the containers idle for Grace, before newcomers
// are admitted: one gone (or quiet) for that long gives its slot away.
func (a *Aggregator) evictContainers(now time.Time, pend map[Labels]*delta) {
	if a.opts.Grace <= 0 {
		return
	}
	for l, c := range a.ctrs {
		// Other holds no slot; it goes after the newcomers folded into it.
		if _, busy := pend[l]; !busy && l != Host && l != Other && now.Sub(c.last) >= a.opts.Grace {
			delete(a.ctrs, l)
		}
	}
}

// evictSyscalls removes the syscalls a container has not made for Grace,
// and Other when no container has been folded into it for as long.
func (a *Aggregator) evictSyscalls(now time.Time) {
	if a.opts.Grace <= 0 {
		return
	}
	if c, ok := a.ctrs[Other]; ok && now.Sub(c.last) >= a.opts.Grace {
		delete(a.ctrs, Other)
	}
	for _, c := range a.ctrs {
		for n, s := range c.sys {
			if now.Sub(s.last) >= a.opts.Grace {
				delete(c.sys, n)
			}
		}
	}
}

func less(x, y Labels) bool {
	if x.Container != y.Container {
		return x.Container < y.Container
	}
	if x.Namespace != y.Namespace {
		return x.Namespace < y.Namespace
	}
	return x.Pod < y.Pod
}

func errnoLabel(e int) string {
	if n := event.ErrnoName(e); n != "" {
		return n
	}
	return "E" + strconv.Itoa(e)
}

func signalLabel(sig int) string {
	if n := event.SignalName(sig); n != "" {
		return n
	}
	return "SIG" + strconv.Itoa(sig)
}

// spread scales h to sum to n, keeping its shape (largest remainders get
// the rounding). Calls none of which was timed take the shape of all the
// cell's timed calls so far (all), or, with none, the last bucket: their
// latency is unknown.
func spread(h *[promBuckets]uint64, n uint64, all *promHist) { spreadSlice(h[:], n, all[:]) }

// spreadSlice is spread for any bucket layout; h and all have one length.
func spreadSlice(h []uint64, n uint64, all []uint32) {
	var sum uint64
	for _, x := range h {
		sum += x
	}
	if sum == n {
		return
	}
	// On the stack: this runs for most cells of most reads under budgeted
	// timing. Both layouts fit in nativeBuckets.
	var shapeBuf, remBuf [max(nativeBuckets, promBuckets)]uint64
	shape := shapeBuf[:len(h)]
	copy(shape, h)
	if sum == 0 {
		for j, x := range all {
			shape[j] = uint64(x)
			sum += uint64(x)
		}
	}
	clear(h)
	if sum == 0 {
		h[len(h)-1] = n
		return
	}
	rem := remBuf[:len(h)]
	var given uint64
	for j, x := range shape {
		v := x * n // n and the bucket counts of one read stay far below 2^32
		h[j] = v / sum
		rem[j] = v % sum
		given += h[j]
	}
	for ; given < n; given++ {
		best := 0
		for j := range rem {
			if rem[j] > rem[best] {
				best = j
			}
		}
		h[best]++
		rem[best] = 0
	}
}
