package doctor

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/units"
)

// The finding it reports.
const (
	MmapLockContention ID = "mmap-lock-contention"
)

func init() {
	register(registration{ids: []ID{MmapLockContention},
		build: func(h *Host) Detector {
			m := newMmapLock(h.Arch)
			m.bar = h.slowBar()
			return m
		}})
}

// mmapLock finds threads of one process queued on the process's mmap lock
// (mm->mmap_lock, a reader-writer semaphore): mmap, munmap, mprotect, brk,
// madvise and mremap take it to change the address space, and one thread
// holding it for long — populating a large mapping, unmapping one, a JIT
// flipping permissions — stalls every sibling that needs it. The cousin of
// the MAP_32BIT story: the cost is in the shape of the process's memory
// management, not in any one call.
//
// Page faults wait too: a fault that cannot use its mapping's own lock
// (the mapping is being changed, or its first fault needs an anon_vma)
// takes the process's, outside any syscall. Those waits come as the
// thread's sleeps outside syscalls (event.FaultWait, with --stacks), by
// stack; the kernel sums them, so their count and total are known, not
// each one's length.
type mmapLock struct {
	arch  event.Arch
	bar   uint64 // ns: a call this long carries its sleeps (Host.slowBar)
	procs map[uint32]*mmapProc
	// slowest mmap-family call each thread made, by tid: what a holder was
	// doing, for the threads that woke a waiter.
	slowest map[uint32]string
	slowNS  map[uint32]uint64
}

type mmapProc struct {
	comm    string
	calls   map[string]uint64
	n       uint64
	waitNS  uint64
	maxNS   uint64
	example string
	stack   []string
	holders map[uint32]uint64 // sibling tid that woke a waiter → times
	threads map[uint32]bool   // waiting threads
	// Page faults that waited: sleeps, and ns asleep (also in waitNS).
	faults, faultNS uint64
	faultStack      []string
}

// mmapCalls take the mmap lock themselves: a holder's slowest one is what
// it was doing while the others waited.
var mmapCalls = map[string]bool{"mmap": true, "munmap": true, "mprotect": true, "brk": true, "madvise": true,
	"mremap": true, "msync": true, "mlock": true, "mlock2": true, "mlockall": true, "munlock": true,
	"munlockall": true, "process_madvise": true, "remap_file_pages": true, "pkey_mprotect": true}

func newMmapLock(arch event.Arch) *mmapLock {
	return &mmapLock{arch: arch, bar: slowMin, procs: map[uint32]*mmapProc{}, slowest: map[uint32]string{}, slowNS: map[uint32]uint64{}}
}

func (m *mmapLock) proc(e *event.Event) *mmapProc {
	p := m.procs[e.PID]
	if p == nil {
		p = &mmapProc{comm: e.Comm, calls: map[string]uint64{}, holders: map[uint32]uint64{}, threads: map[uint32]bool{}}
		m.procs[e.PID] = p
	}
	return p
}

func (m *mmapLock) Observe(e *event.Event) {
	if e.Kind == event.KindFaultWait {
		m.faultWait(e)
		return
	}
	if e.Kind != event.KindSyscall || e.Syscall.Unfinished || e.Syscall.Latency < m.bar {
		return
	}
	sc := &e.Syscall
	if mmapCalls[event.SyscallName(m.arch, sc.Nr)] && sc.Latency > m.slowNS[e.TID] {
		m.slowNS[e.TID] = sc.Latency
		m.slowest[e.TID] = event.FormatSyscall(m.arch, sc) + " <" + units.Duration(sc.Latency) + ">"
	}
	if !ownsMmapLock(sc) {
		return
	}
	ns, stack, wakers := mmapLockWait(sc)
	p := m.proc(e)
	name := event.SyscallName(m.arch, sc.Nr)
	p.calls[name]++
	p.n++
	p.waitNS += ns
	p.threads[e.TID] = true
	for _, w := range wakers {
		if w != e.TID {
			p.holders[w]++
		}
	}
	if ns > p.maxNS {
		p.maxNS = ns
		p.example = event.FormatSyscall(m.arch, sc) + " <" + units.Duration(sc.Latency) + ">"
		p.stack = lockStack(stack)
	}
}

// lockStack is a wait's stack without the scheduler's and the tracer's frames.
func lockStack(stack []event.Frame) []string {
	var out []string
	for _, f := range stack {
		if fn := funcOf(f.Name); !contains(schedFrames, fn) && !tracingFrame(fn) {
			out = append(out, f.Name)
		}
	}
	return out
}

// faultWait takes a thread's sleeps outside syscalls: those at a page
// fault's wait for the mmap lock, when they waited the slow bar on average.
// A call under the bar carries no sleeps, so the calls' waits count from
// it; a fault's own wait is not known (the kernel sums a place's sleeps),
// so its place's mean stands for it. A thread's first fault on a new
// stack, waiting a millisecond or two while a sibling maps its own (the
// MAP_32BIT story's threads), is then as unseen as a 2 ms mmap is.
func (m *mmapLock) faultWait(e *event.Event) {
	var p *mmapProc
	for i := range e.FaultWait.Places {
		pl := &e.FaultWait.Places[i]
		if !faultMmapLock(pl) || pl.Count == 0 || pl.Duration/uint64(pl.Count) < m.bar {
			continue
		}
		if p == nil {
			p = m.proc(e)
		}
		p.faults += uint64(pl.Count)
		p.faultNS += pl.Duration
		p.waitNS += pl.Duration
		p.threads[e.TID] = true
		if p.faultStack == nil {
			p.faultStack = lockStack(pl.Stack)
		}
	}
}

