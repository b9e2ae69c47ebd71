package doctor

import (
	"sync"
	"time"
)

// cpuWatch reads the CPU cgroups with a quota on a clock of its own, live.
// The other limits come with events of their own (a failed fork, a pass of
// reclaim); a throttled process may make none: a spinner's calls are too
// fast to be events, and since Linux 6.18 a throttled task is stopped on
// its way back to user space, so no call of its is stretched. Read only on
// its events, a cgroup removed as its command ends (systemd-run --scope,
// a container's, cgrun's) was last read at its first event, and its
// throttling never seen (CI once saw only cgrun's one slow write). The
// report takes the watch's last read when the cgroup is gone.
type cpuWatch struct {
	fs    cgFS
	every time.Duration
	// canRead, if set, says whether opening a file may stall now (a full
	// audit backlog): then a tick reads nothing.
	canRead func() bool

	mu      sync.Mutex
	dirs    map[string]*watched
	running bool
	stop    chan struct{}
	done    chan struct{}
}

type watched struct {
	v1   bool
	last map[string]int64
	gone bool
}

// cgWatchMax bounds the cgroups read on the clock: each costs three small
// file reads a tick.
const cgWatchMax = 64

func newCPUWatch(fs cgFS, every time.Duration, canRead func() bool) *cpuWatch {
	return &cpuWatch{fs: fs, every: every, canRead: canRead, dirs: map[string]*watched{}}
}

// add watches dir, and starts the clock if it is not running.
func (w *cpuWatch) add(dir string, v1 bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.dirs[dir]; !ok {
		if len(w.dirs) >= cgWatchMax {
			return
		}
		w.dirs[dir] = &watched{v1: v1}
	}
	if w.running || w.every <= 0 {
		return
	}
	w.running = true
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	go w.run(w.stop, w.done)
}

func (w *cpuWatch) run(stop, done chan struct{}) {
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

// tick reads every watched cgroup still there once. When none is left it
// stops the clock (running false, in the same hold of the lock that saw
// none, so that a cgroup added meanwhile starts it again) and says false.
func (w *cpuWatch) tick() bool {
	if w.canRead != nil && !w.canRead() {
		return true
	}
	w.mu.Lock()
	todo := map[string]*watched{}
	for dir, x := range w.dirs {
		if !x.gone {
			todo[dir] = x
		}
	}
	w.mu.Unlock()
	for dir, x := range todo {
		s, ok := cgSnapshot(w.fs, dir, ctlCPU, x.v1)
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
	for _, x := range w.dirs {
		if !x.gone {
			return true
		}
	}
	w.running = false
	return false
}

// latest is the last read of dir, nil if none.
func (w *cpuWatch) latest(dir string) map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if x := w.dirs[dir]; x != nil {
		return x.last
	}
	return nil
}

// close stops the clock, and waits for a tick under way at most
// closeWait: a read that stalls (the host turned sick between the check
// and the open) must not hold the report; its result, if it comes, is
// still taken under the lock.
func (w *cpuWatch) close() {
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
