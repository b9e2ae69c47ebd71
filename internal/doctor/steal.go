package doctor

import (
	"slices"
	"sort"
	"sync"
)

// StealLog is each CPU's steal time (host.Steal) read over a live run: the
// time a virtual CPU was runnable while the hypervisor ran another guest.
// A thread on that CPU is not switched out, so nothing the guest traces
// sees the gap: a call that did no more than usual looks like a call that
// ran long in the kernel. Detectors that blame a call's own time take the
// steal out first (Env.stolen).
type StealLog struct {
	mu    sync.Mutex
	at    []uint64   // CLOCK_MONOTONIC ns of each read
	steal [][]uint64 // per read, ns of steal by CPU
}

// NewStealLog returns an empty log.
func NewStealLog() *StealLog { return &StealLog{} }

// Add records a read of every CPU's steal time taken at at. A run of
// unchanged reads keeps only its first and last: on a host that is not
// stolen from, the log stays two entries long however long the run.
func (l *StealLog) Add(at uint64, steal []uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.at); n > 0 && at <= l.at[n-1] {
		return
	}
	if n := len(l.at); n >= 2 && slices.Equal(l.steal[n-1], steal) && slices.Equal(l.steal[n-2], steal) {
		l.at[n-1] = at
		return
	}
	l.at = append(l.at, at)
	l.steal = append(l.steal, append([]uint64(nil), steal...))
}

// Trim lets go of the reads before t but the last of them, from which a
// call that began before t is still read: a long-running watcher (the
// agent) keeps only what its next window can ask about.
func (l *StealLog) Trim(t uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := sort.Search(len(l.at), func(i int) bool { return l.at[i] >= t })
	if i <= 1 {
		return
	}
	l.at = append(l.at[:0], l.at[i-1:]...)
	l.steal = append(l.steal[:0], l.steal[i-1:]...)
}

// During is the steal on cpu between from and to, read off the log by
// linear interpolation between reads (steal is known only read to read),
// and never more than to-from. Outside the log's reads it is 0: unknown is
// not stolen.
func (l *StealLog) During(cpu uint32, from, to uint64) uint64 {
	if l == nil || to <= from {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	a, b := l.value(cpu, from), l.value(cpu, to)
	if b <= a {
		return 0
	}
	return min(uint64(b-a), to-from)
}

// value is cpu's steal at t, interpolated; t before the first read or after
// the last is taken to be at it.
func (l *StealLog) value(cpu uint32, t uint64) float64 {
	n := len(l.at)
	if n == 0 {
		return 0
	}
	get := func(i int) float64 {
		if int(cpu) < len(l.steal[i]) {
			return float64(l.steal[i][cpu])
		}
		return 0
	}
	i := sort.Search(n, func(i int) bool { return l.at[i] >= t })
	switch {
	case i == 0:
		return get(0)
	case i == n:
		return get(n - 1)
	}
	t0, t1 := float64(l.at[i-1]), float64(l.at[i])
	v0, v1 := get(i-1), get(i)
	return v0 + (v1-v0)*(float64(t)-t0)/(t1-t0)
}

// Steal hands the detectors the CPUs' steal time read over a live run.
func (d *Doctor) Steal(l *StealLog) { d.env.steal = l }

// stolen is the steal on cpu while [from, to] ran there; 0 without a log
// (a capture, a host that is not a guest).
func (env *Env) stolen(cpu uint32, from, to uint64) uint64 {
	return env.steal.During(cpu, from, to)
}
