package doctor

import (
	"runtime"
	"testing"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/proc"
)

// stormProc feeds d one short-lived process: an exec, 20 different
// syscalls (7 of them failing), and its exit.
func stormProc(d *Doctor, pid uint32, t uint64) uint64 {
	e := event.Event{Kind: event.KindExec, Time: t, PID: pid, TID: pid, Comm: "true"}
	if d.env.Procs != nil {
		d.env.Procs.Update(&e)
	}
	d.Observe(&e)
	for nr := range uint32(20) {
		t += 1000
		ret := int64(0)
		if nr%3 == 0 {
			ret = -2 // ENOENT
		}
		e := sys(pid, t, nr, ret, 500)
		e.Comm = "true"
		d.Observe(&e)
	}
	t += 1000
	e = event.Event{Kind: event.KindExit, Time: t, PID: pid, TID: pid, Comm: "true", Proc: event.Proc{GroupDead: true}}
	if d.env.Procs != nil {
		d.env.Procs.Update(&e)
	}
	d.Observe(&e)
	return t
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// An exec storm leaves the doctor's memory where it was once MaxEnded
// processes have ended: past that it forgets the oldest ended ones, says
// how many, and keeps what it already concluded of them (a crash) and all
// it knows of the living.
func TestExecStormForgetsEndedProcesses(t *testing.T) {
	procs := proc.NewTable(nil)
	d := New(host, procs)
	// As the live doctor's session does: the session keeps the table, and
	// the doctor may drop what it no longer needs from it.
	d.ProcsKeptByCaller()
	t0 := uint64(1)
	// A crash first, to be forgotten as a process but not as a death.
	for _, e := range []event.Event{
		sys(9, t0, nrOpenat, 3, 1000, ^uint64(99), 0x1000, 0),
		{Kind: event.KindPageFault, Time: t0 + 100, PID: 9, TID: 9, Comm: "crash", Fault: event.Fault{Addr: 0x10, IP: 0x401000, Error: 6}},
		{Kind: event.KindSignalGenerate, Time: t0 + 110, PID: 9, TID: 9, Comm: "crash",
			Signal: event.Signal{Sig: 11, Code: 1, Addr: 0x10, SenderPID: 9, TargetPID: 9, TargetTID: 9}},
		{Kind: event.KindExit, Time: t0 + 200, PID: 9, TID: 9, Comm: "crash", Proc: event.Proc{ExitCode: 11, GroupDead: true}},
	} {
		d.Observe(&e)
	}
	var g *growth
	var c *contention
	for _, det := range d.detectors {
		switch det := det.(type) {
		case *growth:
			g = det
		case *contention:
			c = det
		}
	}
	const living = 7
	t0 += 1000
	var base uint64
	var baseSpans int
	const n = 20000
	for i := range uint32(n) {
		t0 = stormProc(d, 100+i, t0)
		live := sys(living, t0, nrOpenat, 3, 1000)
		d.Observe(&live)
		if i == 2*MaxEnded {
			base, baseSpans = heapInUse(), c.spans
		}
	}
	// Each process held about 10 KiB here before: 18,000 more would be
	// 180 MiB. Forgotten, they leave the map buckets the kept ones use,
	// and nothing that grows but the calls kept for a concurrency curve
	// (32 bytes each, up to maxAllSpans).
	spans := int64(32 * (c.spans - baseSpans))
	if grown := int64(heapInUse()) - int64(base) - spans; grown > 4<<20 {
		t.Errorf("heap grew by %d KiB, besides %d KiB of spans, over %d more processes", grown>>10, spans>>10, n-2*MaxEnded)
	}
	rep := checked(d.Report())
	if kept := uint64(n+1) - rep.Forgotten; kept < MaxEnded || kept >= MaxEnded+MaxEnded/4 {
		t.Errorf("%d of %d ended processes forgotten: %d kept, want %d to %d", rep.Forgotten, n+1, kept, MaxEnded, MaxEnded+MaxEnded/4-1)
	}
	if f := byID(rep.Findings, "fatal-signal"); f == nil {
		t.Errorf("the crash, seen before its process was forgotten, is not reported")
	}
	if n := len(procs.All()); n > MaxEnded+MaxEnded/4+1 {
		t.Errorf("the process table holds %d processes", n)
	}
	if g.procs[living] == nil {
		t.Errorf("the living process was forgotten")
	}
	if len(g.procs) > MaxEnded+MaxEnded/4+1 {
		t.Errorf("growth holds %d processes", len(g.procs))
	}
}

// A process that starts and ends threads all its life keeps the
// detectors' state of its last MaxEndedThreads ended threads, and all of
// its threads' time.
func TestThreadChurnForgetsEndedThreads(t *testing.T) {
	d := New(host, nil)
	var f *fatal
	var r *retry
	for _, det := range d.detectors {
		switch det := det.(type) {
		case *fatal:
			f = det
		case *retry:
			r = det
		}
	}
	const pid, n = 50, 20000
	tm := uint64(1000)
	for i := range uint32(n) {
		tid := pid + 1 + i
		for _, e := range []event.Event{
			{Kind: event.KindFork, Time: tm, PID: pid, TID: pid, Comm: "srv", Proc: event.Proc{ChildPID: pid, ChildTID: tid, Thread: true}},
			sys(tid, tm+10, nrOpenat, -2, 100),
			{Kind: event.KindExit, Time: tm + 1000, PID: pid, TID: tid, Comm: "srv"},
		} {
			e.PID = pid
			d.Observe(&e)
		}
		tm += 2000
	}
	// 4096 kept, and up to a quarter more before a batch goes.
	if len(f.recent) > 5120 || len(r.failed) > 5120 {
		t.Errorf("%d threads ended: fatal holds %d, retry %d", n, len(f.recent), len(r.failed))
	}
	// Each thread lived from its first event (10 ns after the fork, on
	// its own tid) to its exit; the main thread from its first fork to
	// its last.
	ns, threads := d.env.threadTime()
	if want := uint64(n*990 + 2000*(n-1)); ns[pid] != want || threads[pid] != n+1 {
		t.Errorf("thread time %d over %d threads, want %d over %d", ns[pid], threads[pid], want, n+1)
	}
	if rep := checked(d.Report()); rep.Forgotten != 0 {
		t.Errorf("%d processes forgotten; none ended", rep.Forgotten)
	}
}