// The mmap-lock rule: a warning when a call waited ≥ slowWarn (100 ms, a
// stall a user sees, as for slow-syscall, whose calls these were) or the
// waits, in calls and in page faults, are ≥ 25% of the process's time and
// ≥ 100 ms in all (as for kernel-hotspot); else info. A fault's single
// wait is not known (the kernel sums them), so faults count by share.
func (m *mmapLock) Findings(env *Env) []Finding {
	tt, _ := env.threadTime()
	var out []Finding
	for pid, p := range m.procs {
		share := 0.0
		if tt[pid] > 0 {
			share = float64(p.waitNS) / float64(tt[pid])
		}
		sev := Info
		if p.maxNS >= slowWarn || share >= warnShare && p.waitNS >= warnWaitNS {
			sev = Warning
		}
		// Faults alone are reported at the warning bar or not at all:
		// every threaded program's new threads wait a little in their
		// first faults while siblings map their stacks (map32 -m stack:
		// 14 of 1,100 new threads' first faults, 150 ms in all, 0% of the
		// process's time), and a fault's wait, without its waker or its
		// own length, cannot be told from that below the share.
		if p.n == 0 && sev < Warning {
			continue
		}
		type holder struct {
			tid  uint32
			n    uint64
			call string
		}
		var hs []holder
		for tid, n := range p.holders {
			hs = append(hs, holder{tid, n, m.slowest[tid]})
		}
		sort.Slice(hs, func(i, j int) bool { return hs[i].n > hs[j].n || hs[i].n == hs[j].n && hs[i].tid < hs[j].tid })
		var held []string
		for i, h := range hs {
			if i == 4 {
				break
			}
			s := fmt.Sprintf("thread %d (woke %d waiter(s))", h.tid, h.n)
			if h.call != "" {
				s += ", its slowest call: " + h.call
			}
			held = append(held, s)
		}
		proc := env.ProcName(pid, p.comm)
		calls := callList(p.calls)
		ev := map[string]any{"pid": pid, "syscalls": p.calls, "count": p.n, "waiting_threads": len(p.threads),
			"wait_ns": p.waitNS, "max_wait_ns": p.maxNS, "example": p.example, "stack": p.stack}
		if p.faults > 0 {
			ev["fault_waits"] = p.faults
			ev["fault_wait_ns"] = p.faultNS
			ev["fault_stack"] = p.faultStack
		}
		// What waited: the calls, and the page faults.
		what := fmt.Sprintf("%d %s call(s)", p.n, calls)
		short := fmt.Sprintf("%d %s", p.n, calls)
		switch {
		case p.faults > 0 && p.n == 0:
			what = fmt.Sprintf("%d page fault(s) (%s)", p.faults, units.Duration(p.faultNS))
			short = fmt.Sprintf("%d page fault(s)", p.faults)
		case p.faults > 0:
			what += fmt.Sprintf(" and %d page fault(s) (%s)", p.faults, units.Duration(p.faultNS))
			short += fmt.Sprintf(" and %d page fault(s)", p.faults)
		}
		if len(held) > 0 {
			ev["released_by"] = held
		}
		if share > 0 {
			ev["share_of_process_time"] = fmt.Sprintf("%.0f%%", 100*share)
		}
		upTo := ""
		switch {
		case p.maxNS > 0 && p.faults > 0:
			// A fault's own wait is not known: the kernel sums them.
			upTo = " (a call up to " + units.Duration(p.maxNS) + " at once)"
		case p.maxNS > 0:
			upTo = " (up to " + units.Duration(p.maxNS) + " at once)"
		}
		summary := fmt.Sprintf("In %s, %d thread(s) waited %s in all%s in %s for the process's "+
			"mmap lock, which every change to the address space takes, while another thread held it.",
			proc, len(p.threads), units.Duration(p.waitNS), upTo, what)
		if p.faults > 0 {
			summary += " A page fault takes it when it cannot use its mapping's own lock: the mapping was being changed " +
				"(an mprotect, madvise or munmap of it) or had its first fault."
		}
		if len(held) > 0 {
			summary += " It was released by " + strings.Join(held, "; ") + "."
		}
		if share > 0 {
			summary += fmt.Sprintf(" That is %.0f%% of the process's thread time.", 100*share)
		}
		out = append(out, Finding{ID: MmapLockContention, Severity: sev, Key: keyOf(p.comm), Syscalls: byValue(p.calls), Procs: env.refs(pid),
			Title:    mmapTitle(proc, short, p.maxNS),
			Summary:  summary,
			Evidence: ev,
			Fix: "Make the holder's work shorter or rarer: populate or unmap large regions in smaller pieces or once at start-up " +
				"(MAP_POPULATE of hundreds of MiB holds the lock throughout), reuse mappings instead of mmap/munmap per request, " +
				"batch permission changes (a JIT's mprotect per function), and let the allocator keep freed memory " +
				"(glibc: M_TRIM_THRESHOLD / M_MMAP_THRESHOLD; jemalloc and tcmalloc retain by default).",
			Score: float64(p.waitNS)})
	}
	return out
}

func mmapTitle(proc, what string, maxNS uint64) string {
	t := fmt.Sprintf("threads of %s queue on its mmap lock: %s", proc, what)
	if maxNS > 0 {
		t += ", up to " + units.Duration(maxNS)
	}
	return t
}
