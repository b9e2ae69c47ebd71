package agent

import (
	"sort"
	"time"

	"github.com/sysray/sysray/internal/stat"
)

// View is the state of the series at the last fold, for scrapes and the
// health endpoint: built once per read, never changed after.
type View struct {
	At         time.Time
	Syscalls   []SyscallSeries
	Containers []ContainerSeries
	Lost       stat.Lost
	RingDrops  uint64
	BPF        map[string]time.Duration // nil when the kernel's BPF stats are off
	Cells      int                      // the kernel's cells at the last read
	Reloads    uint64                   // the probe's reloads so far
	Untraced   time.Duration            // the time those reloads left the host untraced, at most
	InFlight   uint64                   // calls in flight across their handovers too long to be counted
	Scale      uint64                   // counts of calls are scaled by this (duty cycling); 1 when exact
}

// SyscallSeries is one syscall of one container.
type SyscallSeries struct {
	Labels
	Syscall string
	Count   uint64
	SumNS   uint64
	Buckets [promBuckets]uint64 // by Bounds, then +Inf; not cumulative
	// Native is the same calls by power of two of the nanosecond: index 0
	// is 0 ns, index k is (2^(k-1), 2^k] ns (native.go); not cumulative.
	Native [nativeBuckets]uint64
	Errnos map[string]uint64
}

// ContainerSeries is what one container did besides syscalls.
type ContainerSeries struct {
	Labels
	Faults, Vsyscalls uint64
	Signals           map[string]uint64
}

// View returns the state at the last fold.
func (a *Aggregator) View() *View { return a.view.Load() }

func (a *Aggregator) publish(now time.Time) {
	v := &View{At: now, Lost: stat.Lost{Full: a.lost.total, NoMem: a.lostMem.total}, RingDrops: a.ring.total, Cells: a.cells, Scale: a.scale,
		Reloads: a.reloads, Untraced: a.untraced, InFlight: a.inFlight}
	if a.bpfOn {
		v.BPF = map[string]time.Duration{}
		for n, m := range a.bpf {
			v.BPF[n] = time.Duration(m.total)
		}
	}
	for _, c := range a.ctrs {
		cs := ContainerSeries{Labels: c.labels, Faults: c.faults, Vsyscalls: c.vsyscall, Signals: map[string]uint64{}}
		for sig, n := range c.signals {
			cs.Signals[sig] = n
		}
		v.Containers = append(v.Containers, cs)
		for name, s := range c.sys {
			ss := SyscallSeries{Labels: c.labels, Syscall: name, Count: s.count, SumNS: s.sumNS, Buckets: s.buckets, Native: s.native,
				Errnos: map[string]uint64{}}
			for e, n := range s.errnos {
				ss.Errnos[e] = n
			}
			v.Syscalls = append(v.Syscalls, ss)
		}
	}
	sort.Slice(v.Containers, func(i, j int) bool { return less(v.Containers[i].Labels, v.Containers[j].Labels) })
	sort.Slice(v.Syscalls, func(i, j int) bool {
		x, y := &v.Syscalls[i], &v.Syscalls[j]
		if x.Labels != y.Labels {
			return less(x.Labels, y.Labels)
		}
		return x.Syscall < y.Syscall
	})
	a.view.Store(v)
}
