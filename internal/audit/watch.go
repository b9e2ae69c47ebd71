package audit

import (
	"sync"
	"sync/atomic"
	"time"
)

// Sample is the audit status at one moment (CLOCK_MONOTONIC ns).
type Sample struct {
	At     uint64 `json:"at_ns"`
	Status Status `json:"status"`
}

// Sleeper is a task found asleep in audit_log_start: waiting for room in a
// full audit backlog.
type Sleeper struct {
	PID     uint32   `json:"pid"`
	TID     uint32   `json:"tid"`
	Comm    string   `json:"comm"`
	Syscall string   `json:"syscall,omitempty"` // the call it is in, when it is in one
	Stack   []string `json:"stack,omitempty"`
	Seen    int      `json:"seen"` // looks that found it there
	First   uint64   `json:"first_ns"`
	Last    uint64   `json:"last_ns"`
}

// Window is what the kernel's audit counters said over a live run: the
// status at its start and end and in between, the registered daemon, and
// the tasks found waiting for room in the backlog.
type Window struct {
	Start    *Sample   `json:"start,omitempty"`
	End      *Sample   `json:"end,omitempty"`
	Samples  []Sample  `json:"-"` // Start, the periodic reads, End
	Daemon   *Daemon   `json:"daemon,omitempty"`
	Sleepers []Sleeper `json:"sleepers,omitempty"`
	Looks    int       `json:"looks"`    // times the tasks were looked at
	Every    uint64    `json:"every_ns"` // between looks
	HZ       int       `json:"hz"`       // jiffies per second, for backlog_wait_time(_actual)
	Err      string    `json:"error,omitempty"`
	// carried: Start is the last read of the window before (Cut), a
	// baseline for the counters, not a read of this window.
	carried bool
}

// Waited is how long tasks waited in all for room in the backlog during the
// window, in jiffies (backlog_wait_time_actual's growth from the first read
// to the last).
func (w *Window) Waited() uint32 {
	a, b := w.span()
	if a == nil {
		return 0
	}
	return growth(a.BacklogWaitTimeActual, b.BacklogWaitTimeActual)
}

// growth is how much a kernel counter grew from a to b. A counter that went
// back was reset meanwhile (AUDIT_SET can zero backlog_wait_time_actual):
// b is what it counted since. An agent's windows span days, and a reset
// must not read as four billion jiffies of waiting.
func growth(a, b uint32) uint32 {
	if b < a {
		return b
	}
	return b - a
}

// Lost is how many audit records the kernel dropped during the window.
func (w *Window) Lost() uint32 {
	a, b := w.span()
	if a == nil {
		return 0
	}
	return growth(a.Lost, b.Lost)
}

// AsleepSpan is the longest a thread was found in audit_log_start, from
// the first look that found it there to the last (0 if none was found
// twice): the backlog stayed full at least that long, and the thread, if
// it was in one call all along, waited that long (it may have been in two
// calls with a short run between them).
func (w *Window) AsleepSpan() uint64 {
	var span uint64
	if w == nil {
		return 0
	}
	for _, s := range w.Sleepers {
		if s.Seen > 1 && s.Last > s.First {
			span = max(span, s.Last-s.First)
		}
	}
	return span
}

// Continued says the window follows another (Watcher.Cut): its first read
// is the last of the window before.
func (w *Window) Continued() bool { return w != nil && w.carried }

func (w *Window) span() (first, last *Status) {
	if w == nil || len(w.Samples) < 2 {
		return nil, nil
	}
	return &w.Samples[0].Status, &w.Samples[len(w.Samples)-1].Status
}

// FullSamples counts the status reads that found the backlog at its limit,
// and the largest backlog read.
func (w *Window) FullSamples() (full, of int, maxBacklog uint32) {
	if w == nil {
		return 0, 0, 0
	}
	samples := w.Samples
	if w.carried && len(samples) > 0 {
		samples = samples[1:]
	}
	for _, s := range samples {
		if s.Status.Full() {
			full++
		}
		maxBacklog = max(maxBacklog, s.Status.Backlog)
	}
	return full, len(samples), maxBacklog
}

