package doctor

import (
	"sync"
	"time"
)

// A watch reads a few counters on a clock of its own, live, until what it
// reads is gone or the report closes it. A detector that reads the host
// only on its events misses what happens between them: a process may make
// none while it suffers (a throttled spinner's calls are too fast to be
// events), or make them more and more rarely (a reader on a fast device
// waits less and less), and the cgroup that counted it is removed as its
// command ends (systemd-run --scope, a container's, cgrun's), before the
// report can read it. The counters are cumulative, so the last read is
// what counts; a clock bounds how far it trails the end.
type watch struct {
	every time.Duration
	// canRead, if set, says whether opening a file may stall now (a full
	// audit backlog): then a tick reads nothing.
	canRead func() bool

	mu      sync.Mutex
	keys    map[string]*watched
	running bool
	stop    chan struct{}
	done    chan struct{}
}

type watched struct {
	read func() (map[string]int64, bool) // false: gone for good
	last map[string]int64
	gone bool
}

// watchMax bounds what a watch reads on its clock: each key costs a few
// small file reads a tick.
const watchMax = 64

// newWatch makes a watch that ticks every every; 0 leaves the ticks to
// the caller (tests).
func newWatch(every time.Duration, canRead func() bool) *watch {
	return &watch{every: every, canRead: canRead, keys: map[string]*watched{}}
}

// add watches key, read by read, and starts the clock if it is not
// running. A key already watched keeps its first read function.
func (w *watch) add(key string, read func() (map[string]int64, bool)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.keys[key]; !ok {
		if len(w.keys) >= watchMax {
			return
		}
		w.keys[key] = &watched{read: read}
	}
	if w.running || w.every <= 0 {
		return
	}
	w.running = true
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	go w.run(w.stop, w.done)
}

func (w *watch) run(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if !w.tick() {
				return
			}
		}
	}
}

// tick reads every watched key still there once. When none is left it
// stops the clock (running false, in the same hold of the lock that saw
// none, so that a key added meanwhile starts it again) and says false.
func (w *watch) tick() bool {
	if w.canRead != nil && !w.canRead() {
		return true
	}
	w.mu.Lock()
	todo := map[string]*watched{}
	for key, x := range w.keys {
		if !x.gone {
			todo[key] = x
		}
	}
	w.mu.Unlock()
	for _, x := range todo {
		s, ok := x.read()
		w.mu.Lock()
		if ok {
			x.last = s
		} else {
			x.gone = true
		}
		w.mu.Unlock()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, x := range w.keys {
		if !x.gone {
			return true
		}
	}
	w.running = false
	return false
}

// latest is the last read of key, nil if none.
func (w *watch) latest(key string) map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if x := w.keys[key]; x != nil {
		return x.last
	}
	return nil
}

// close stops the clock, and waits for a tick under way at most
// closeWait: a read that stalls (the host turned sick between the check
// and the open) must not hold the report; its result, if it comes, is
// still taken under the lock.
func (w *watch) close() {
	w.mu.Lock()
	running, stop, done := w.running, w.stop, w.done
	w.running = false
	w.mu.Unlock()
	if running {
		close(stop)
		select {
		case <-done:
		case <-time.After(closeWait):
		}
	}
}

const closeWait = time.Second
