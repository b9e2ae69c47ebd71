package agent

import (
	"strings"
	"sync"
	"time"

	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
)

// Windows runs the doctor continuously: the live events go to the current
// window's doctor; Close ends the window, hands that doctor what the
// kernel counted and sampled during the window (not since the agent
// started), and merges its findings into Store. A window's doctor starts
// empty, so a finding needs what the detector needs within one window;
// what carries across windows is the store's memory of each finding,
// Long's state, and what a window saw begin and not end (Doctor.Carry: a
// crash's fault before its exit).
type Windows struct {
	// New makes the doctor of a window.
	New   func() *doctor.Doctor
	Store *Findings
	// Long, if set, sees every event of every window and reports after
	// each (doctor.NewLong): a growth over hours.
	Long *doctor.Doctor

	mu      sync.Mutex
	steal   *doctor.StealLog // the CPUs' steal over the windows, if read (SetSteal)
	cur     *doctor.Doctor
	cells   map[stat.Key]stat.Cell // the kernel's counts at the last Close
	samples map[sampleKey]uint64
}

type sampleKey struct {
	pid     uint32
	syscall int32
	kernel  string
}

// Observe feeds one live event to the current window (the event reader's
// goroutine).
func (w *Windows) Observe(e *event.Event) {
	w.mu.Lock()
	if w.cur == nil {
		w.cur = w.New()
	}
	w.cur.Observe(e)
	if w.Long != nil {
		w.Long.Observe(e)
	}
	w.mu.Unlock()
}

// Close ends the current window at now and starts the next. cells are the
// kernel's counts now and samples its on-CPU samples now, both as they
// grew since the probe was loaded (nil when unknown); the window's share
// is what grew since the last Close. traced, if not zero, is the stretch
// of event time the per-syscall programs were attached (duty cycling). It
// returns the findings that are new or rose to warning or above.
func (w *Windows) Close(now time.Time, cells []stat.Cell, samples []doctor.CPUSample, traced [2]uint64) (*doctor.Report, []Finding) {
	w.mu.Lock()
	d := w.cur
	w.cur = w.New()
	if d != nil {
		// Before the next window's first event: a crash's exit may come
		// after its fault's window has closed.
		d.Carry(w.cur)
	}
	w.mu.Unlock()
	if d == nil {
		d = w.New()
	}
	if cells != nil {
		d.Counts(w.cellsDelta(cells))
	}
	if samples != nil {
		d.OnCPU(w.samplesDelta(samples))
	}
	if traced[1] > 0 {
		d.Traced(traced[0], traced[1])
	}
	w.mu.Lock()
	steal := w.steal
	w.mu.Unlock()
	if steal != nil {
		d.Steal(steal)
	}
	rep := d.Report()
	if w.Long != nil {
		// Under the lock: the event reader feeds it meanwhile.
		w.mu.Lock()
		long := w.Long.Report().Findings
		w.Long.Forget()
		w.mu.Unlock()
		rep.Findings = append(rep.Findings, long...)
	}
	return rep, w.Store.Merge(rep.Findings, now)
}

// SetSteal hands each window's doctor the CPUs' steal time from log.
func (w *Windows) SetSteal(log *doctor.StealLog) {
	w.mu.Lock()
	w.steal = log
	w.mu.Unlock()
}

// cellsDelta is each cell's growth since the last read. A cell that
// shrank belongs to a reloaded probe: all of it is new.
func (w *Windows) cellsDelta(cells []stat.Cell) []stat.Cell {
	next := make(map[stat.Key]stat.Cell, len(cells))
	out := make([]stat.Cell, 0, len(cells))
	for _, c := range cells {
		next[c.Key] = c
		p, ok := w.cells[c.Key]
		if ok && c.Count >= p.Count && c.Total >= p.Total {
			d := c
			d.Count -= p.Count
			d.Errors -= min(p.Errors, d.Errors)
			d.Total -= p.Total
			d.Runq -= min(p.Runq, d.Runq)
			for i := range d.Hist {
				d.Hist[i] -= min(p.Hist[i], d.Hist[i])
			}
			if len(c.Errnos) > 0 {
				d.Errnos = make(map[int]uint64, len(c.Errnos))
				for e, n := range c.Errnos {
					if n > p.Errnos[e] {
						d.Errnos[e] = n - p.Errnos[e]
					}
				}
			}
			if d.Count == 0 {
				continue
			}
			c = d
		}
		out = append(out, c)
	}
	w.cells = next
	return out
}

func (w *Windows) samplesDelta(samples []doctor.CPUSample) []doctor.CPUSample {
	// Samples differing only in their user stacks share a key here.
	next := make(map[sampleKey]uint64, len(samples))
	first := make(map[sampleKey]doctor.CPUSample, len(samples))
	var order []sampleKey
	for _, s := range samples {
		k := sampleKey{s.PID, s.Syscall, strings.Join(s.Kernel, ";")}
		if _, ok := first[k]; !ok {
			first[k] = s
			order = append(order, k)
		}
		next[k] += s.Count
	}
	var out []doctor.CPUSample
	for _, k := range order {
		n, prev := next[k], w.samples[k]
		if n < prev {
			prev = 0 // a reloaded probe counts from 0
		}
		if n > prev {
			s := first[k]
			s.Count = n - prev
			out = append(out, s)
		}
	}
	w.samples = next
	return out
}
