package htmlreport

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/profile"
	"github.com/sysray/sysray/internal/stat"
)

// Names says who a process is, from the capture's process and container
// tables, asked once per process when the report is built.
type Names struct {
	// Container names pid's container, "" for the host.
	Container func(pid uint32, cgroup uint64) string
	// Command is pid's command line, "" if unknown.
	Command func(pid uint32) string
}

// Limits bound what reaches the page, so its size does not grow with the
// capture's. The zero value means the defaults.
type Limits struct {
	SlowCalls  int // slowest syscalls on the timeline
	Marks      int // faults, signals, exec and exit on the timeline, of each class (the first and the last)
	Lanes      int // threads on the timeline
	Processes  int // processes per container in the table; the rest share one row
	HeatSeries int // syscalls with a heatmap of their own
}

func (l *Limits) fill() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.SlowCalls, 3000)
	def(&l.Marks, 600)
	def(&l.Lanes, 200)
	def(&l.Processes, 300)
	def(&l.HeatSeries, 24)
}

// Builder aggregates events into a report's data. Feed it every event of a
// capture in order with Observe, then call Data.
type Builder struct {
	arch   event.Arch
	names  Names
	limits Limits

	seen        bool
	first, last uint64
	events      uint64
	byKind      map[event.Kind]uint64
	dropEvents  uint64
	stacks      uint64

	cells   map[cellKey]*cell
	procs   map[uint32]*procState
	threads map[uint32]*Thread
	heat    heat
	tl      timeline
	// ns in calls without a record of their sleeps (on CPU at most), by
	// latency bucket: those as slow as a recorded call are left out at the
	// end, since the probe did not say where they slept.
	onCPU      map[cellKey]*stat.Hist
	slowestCut uint64                    // the fastest call with a record: about the recording's --slow
	onStack    map[string]*profile.Stack // ns on CPU in calls with one, by stack
	offCPU     map[string]*profile.Stack // ns asleep, by stack
}

type cellKey struct{ pid, nr uint32 }

type cell struct {
	count, errors, time, max uint64
	hist                     stat.Hist
	errnos                   map[int64]uint64
}

type procState struct {
	comm   string
	cgroup uint64
}

// New starts a report of events from a host of arch.
func New(arch event.Arch, names Names, limits Limits) *Builder {
	limits.fill()
	return &Builder{arch: arch, names: names, limits: limits,
		byKind: map[event.Kind]uint64{}, cells: map[cellKey]*cell{}, procs: map[uint32]*procState{},
		threads: map[uint32]*Thread{}, heat: newHeat(), tl: newTimeline(limits),
		onCPU: map[cellKey]*stat.Hist{}, onStack: map[string]*profile.Stack{}, offCPU: map[string]*profile.Stack{}}
}

// Observe counts one event.
func (b *Builder) Observe(e *event.Event) {
	b.events++
	b.byKind[e.Kind]++
	if e.Kind == event.KindDrop {
		b.dropEvents += e.Drop.Count
		return
	}
	if !b.seen || e.Time < b.first {
		b.first = e.Time
		if !b.seen {
			b.heat.t0 = e.Time
		}
		b.seen = true
	}
	if end := e.End(); end > b.last {
		b.last = end
	}
	p := b.procs[e.PID]
	if p == nil {
		p = &procState{}
		b.procs[e.PID] = p
	}
	if e.Comm != "" && e.TID == e.PID {
		p.comm = e.Comm
	} else if p.comm == "" {
		p.comm = e.Comm
	}
	p.cgroup = e.Cgroup
	t := b.threads[e.TID]
	if t == nil {
		t = &Thread{TID: e.TID}
		b.threads[e.TID] = t
	}
	t.PID = e.PID
	if e.Comm != "" {
		t.Comm = e.Comm
	}
	if e.Kind == event.KindSyscall {
		b.syscall(e)
	}
	b.tl.observe(e, b.arch)
}

