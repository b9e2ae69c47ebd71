package export

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/sysray/sysray/internal/event"
)

// span is one syscall of a thread, entry to return.
type span struct{ start, end uint64 }

// threadID names a thread by process too: a thread id freed by one process
// may be handed to another later in a long capture.
type threadID struct{ pid, tid uint32 }

// callKey names one syscall across the two passes.
type callKey struct {
	thread     threadID
	start, end uint64
}

type threadPlan struct {
	comm  string
	calls []span // first pass only
	track *Track
	lanes []*Track // lanes[i] is lane i+1
}

type procPlan struct {
	pid      uint32
	comm     string // the leader's last name
	other    string // another thread's, for a process whose leader was not seen
	cmdline  []string
	label    string
	labelled bool
	buckets  map[uint64]int64 // syscall entries per rate bucket
	track    *Track
	counter  *Track
}

// wake is a syscall that slept and the thread that last woke it.
type wake struct {
	waker threadID
	woken callKey
}

// plan is what the first pass learns.
type plan struct {
	bucket      uint64
	first, last uint64
	seen        bool
	threads     map[threadID]*threadPlan
	procs       map[uint32]*procPlan
	wakes       []wake
	lane        map[callKey][]int // calls off their thread's track: their lanes
	flowOut     map[callKey][]uint64
	flowIn      map[callKey][]uint64
	nextFlow    uint64
	wakeFlows   int
	drops       bool
	global      *Track
	tracks      []*Track
}

func newPlan(src *Source, bucket uint64) *plan {
	p := &plan{
		bucket:  bucket,
		threads: map[threadID]*threadPlan{},
		procs:   map[uint32]*procPlan{},
		lane:    map[callKey][]int{},
		flowOut: map[callKey][]uint64{},
		flowIn:  map[callKey][]uint64{},
	}
	for _, pi := range src.Procs {
		pp := p.proc(pi.PID)
		pp.comm, pp.cmdline = pi.Comm, pi.Cmdline
	}
	return p
}

func (p *plan) proc(pid uint32) *procPlan {
	pp := p.procs[pid]
	if pp == nil {
		pp = &procPlan{pid: pid, buckets: map[uint64]int64{}}
		p.procs[pid] = pp
	}
	return pp
}

// observe is the first pass's look at one event.
func (p *plan) observe(src *Source, e *event.Event) {
	if !p.seen || e.Time < p.first {
		p.first = e.Time
	}
	if end := e.End(); !p.seen || end > p.last {
		p.last = end
	}
	p.seen = true
	if e.Kind == event.KindDrop {
		p.drops = true
		return
	}
	pp := p.proc(e.PID)
	id := threadID{e.PID, e.TID}
	t := p.threads[id]
	if t == nil {
		t = &threadPlan{}
		p.threads[id] = t
	}
	if e.Comm != "" {
		t.comm = e.Comm
		if e.TID == e.PID {
			pp.comm = e.Comm
		} else {
			pp.other = e.Comm
		}
	}
	if e.Kind == event.KindExec {
		pp.cmdline = e.Proc.Argv
		pp.labelled = false // the exec may have entered a container
	}
	if !pp.labelled && src.Container != nil {
		if l := src.Container(e.PID, e.Cgroup); l != "" {
			pp.label = l
		}
		pp.labelled = true
	}
	if e.Kind != event.KindSyscall {
		return
	}
	s := &e.Syscall
	t.calls = append(t.calls, span{e.Time, e.End()})
	pp.buckets[e.Time/p.bucket]++
	var last threadID
	for _, sl := range s.Sleeps {
		waker := threadID{sl.WakerPID, sl.WakerTID}
		if sl.WakerTID == 0 || waker == id || waker == last {
			continue
		}
		last = waker
		p.wakes = append(p.wakes, wake{waker, callKey{id, e.Time, e.End()}})
	}
}

