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
	marks  [2][]cand // 0: signals, exec, exit; 1: faults, vsyscall emulations
	total  map[string]uint64
}

type cand struct {
	tid, pid uint32
	t, d     uint64
	kind     string
	err      bool
	open     bool
	label    string
}

// slowest is a min-heap by latency: its root is the first to give way.
type slowest []cand

func (h slowest) Len() int           { return len(h) }
func (h slowest) Less(i, j int) bool { return h[i].d < h[j].d }
func (h slowest) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *slowest) Push(x any)        { *h = append(*h, x.(cand)) }
func (h *slowest) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newTimeline(l Limits) timeline {
	return timeline{limits: l, total: map[string]uint64{}}
}

// maxLabel bounds an item's text: a path or argv can be long.
const maxLabel = 300

func label(e *event.Event, arch event.Arch) string {
	s := output.Body(e, arch)
	if len(s) > maxLabel {
		cut := maxLabel
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func (tl *timeline) observe(e *event.Event, arch event.Arch) {
	var kind string
	class := 0
	switch e.Kind {
	case event.KindSyscall:
		tl.total["syscall"]++
		d := e.Syscall.Latency
		if len(tl.slow) == tl.limits.SlowCalls && d <= tl.slow[0].d {
			return
		}
		c := cand{tid: e.TID, pid: e.PID, t: e.Time, d: d, kind: "syscall", err: e.Syscall.Failed(),
			open: e.Syscall.Unfinished, label: label(e, arch)}
		if len(tl.slow) < tl.limits.SlowCalls {
			heap.Push(&tl.slow, c)
		} else {
			tl.slow[0] = c
			heap.Fix(&tl.slow, 0)
		}
		return
	case event.KindSignalGenerate, event.KindSignalDeliver:
		kind = "signal"
	case event.KindExec:
		kind = "exec"
	case event.KindExit:
		kind = "exit"
	case event.KindPageFault:
		kind, class = "fault", 1
	case event.KindVsyscall:
		kind, class = "vsyscall", 1
	default:
		return
	}
	tl.total[kind]++
	if len(tl.marks[class]) < tl.limits.Marks {
		tl.marks[class] = append(tl.marks[class], cand{tid: e.TID, pid: e.PID, t: e.Time, kind: kind, label: label(e, arch)})
	}
}

// data lays the kept events out on lanes, one per thread. With more
// threads than lanes, the threads with signals (every thread exits, few are
// signalled) and then those with the most items keep theirs.
func (tl *timeline) data(first uint64, threads map[uint32]*Thread, lanes int) Timeline {
	all := append([]cand{}, tl.slow...)
	all = append(all, tl.marks[0]...)
	all = append(all, tl.marks[1]...)
	type score struct {
		signals, n int
	}
	by := map[uint32]*score{}
	for _, c := range all {
		s := by[c.tid]
		if s == nil {
			s = &score{}
			by[c.tid] = s
		}
		s.n++
		if c.kind == "signal" {
			s.signals++
		}
	}
	tids := make([]uint32, 0, len(by))
	for tid := range by {
		tids = append(tids, tid)
	}
	sort.Slice(tids, func(i, j int) bool {
		a, b := by[tids[i]], by[tids[j]]
		if (a.signals > 0) != (b.signals > 0) {
			return a.signals > 0
		}
		if a.n != b.n {
			return a.n > b.n
		}
		return tids[i] < tids[j]
	})
	out := Timeline{Total: tl.total, Shown: map[string]uint64{}, Threads: []Thread{}, Items: []Item{}}
	if len(tids) > lanes {
		out.ThreadsOmitted = len(tids) - lanes
		tids = tids[:lanes]
	}
	sort.Slice(tids, func(i, j int) bool {
		pi, pj := pidOf(threads, tids[i]), pidOf(threads, tids[j])
		if pi != pj {
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
