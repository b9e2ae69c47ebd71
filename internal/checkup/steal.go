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
// lines per CPU: 20 a second cost well under a millisecond of CPU.
const stealEvery = 50 * time.Millisecond

// StealWatch reads every CPU's steal time into a log until stopped, except
// while the host is sick (an open of /proc waits with everyone else then).
type StealWatch struct {
	log  *doctor.StealLog
	stop chan struct{}
	done chan struct{}
}

// WatchSteal starts reading; sick says when not to.
func WatchSteal(sick func() bool) *StealWatch {
	w := &StealWatch{log: doctor.NewStealLog(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(stealEvery)
		defer t.Stop()
		for {
			if !sick() {
				s, err := hostfacts.Steal()
				if err != nil {
					return // no /proc/stat: nothing to excuse calls with
				}
				w.log.Add(hostfacts.Mono(), s)
			}
			select {
			case <-w.stop:
				return
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