// Watcher follows the audit status over a live run.
type Watcher struct {
	mu       sync.Mutex
	w        Window
	byTID    map[uint32]int // index in w.Sleepers
	stop     chan struct{}
	done     chan struct{}
	sleepers func() []Sleeper
	now      func() uint64
	status   func() (*Status, error) // GetStatus; tests replace it
	// The registered daemon, described from its files in the background
	// (one description at a time).
	describing  bool
	described   uint32 // pid
	daemonReady chan struct{}
	running     bool

	// stalling: the last status read found the backlog full, or found
	// that tasks waited since the read before; or, the status being
	// unreadable, the last look found tasks asleep in audit_log_start.
	stalling atomic.Bool

	// Lazy looks for tasks asleep in audit_log_start only while the last
	// status read found the backlog full, or found that tasks waited or
	// records were lost since the read before. An agent watches hosts
	// whose audit is on all day (auditd): walking every task four times a
	// second would be its largest cost there, and with the backlog never
	// full no task can be asleep in it. Set before Run.
	Lazy bool
}

// How often the watcher looks for tasks asleep in audit_log_start.
const watchTick = 250 * time.Millisecond

// NewWatcher starts a watch from first (already read; nil if it could not
// be). now stamps samples; sleepers, if not nil, lists the tasks asleep in
// audit_log_start now (a BPF task iterator: no file per task). Nothing is
// read until Run.
func NewWatcher(first *Status, now func() uint64, sleepers func() []Sleeper) *Watcher {
	w := &Watcher{byTID: map[uint32]int{}, stop: make(chan struct{}), done: make(chan struct{}),
		sleepers: sleepers, now: now, status: GetStatus}
	w.w.Every = uint64(watchTick)
	if first != nil {
		s := Sample{At: now(), Status: *first}
		w.w.Start = &s
		w.w.Samples = append(w.w.Samples, s)
		w.stalling.Store(first.Full())
	}
	return w
}

// Stalling says whether audited syscalls are waiting for room in the
// backlog now, as far as the watch knows: then every open of a file by an
// audited process may wait too, and a caller that can do without reading
// files should.
func (w *Watcher) Stalling() bool { return w.stalling.Load() }

// Record adds a status read elsewhere.
func (w *Watcher) Record(st *Status) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.w.Samples = append(w.w.Samples, Sample{At: w.now(), Status: *st})
}

// Run follows the audit status until Stop: the status every statusEvery
// (each request makes the kernel put the sender to sleep while the backlog
// is full, so not often, and never two at once), the tasks asleep in
// audit_log_start every watchTick while audit is on, and the registered
// daemon from its files, in the background.
func (w *Watcher) Run(statusEvery time.Duration) {
	w.mu.Lock()
	var first *Status
	if w.w.Start != nil {
		st := w.w.Start.Status
		first = &st
		w.describe(first)
	}
	w.running = true
	w.mu.Unlock()
	go w.run(first, max(1, int(statusEvery/watchTick)))
}

// describe reads the registered daemon's files in the background when it
// is new, or again while the backlog is full (its socket and its CPU
// throttling then say why). Called with mu held.
func (w *Watcher) describe(st *Status) {
	if st.PID == 0 || w.describing || (st.PID == w.described && !st.Full()) {
		return
	}
	w.describing, w.described = true, st.PID
	ready := make(chan struct{})
	w.daemonReady = ready
	go func() {
		// Its name first (one file): on a sick host the rest may not be
		// read by the end.
		d := &Daemon{PID: st.PID, Comm: Comm(st.PID)}
		w.mu.Lock()
		if w.w.Daemon == nil || w.w.Daemon.PID != st.PID {
			w.w.Daemon = d
		}
		w.mu.Unlock()
		d = readDaemon(st.PID, d.Comm)
		w.mu.Lock()
		w.w.Daemon, w.describing = d, false
		w.mu.Unlock()
		close(ready)
	}()
}

// run follows the status from the first read (nil if it failed).
func (w *Watcher) run(first *Status, statusEvery int) {
	defer close(w.done)
	t := time.NewTimer(watchTick)
	defer t.Stop()
	prev := first
	on := first != nil && first.Enabled != 0
	// blind: the status cannot be read (no CAP_AUDIT_CONTROL, another pid
	// namespace), so whether audit is on is unknown: look anyway, once a
	// second when lazy.
	blind := first == nil
	for tick := 1; ; tick++ {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		if tick%statusEvery == 0 {
			// No read while the last sender sleeps: the host is as sick
			// as it was.
			st, err := w.read()
			switch {
			case err != nil:
				blind = true
			case st != nil:
				blind = false
				on = st.Enabled != 0
				w.stalling.Store(st.Full() || prev != nil &&
					(growth(prev.BacklogWaitTimeActual, st.BacklogWaitTimeActual) > 0 || growth(prev.Lost, st.Lost) > 0))
				prev = st
			}
		}
		look := on && (!w.Lazy || w.stalling.Load())
		if blind {
			look = !w.Lazy || tick%blindEvery == 0
		}
		if look && w.sleepers != nil {
			found := w.sleepers()
			w.look(found)
			if blind {
				w.stalling.Store(len(found) > 0)
			}
		}
		skip := sleepTicks(tick, statusEvery, w.Lazy, blind, w.stalling.Load())
		tick += skip - 1
		t.Reset(time.Duration(skip) * watchTick)
	}
}

