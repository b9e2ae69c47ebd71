package doctor

import (
	"fmt"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/units"
)

// timeSum adds up the latencies of calls of which some were not timed
// (budgeted timing: past a thread's budget, 1 call in 16 reads the clock).
// An untimed call counts as the mean of the timed ones, as the kernel's
// table counts a sampled call for the 16 it stands for; adding its 0
// instead made 481 failing mmaps, ~3 µs each, "take 50 µs in all".
type timeSum struct {
	ns, timed, untimed uint64
}

func (t *timeSum) add(s *event.Syscall) {
	if s.Untimed() {
		t.untimed++
		return
	}
	t.timed++
	t.ns += s.Latency
}

// total is the estimated time of all the calls; 0 when none was timed.
func (t timeSum) total() uint64 {
	if t.timed == 0 {
		return 0
	}
	return t.ns + uint64(float64(t.untimed)*float64(t.ns)/float64(t.timed))
}

// String is the total for people: "about" and how many calls the clock
// timed when some were estimated.
func (t timeSum) String() string {
	if t.untimed == 0 {
		return units.Duration(t.ns)
	}
	if t.timed == 0 {
		return "an unknown time (none timed by the clock)"
	}
	return fmt.Sprintf("about %s (%d of %d timed by the clock)", units.Duration(t.total()), t.timed, t.timed+t.untimed)
}