func (b *Builder) syscall(e *event.Event) {
	s := &e.Syscall
	k := cellKey{e.PID, s.Nr}
	c := b.cells[k]
	if c == nil {
		c = &cell{}
		b.cells[k] = c
	}
	c.count++
	c.time += s.Latency
	c.max = max(c.max, s.Latency)
	c.hist.Add(s.Latency)
	if s.Failed() {
		c.errors++
		if c.errnos == nil {
			c.errnos = map[int64]uint64{}
		}
		c.errnos[-s.Ret]++
	}
	b.heat.add(s.Nr, e.Time, s.Latency)

	var slept uint64
	for _, sl := range s.Sleeps {
		slept += sl.Duration
	}
	// A call slower than the recording's --slow carries its stacks and
	// every place it slept: its time on CPU is known. For the others it is
	// at most their latency (they may have slept briefly).
	recorded := len(s.Sleeps) > 0 || len(s.UserStack) > 0
	if recorded {
		b.stacks++
		if b.slowestCut == 0 || s.Latency < b.slowestCut {
			b.slowestCut = s.Latency
		}
	}
	on := s.Latency - min(slept, s.Latency)
	name := event.SyscallName(b.arch, s.Nr)
	user := userFrames(s.UserStack)
	// A call cut off by an exit or the capture's end carries no record
	// of its sleeps, and may have slept all along: it is left out.
	switch {
	case on == 0 || s.Unfinished:
	case recorded:
		add(b.onStack, profile.Stack{PID: e.PID, Comm: e.Comm, User: user, Kernel: []string{name}}, on)
	default:
		h := b.onCPU[k]
		if h == nil {
			h = &stat.Hist{}
			b.onCPU[k] = h
		}
		h[stat.Bucket(s.Latency)] += on
	}
	for _, sl := range s.Sleeps {
		st := profile.Stack{PID: e.PID, Comm: e.Comm, User: user}
		for i := len(sl.Stack) - 1; i >= 0; i-- {
			st.Kernel = append(st.Kernel, frameName(sl.Stack[i]))
		}
		if len(st.Kernel) == 0 {
			st.Kernel = []string{name}
		}
		if sl.Preempted {
			st.Kernel = append(st.Kernel, "(runnable, waiting for a CPU)")
		}
		add(b.offCPU, st, sl.Duration)
	}
}

func userFrames(fs []event.Frame) []string {
	if len(fs) == 0 {
		return nil
	}
	out := make([]string, 0, len(fs))
	for i := len(fs) - 1; i >= 0; i-- {
		out = append(out, frameName(fs[i]))
	}
	return out
}

// frameName names a frame by its function, without the offset in it
// ("schedule+0x23" is "schedule"), so that a flame graph merges the calls a
// function makes from different places, as flame graphs do.
func frameName(f event.Frame) string {
	if f.Name == "" {
		return fmt.Sprintf("%#x", f.Addr)
	}
	i := strings.Index(f.Name, "+0x")
	if i <= 0 {
		return f.Name
	}
	j := i + 3
	for j < len(f.Name) && strings.IndexByte("0123456789abcdef", f.Name[j]) >= 0 {
		j++
	}
	return f.Name[:i] + f.Name[j:]
}

func add(m map[string]*profile.Stack, s profile.Stack, ns uint64) {
	if ns == 0 {
		return
	}
	key := strings.Join(s.Frames(), "\x00")
	if a := m[key]; a != nil {
		a.Count += ns
		return
	}
	s.Count = ns
	m[key] = &s
}

// Data returns what the page shows. meta is completed with what the
// events said; rep, if not nil, is the doctor's report on the same events.
func (b *Builder) Data(meta Meta, rep *doctor.Report) *Data {
	var findings []doctor.Finding
	near := []doctor.Near{}
	if rep != nil {
		findings = rep.Findings
		if rep.Near != nil {
			near = rep.Near
		}
	}
	meta.Events = b.events
	meta.First = b.first
	if b.last > b.first {
		meta.Span = b.last - b.first
	}
	meta.ByKind = map[string]uint64{}
	for k, n := range b.byKind {
		meta.ByKind[k.String()] = n
	}
	meta.DropEvents = b.dropEvents
	meta.Stacks = b.stacks
	if findings == nil {
		findings = []doctor.Finding{}
	}
	d := &Data{Meta: meta, Findings: findings, Near: near}
	d.Containers = b.containers()
	if d.Containers == nil {
		d.Containers = []Container{}
	}
	d.Heatmap = b.heat.data(b.arch, b.limits.HeatSeries)
	d.Heatmap.T0 = b.heat.t0 - b.first
	d.Timeline = b.tl.data(b.first, b.threads, b.limits.Lanes)
	d.Flame = b.flames()
	return d
}