// finish lays out the tracks, the lanes and the wake flows.
func (p *plan) finish() {
	for id, t := range p.threads {
		slices.SortFunc(t.calls, func(a, b span) int {
			return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.end, b.end))
		})
		t.lanes = make([]*Track, p.assignLanes(id, t.calls))
	}
	p.linkWakes()
	for _, t := range p.threads {
		t.calls = nil
	}

	var uuid uint64
	next := func() uint64 { uuid++; return uuid }
	pids := make([]uint32, 0, len(p.procs))
	for pid := range p.procs {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	byPID := map[uint32][]uint32{}
	for id := range p.threads {
		byPID[id.pid] = append(byPID[id.pid], id.tid)
	}
	for _, pid := range pids {
		pp := p.procs[pid]
		if len(byPID[pid]) == 0 {
			continue // in the header's table, but did nothing we saw
		}
		name := cmp.Or(pp.comm, pp.other)
		pt := &Track{UUID: next(), Kind: TrackProcess, PID: pid, Name: name, Cmdline: pp.cmdline}
		if pp.label != "" {
			pt.Labels = []string{pp.label}
			pt.Name = fmt.Sprintf("%s [%s]", name, pp.label)
		}
		pp.track = pt
		p.tracks = append(p.tracks, pt)
		slices.Sort(byPID[pid])
		for _, tid := range byPID[pid] {
			t := p.threads[threadID{pid, tid}]
			t.track = &Track{UUID: next(), Parent: pt.UUID, Kind: TrackThread, PID: pid, TID: tid, Name: t.comm}
			p.tracks = append(p.tracks, t.track)
			for i := range t.lanes {
				t.lanes[i] = &Track{UUID: next(), Parent: t.track.UUID, Kind: TrackLane, PID: pid, TID: tid, Lane: i + 1,
					Name: fmt.Sprintf("%s %d: overlapping calls (lane %d)", t.comm, tid, i+1)}
				p.tracks = append(p.tracks, t.lanes[i])
			}
		}
		if len(pp.buckets) > 0 {
			pp.counter = &Track{UUID: next(), Parent: pt.UUID, Kind: TrackCounter, PID: pid, Name: "syscalls/s", Unit: "calls/s"}
			p.tracks = append(p.tracks, pp.counter)
		}
	}
	if p.drops {
		p.global = &Track{UUID: next(), Kind: TrackGlobal, Name: "sysray: events lost in the kernel"}
		p.tracks = append(p.tracks, p.global)
	}
}

// assignLanes keeps a thread's track properly nested: a call that begins
// before the previous one on a lane has ended (or at the very moment it
// ends, which a viewer may order either way) moves to the first lane where
// it does not. A thread's calls do not overlap, so lanes are only needed
// for times that are approximate (the doctor's budgeted timing) or damaged.
// Zero-length calls are instants and nest anywhere. It returns the number
// of extra lanes.
func (p *plan) assignLanes(id threadID, calls []span) int {
	var ends []uint64 // per lane, the end of its last call
	for i, c := range calls {
		if c.end == c.start {
			continue
		}
		l := 0
		for l < len(ends) && ends[l] >= c.start {
			l++
		}
		if l == len(ends) {
			ends = append(ends, 0)
		}
		ends[l] = c.end
		// Calls with the same times (sorted next to each other) share a
		// key, so each takes the next lane listed for it, lane 0 included.
		same := i > 0 && calls[i-1] == c || i+1 < len(calls) && calls[i+1] == c
		if l > 0 || same {
			k := callKey{id, c.start, c.end}
			p.lane[k] = append(p.lane[k], l)
		}
	}
	return max(len(ends)-1, 0)
}

// linkWakes turns each "woken by" into a flow from the waker's syscall that
// was running while the woken call slept. A waker with no such call (a
// timer or an interrupt that happened to land on it) gets no flow: the
// woken call still says who woke it in its arguments.
func (p *plan) linkWakes() {
	for _, w := range p.wakes {
		t := p.threads[w.waker]
		if t == nil {
			continue
		}
		// The waker's last call that began before the woken call returned.
		i, _ := slices.BinarySearchFunc(t.calls, w.woken.end, func(c span, end uint64) int {
			return cmp.Compare(c.start, end)
		})
		if i == 0 {
			continue
		}
		c := t.calls[i-1]
		if c.end < w.woken.start {
			continue // it had returned before the woken call began
		}
		p.nextFlow++
		id := p.nextFlow
		src := callKey{w.waker, c.start, c.end}
		p.flowOut[src] = append(p.flowOut[src], id)
		p.flowIn[w.woken] = append(p.flowIn[w.woken], id)
		p.wakeFlows++
	}
	p.wakes = nil
}
