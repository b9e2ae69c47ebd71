package doctor

import (
	"fmt"
	"sort"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
)

// The finding it reports.
const (
	ErrorStorm ID = "error-storm"
)

func init() {
	register(registration{ids: []ID{ErrorStorm},
		build: func(h *Host) Detector { return newErrors(h.Arch) }})
}

// errs counts failing syscalls. Programs fail syscalls all the time on
// purpose (a path search, a non-blocking read), so this only ever informs,
// and only when failures dominate a syscall in the processes that make them.
type errs struct {
	arch  event.Arch
	calls map[pidNr]uint64
	fails map[[2]uint32]*errCount // (nr, errno)
	comms map[uint32]string
	// closest is the errno Findings found nearest a storm (near).
	closest *Near
}

type pidNr struct{ pid, nr uint32 }

type errCount struct {
	byPID map[uint32]uint64
}

func newErrors(arch event.Arch) *errs {
	return &errs{arch: arch, calls: map[pidNr]uint64{}, fails: map[[2]uint32]*errCount{}, comms: map[uint32]string{}}
}

// counts replaces the call counts with exact ones: failures are always
// recorded as events, successes may have been sampled.
func (x *errs) counts(cells []stat.Cell) {
	x.calls = map[pidNr]uint64{}
	for _, c := range cells {
		x.calls[pidNr{c.PID, c.Nr}] += c.Count
	}
}

func (x *errs) Observe(e *event.Event) {
	if e.Kind != event.KindSyscall || e.Syscall.Unfinished || e.Syscall.Refused || fdExhausted(x.arch, &e.Syscall) ||
		inotifyRefused(event.SyscallName(x.arch, e.Syscall.Nr), int(-e.Syscall.Ret)) {
		return // refused calls are syscall-refused's; EMFILE and ENFILE from calls making a descriptor, fd-exhaustion's; the inotify limits', theirs
	}
	x.calls[pidNr{e.PID, e.Syscall.Nr}]++
	if !e.Syscall.Failed() {
		return
	}
	k := [2]uint32{e.Syscall.Nr, uint32(-e.Syscall.Ret)}
	c := x.fails[k]
	if c == nil {
		c = &errCount{byPID: map[uint32]uint64{}}
		x.fails[k] = c
	}
	c.byPID[e.PID]++
	x.comms[e.PID] = e.Comm
}

// The error-storm rule: ≥ errStorm failures of one syscall with one errno,
// counted over the processes in which they are more than half the calls of
// that syscall. A busy neighbour whose calls succeed neither hides a
// polling loop nor makes one.
const errStorm = 10000

func (x *errs) near(*Env) *Near { return x.closest }

func (x *errs) Findings(env *Env) []Finding {
	var out []Finding
	x.closest = nil
	var closestKey [2]uint32 // ties go to the lower syscall, then errno: the same report every run
	for k, c := range x.fails {
		var n, calls uint64
		var pids []uint32
		for pid, f := range c.byPID {
			all := max(x.calls[pidNr{pid, k[0]}], f)
			if f*2 <= all {
				continue
			}
			n += f
			calls += all
			pids = append(pids, pid)
		}
		if n < errStorm {
			cl := float64(n) / errStorm
			if n > 0 && (x.closest == nil || cl > x.closest.Closeness ||
				cl == x.closest.Closeness && (k[0] < closestKey[0] || k[0] == closestKey[0] && k[1] < closestKey[1])) {
				closestKey = k
				x.closest = &Near{ID: ErrorStorm, Closeness: cl,
					Subject: fmt.Sprintf("%s failing with %s in %d process(es)", event.SyscallName(x.arch, k[0]),
						event.ErrnoName(int(k[1])), len(pids)),
					Short: fmt.Sprintf("%d failures, more than half the calls where they happened; error-storm reports %d", n, errStorm)}
			}
			continue
		}
		sort.Slice(pids, func(i, j int) bool { return c.byPID[pids[i]] > c.byPID[pids[j]] })
		name := event.SyscallName(x.arch, k[0])
		errno := event.ErrnoName(int(k[1]))
		var procs []string
		for i, pid := range pids {
			if i == 5 {
				break
			}
			procs = append(procs, env.ProcName(pid, x.comms[pid]))
		}
		out = append(out, Finding{ID: ErrorStorm, Severity: Info, Key: keyOf(name, errno), Syscalls: []string{name}, Procs: env.refs(pids...),
			Title: fmt.Sprintf("%d of %d %s calls failed with %s", n, calls, name, errno),
			Summary: fmt.Sprintf("%s failed %d times with %s (%s), most of its calls in %d process(es). A syscall that fails this often "+
				"is usually a loop asking for something that is not there, or a call a library makes and expects to fail.",
				name, n, errno, event.ErrnoDesc(int(k[1])), len(pids)),
			Evidence: map[string]any{"syscall": name, "errno": errno, "failures": n, "calls": calls, "processes": procs},
			Fix:      "Check the program's logic around " + name + "; trace it with sysray trace -f 'evt.type = " + name + " and evt.failed'.",
			Score:    float64(n)})
	}
	return out
}

// forget drops ended processes (Doctor.forget): a storm is then counted
// over the processes kept, and the report says how many went.
func (x *errs) forget(pids, _ map[uint32]bool) {
	if len(pids) == 0 {
		return
	}
	for k := range x.calls {
		if pids[k.pid] {
			delete(x.calls, k)
		}
	}
	for _, c := range x.fails {
		for pid := range pids {
			delete(c.byPID, pid)
		}
	}
	for pid := range pids {
		delete(x.comms, pid)
	}
}