func (b *Builder) containers() []Container {
	type proc struct {
		Process
		nrs map[uint32]*cell
	}
	byName := map[string][]*proc{}
	procs := map[uint32]*proc{}
	for k, c := range b.cells {
		p := procs[k.pid]
		if p == nil {
			st := b.procs[k.pid]
			p = &proc{Process: Process{PID: k.pid, Comm: st.comm}, nrs: map[uint32]*cell{}}
			if b.names.Command != nil {
				p.Cmd = clip(b.names.Command(k.pid), maxCmd)
			}
			name := ""
			if b.names.Container != nil {
				name = b.names.Container(k.pid, st.cgroup)
			}
			procs[k.pid] = p
			byName[name] = append(byName[name], p)
		}
		p.nrs[k.nr] = c
	}
	for _, t := range b.threads {
		if p := procs[t.PID]; p != nil {
			p.Threads++
		}
	}
	var out []Container
	for name, ps := range byName {
		ctr := Container{Name: name}
		all := map[uint32]*cell{}
		for _, p := range ps {
			p.Syscalls, p.Stats = b.rows(p.nrs)
			merge(all, p.nrs)
		}
		_, ctr.Stats = b.rows(all)
		sort.Slice(ps, func(i, j int) bool {
			if ps[i].Time != ps[j].Time {
				return ps[i].Time > ps[j].Time
			}
			return ps[i].PID < ps[j].PID
		})
		rest := map[uint32]*cell{}
		for i, p := range ps {
			if i < b.limits.Processes {
				ctr.Procs = append(ctr.Procs, p.Process)
				continue
			}
			ctr.Omitted++
			merge(rest, p.nrs)
		}
		if ctr.Omitted > 0 {
			other := Process{Comm: fmt.Sprintf("(%d other processes)", ctr.Omitted)}
			other.Syscalls, other.Stats = b.rows(rest)
			ctr.Procs = append(ctr.Procs, other)
		}
		out = append(out, ctr)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Time != out[j].Time {
			return out[i].Time > out[j].Time
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func merge(into map[uint32]*cell, from map[uint32]*cell) {
	for nr, c := range from {
		a := into[nr]
		if a == nil {
			a = &cell{}
			into[nr] = a
		}
		a.merge(c)
	}
}

func (a *cell) merge(c *cell) {
	a.count += c.count
	a.errors += c.errors
	a.time += c.time
	a.max = max(a.max, c.max)
	a.hist.Merge(&c.hist)
	for e, n := range c.errnos {
		if a.errnos == nil {
			a.errnos = map[int64]uint64{}
		}
		a.errnos[e] += n
	}
}

// rows is one row per syscall, most time first, and their sum.
func (b *Builder) rows(cells map[uint32]*cell) ([]SyscallRow, Stats) {
	var total cell
	rows := make([]SyscallRow, 0, len(cells))
	for nr, c := range cells {
		rows = append(rows, SyscallRow{Name: event.SyscallName(b.arch, nr), Stats: stats(c)})
		total.merge(c)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Time != rows[j].Time {
			return rows[i].Time > rows[j].Time
		}
		return rows[i].Name < rows[j].Name
	})
	return rows, stats(&total)
}

func stats(c *cell) Stats {
	s := Stats{Count: c.count, Errors: c.errors, Time: c.time, Max: c.max,
		P50: c.hist.Quantile(0.5, c.max), P99: c.hist.Quantile(0.99, c.max)}
	for e, n := range c.errnos {
		if s.Errnos == nil {
			s.Errnos = map[string]uint64{}
		}
		s.Errnos[event.ErrnoName(int(e))] += n
	}
	return s
}

func (b *Builder) flames() Flames {
	var on, bound []profile.Stack
	cut := stat.Buckets
	if b.slowestCut > 0 {
		cut = stat.Bucket(b.slowestCut)
	}
	for k, h := range b.onCPU {
		var ns uint64
		for i := range cut {
			ns += h[i]
		}
		if ns == 0 {
			continue
		}
		bound = append(bound, profile.Stack{PID: k.pid, Comm: b.procs[k.pid].comm,
			Kernel: []string{event.SyscallName(b.arch, k.nr)}, Count: ns})
	}
	for _, s := range b.onStack {
		on = append(on, *s)
	}
	var off []profile.Stack
	for _, s := range b.offCPU {
		off = append(off, *s)
	}
	return Flames{OnCPU: fold(on, bound), OffCPU: fold(off, nil)}
}
