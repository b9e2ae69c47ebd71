package htmlreport

import (
	"container/heap"
	"sort"
	"unicode/utf8"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/output"
)

// timeline keeps what a per-thread timeline draws: the slowest syscalls,
// and the first of the rarer events (a crash's signal, an exec, an exit),
// which matter more than their number.
type timeline struct {
	limits Limits
	slow   slowest
	// Calls cut off by their thread's end (workers parked until their
	// process exits) have a tenth of the places, so that a pool of them
	// does not take every one.
	open  slowest
	marks [nClasses]sample
	total map[string]uint64
}

type cand struct {
	tid, pid uint32
	t, d     uint64
	kind     string
	err      bool
	open     bool
	crash    bool // a signal a fault raises, or one that kills outright
	label    string
}

// slowest is a min-heap by latency: its root is the first to give way.
type slowest []cand

func (h slowest) Len() int           { return len(h) }
func (h slowest) Less(i, j int) bool { return h[i].d < h[j].d }

// keep keeps c if it is among the n slowest.
func (h *slowest) keep(c cand, n int, arch event.Arch, e *event.Event) {
	if n <= 0 || len(*h) == n && c.d <= (*h)[0].d {
		return
	}
	c.err, c.label = e.Syscall.Failed(), label(e, arch)
	if len(*h) < n {
		heap.Push(h, c)
		return
	}
	(*h)[0] = c
	heap.Fix(h, 0)
}
func (h slowest) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *slowest) Push(x any)   { *h = append(*h, x.(cand)) }
func (h *slowest) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newTimeline(l Limits) timeline {
	return timeline{limits: l, total: map[string]uint64{}}
}

// Paths and argv can be long: an item's text, and a command line in the
// table, are cut to this many bytes.
const (
	maxLabel = 200
	maxCmd   = 400
)

func label(e *event.Event, arch event.Arch) string { return clip(output.Body(e, arch), maxLabel) }

// clip cuts s to at most n bytes, at a character boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// The rarer events are kept by class, so that a thousand threads exiting
// together cannot crowd out one crash.
const (
	classCrash    = iota // signals faults raise, and aborts
	classSignal          // other signals
	classExec            //
	classExit            // a process's last thread
	classThread          // other threads' exits
	classFault           // page faults
	classVsyscall        // vsyscall emulations
	nClasses
)

// sample keeps the first and the last events of a class: how a run began
// and how it ended.
type sample struct {
	first, last []cand
	next        int // where the next of the last goes
}

func (s *sample) add(c cand, n int) {
	switch {
	case len(s.first) < (n+1)/2:
		s.first = append(s.first, c)
	case len(s.last) < n/2:
		s.last = append(s.last, c)
	case n/2 > 0:
		s.last[s.next] = c
		s.next = (s.next + 1) % len(s.last)
	}
}

func (s *sample) all() []cand { return append(append([]cand{}, s.first...), s.last...) }

func (tl *timeline) observe(e *event.Event, arch event.Arch) {
	var kind string
	var class int
	switch e.Kind {
	case event.KindSyscall:
		tl.total["syscall"]++
		c := cand{tid: e.TID, pid: e.PID, t: e.Time, d: e.Syscall.Latency, kind: "syscall", open: e.Syscall.Unfinished}
		if c.open {
			tl.open.keep(c, tl.limits.SlowCalls/10, arch, e)
		} else {
			tl.slow.keep(c, tl.limits.SlowCalls, arch, e)
		}
		return
	case event.KindSignalGenerate, event.KindSignalDeliver:
		kind, class = "signal", classSignal
		if crashSignal(e.Signal.Sig) {
			class = classCrash
		}
	case event.KindExec:
		kind, class = "exec", classExec
	case event.KindExit:
		kind, class = "exit", classThread
		if e.Proc.GroupDead {
			class = classExit
		}
	case event.KindPageFault:
		kind, class = "fault", classFault
	case event.KindVsyscall:
		kind, class = "vsyscall", classVsyscall
	default:
		return
	}
	tl.total[kind]++
	tl.marks[class].add(cand{tid: e.TID, pid: e.PID, t: e.Time, kind: kind, crash: class == classCrash, label: label(e, arch)},
		tl.limits.Marks)
}

