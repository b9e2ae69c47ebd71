package doctor

import (
	"fmt"
	"sort"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
)

// errs counts failing syscalls. Programs fail syscalls all the time on
// purpose (a path search, a non-blocking read), so this only ever informs,
// and only when failures dominate a syscall.
type errs struct {
	arch  event.Arch
	calls map[uint32]uint64
	fails map[[2]uint32]*errCount // (nr, errno)
}

type errCount struct {
	n     uint64
	procs map[uint32]string
}

func newErrors(arch event.Arch) *errs {
	return &errs{arch: arch, calls: map[uint32]uint64{}, fails: map[[2]uint32]*errCount{}}
}

// counts replaces the call counts with exact ones: failures are always
// recorded as events, successes may have been sampled.
func (x *errs) counts(cells []stat.Cell) {
	x.calls = map[uint32]uint64{}
	for _, c := range cells {
		x.calls[c.Nr] += c.Count
	}
}

func (x *errs) Observe(e *event.Event) {
	if e.Kind != event.KindSyscall || e.Syscall.Unfinished {
		return
	}
	x.calls[e.Syscall.Nr]++
	if !e.Syscall.Failed() {
		return
	}
	k := [2]uint32{e.Syscall.Nr, uint32(-e.Syscall.Ret)}
	c := x.fails[k]
	if c == nil {
		c = &errCount{procs: map[uint32]string{}}
		x.fails[k] = c
	}
	c.n++
	if len(c.procs) < 5 {
		c.procs[e.PID] = e.Comm
	}
}

const errStorm = 10000

func (x *errs) Findings(env *Env) []Finding {
	var out []Finding
	for k, c := range x.fails {
		calls := x.calls[k[0]]
		if c.n < errStorm || c.n*2 < calls {
			continue
		}
		name := event.SyscallName(x.arch, k[0])
		errno := event.ErrnoName(int(k[1]))
		var procs []string
		for pid, comm := range c.procs {
			procs = append(procs, env.ProcName(pid, comm))
		}
		sort.Strings(procs)
		out = append(out, Finding{ID: "error-storm", Severity: Info,
			Title: fmt.Sprintf("%d of %d %s calls failed with %s", c.n, calls, name, errno),
			Summary: fmt.Sprintf("%s failed %d times with %s (%s). A syscall that fails this often is usually a loop polling "+
				"for something that is not there.", name, c.n, errno, event.ErrnoDesc(int(k[1]))),
			Evidence: map[string]any{"syscall": name, "errno": errno, "failures": c.n, "calls": calls, "processes": procs},
			Fix:      "Check the program's logic around " + name + "; trace it with sysray trace -f 'evt.type = " + name + " and evt.failed'.",
			Score:    float64(c.n)})
	}
	return out
}