// sleepTicks is how many ticks the watcher sleeps after tick. A lazy
// watcher has nothing to do between its status reads while it finds no
// stall, and between its looks while it is blind: it sleeps till the next,
// and does not wake an idle agent at every tick.
func sleepTicks(tick, statusEvery int, lazy, blind, stalling bool) int {
	switch {
	case !lazy:
		return 1
	case blind:
		return min(statusEvery-tick%statusEvery, blindEvery-tick%blindEvery)
	case !stalling:
		return statusEvery - tick%statusEvery
	}
	return 1
}

// blindEvery is how many ticks a lazy watcher that cannot read the status
// waits between looks: a second. Tasks wait up to backlog_wait_time (60 s
// by default) at a time while the backlog is full, so a look a second
// still finds them, for a walk of the host's tasks a second.
const blindEvery = int(time.Second / watchTick)

// read takes one status sample, unless the last request's sender is still
// asleep in the kernel (nil, nil).
func (w *Watcher) read() (*Status, error) {
	if Sending() {
		return nil, nil
	}
	st, err := w.status()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.w.Err = err.Error()
		return nil, err
	}
	w.w.Samples = append(w.w.Samples, Sample{At: w.now(), Status: *st})
	w.describe(st)
	return st, nil
}

func (w *Watcher) look(found []Sleeper) {
	at := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.w.Looks++
	for _, s := range found {
		i, ok := w.byTID[s.TID]
		if !ok {
			s.Seen, s.First = 0, at
			w.w.Sleepers = append(w.w.Sleepers, s)
			i = len(w.w.Sleepers) - 1
			w.byTID[s.TID] = i
		}
		p := &w.w.Sleepers[i]
		p.Seen++
		p.Last = at
		if p.Syscall == "" {
			p.Syscall = s.Syscall
		}
	}
}

// Cut returns the window so far and starts the next at its last status
// read, the watch going on: an agent's rolling windows. The counters of
// the window returned grow from the previous cut's last read to this
// one's, so no wait falls between two windows. hz is set on it.
func (w *Watcher) Cut(hz int) *Window {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.w
	out.HZ = hz
	out.Samples = append([]Sample(nil), w.w.Samples...)
	out.Sleepers = append([]Sleeper(nil), w.w.Sleepers...)
	w.w.Start, w.w.End, w.w.Samples, w.w.Sleepers, w.w.Looks, w.w.Err = nil, nil, nil, nil, 0, ""
	clear(w.byTID)
	if n := len(out.Samples); n > 0 {
		last := out.Samples[n-1]
		if n > 1 {
			out.End = &last
		}
		w.w.Start = &last
		w.w.Samples = []Sample{last}
		w.w.carried = true
	}
	return &out
}

// Stop ends the watch with a last status read and returns the window. It
// waits at most wait for the last read and the daemon's description.
func (w *Watcher) Stop(wait time.Duration) *Window {
	close(w.stop)
	w.mu.Lock()
	running := w.running
	w.mu.Unlock()
	if running {
		<-w.done
	}
	if w.sleepers != nil && w.w.Start != nil && w.w.Start.Status.Enabled != 0 {
		w.look(w.sleepers())
	}
	deadline := time.After(wait)
	end := make(chan *Status, 1)
	go func() {
		st, err := w.status()
		if err != nil {
			w.mu.Lock()
			w.w.Err = err.Error()
			w.mu.Unlock()
		}
		end <- st
	}()
	select {
	case st := <-end:
		if st != nil {
			s := Sample{At: w.now(), Status: *st}
			w.mu.Lock()
			w.w.End = &s
			w.w.Samples = append(w.w.Samples, s)
			w.mu.Unlock()
		}
	case <-deadline:
	}
	w.mu.Lock()
	ready := w.daemonReady
	w.mu.Unlock()
	if ready != nil {
		select {
		case <-ready:
		case <-deadline:
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.w
	out.Samples = append([]Sample(nil), w.w.Samples...)
	out.Sleepers = append([]Sleeper(nil), w.w.Sleepers...)
	return &out
}