// data lays the kept events out on lanes, one per thread. With more
// threads than lanes, those that took a fault signal (SIGSEGV and the like)
// keep theirs first, then those with the most at stake: the time of their
// finished slow calls, and a fixed weight per exec, signal or fault.
// A call cut off by its thread's end weighs little: a pool of threads
// parked until the process exits is one story, not a thousand.
func (tl *timeline) data(first uint64, threads map[uint32]*Thread, lanes int) Timeline {
	all := append(append([]cand{}, tl.slow...), tl.open...)
	for i := range tl.marks {
		all = append(all, tl.marks[i].all()...)
	}
	type score struct {
		crash bool
		worth uint64
	}
	by := map[uint32]*score{}
	for _, c := range all {
		s := by[c.tid]
		if s == nil {
			s = &score{}
			by[c.tid] = s
		}
		s.crash = s.crash || c.crash
		switch {
		case c.kind == "exec":
			s.worth += 10e6
		case c.kind == "exit":
			// Every thread has one.
		case c.kind == "signal" && !c.crash:
			s.worth += 100e3 // SIGKILL to each thread of an exiting process, too
		case c.kind != "syscall":
			s.worth += 1e6
		case c.open:
			s.worth += c.d / 1000
		default:
			s.worth += c.d
		}
	}
	tids := make([]uint32, 0, len(by))
	for tid := range by {
		tids = append(tids, tid)
	}
	sort.Slice(tids, func(i, j int) bool {
		a, b := by[tids[i]], by[tids[j]]
		if a.crash != b.crash {
			return a.crash
		}
		if a.worth != b.worth {
			return a.worth > b.worth
		}
		return tids[i] < tids[j]
	})
	out := Timeline{Total: tl.total, Shown: map[string]uint64{}, Threads: []Thread{}, Items: []Item{}}
	// No process takes more than an eighth of the lanes: a pool of alike
	// threads is seen in a few of them, and leaves room for the rest.
	perProc := max(lanes/8, 1)
	taken := map[uint32]int{}
	kept := tids[:0]
	for _, tid := range tids {
		pid := pidOf(threads, tid)
		if len(kept) == lanes || taken[pid] == perProc && !by[tid].crash {
			out.ThreadsOmitted++
			continue
		}
		taken[pid]++
		kept = append(kept, tid)
	}
	tids = kept
	// Processes most telling first (a crash, then the most at stake in
	// any of their threads), their threads by id.
	type proc struct {
		crash bool
		worth uint64
	}
	procs := map[uint32]*proc{}
	for _, tid := range tids {
		pid := pidOf(threads, tid)
		p := procs[pid]
		if p == nil {
			p = &proc{}
			procs[pid] = p
		}
		p.crash = p.crash || by[tid].crash
		p.worth = max(p.worth, by[tid].worth)
	}
	sort.Slice(tids, func(i, j int) bool {
		pi, pj := pidOf(threads, tids[i]), pidOf(threads, tids[j])
		if pi != pj {
			a, b := procs[pi], procs[pj]
			if a.crash != b.crash {
				return a.crash
			}
			if a.worth != b.worth {
				return a.worth > b.worth
			}
			return pi < pj
		}
		return tids[i] < tids[j]
	})
	lane := map[uint32]int{}
	for i, tid := range tids {
		lane[tid] = i
		th := Thread{TID: tid, PID: pidOf(threads, tid)}
		if t := threads[tid]; t != nil {
			th.Comm = t.Comm
		}
		out.Threads = append(out.Threads, th)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].t < all[j].t })
	for _, c := range all {
		l, ok := lane[c.tid]
		if !ok {
			continue
		}
		var t uint64
		if c.t > first {
			t = c.t - first
		}
		out.Items = append(out.Items, Item{Lane: l, T: t, D: c.d, Kind: c.kind, Err: c.err, Open: c.open, Label: c.label})
		out.Shown[c.kind]++
	}
	if len(tl.slow) == tl.limits.SlowCalls {
		out.SlowFloor = tl.slow[0].d
	}
	return out
}

func pidOf(threads map[uint32]*Thread, tid uint32) uint32 {
	if t := threads[tid]; t != nil {
		return t.PID
	}
	return tid
}

// crashSignal says a signal is one that faults raise or that aborts:
// SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV and SIGSYS.
func crashSignal(sig int32) bool {
	switch sig {
	case 4, 5, 6, 7, 8, 11, event.SIGSYS:
		return true
	}
	return false
}
