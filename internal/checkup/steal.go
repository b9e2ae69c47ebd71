package checkup

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
	hostfacts "github.com/sysray/sysray/internal/host"
)

// stealEvery is how often the live doctor reads the CPUs' steal time.
// /proc/stat counts it in 10 ms units, and slow-syscall warns on a call
// whose own time reaches 100 ms: reads 50 ms apart place steal within half
// of the shortest call it could excuse. A read is one small file of a few
// lines per CPU, but 20 a second, each waking the process, were an eighth
// of an idle agent's CPU (perf, 2026-11-30): hence stealQuietEvery.
const stealEvery = 50 * time.Millisecond

// StealWatch reads every CPU's steal time into a log until stopped, except
// while the host is sick (an open of /proc waits with everyone else then).
type StealWatch struct {
	log  *doctor.StealLog
	stop chan struct{}
	done chan struct{}
}

// stealQuietEvery is how often it reads while quiet says no call is being
// seen: the agent's syscall programs are paused 95% of the time, and there
// is no call then whose time the steal could excuse. A read at the resume
// opens the next stretch; this one only finds a quiet that ended unseen
// (the agent replaced its probe).
const stealQuietEvery = time.Second

// WatchSteal starts reading; sick says when not to. quiet, if not nil, says
// whether calls are being seen, and gives a channel closed when they are
// again (probe.Probe.Quiet).
func WatchSteal(sick func() bool, quiet func() (bool, <-chan struct{})) *StealWatch {
	w := &StealWatch{log: doctor.NewStealLog(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(stealEvery)
		defer t.Stop()
		every := stealEvery
		for {
			if !sick() {
				s, err := hostfacts.Steal()
				if err != nil {
					return // no /proc/stat: nothing to excuse calls with
				}
				w.log.Add(hostfacts.Mono(), s)
			}
			var resumed <-chan struct{}
			next := stealEvery
			if quiet != nil {
				var calm bool
				if calm, resumed = quiet(); calm {
					next = stealQuietEvery
				} else {
					resumed = nil // not waited on while calls are seen: it may be the one the last resume closed
				}
			}
			if next != every {
				every = next
				t.Reset(every)
			}
			select {
			case <-w.stop:
				return
			case <-resumed:
			case <-t.C:
			}
		}
	}()
	return w
}

// Log is the reads so far (and those to come, until Stop).
func (w *StealWatch) Log() *doctor.StealLog { return w.log }

// Stop ends the reads and returns the log.
func (w *StealWatch) Stop() *doctor.StealLog {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	return w.log
}
