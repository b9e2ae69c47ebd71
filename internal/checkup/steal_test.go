package checkup

import (
	"sync/atomic"
	"testing"
	"time"
)

// While quiet says no call is being seen, the watch looks once a second,
// not 20 times; the resume has it look at once, then every 50 ms. Its
// looks are counted through sick, which it asks once a look (and which
// says the host is sick, so that nothing is read).
func TestStealWatchQuiet(t *testing.T) {
	var looks atomic.Int32
	sick := func() bool { looks.Add(1); return true }
	var calm atomic.Bool
	calm.Store(true)
	resumed := make(chan struct{})
	w := WatchSteal(sick, func() (bool, <-chan struct{}) { return calm.Load(), resumed })
	defer w.Stop()

	time.Sleep(600 * time.Millisecond)
	if n := looks.Load(); n != 1 {
		t.Errorf("%d looks in 600 ms of quiet, want the first one only", n)
	}
	calm.Store(false)
	close(resumed)
	deadline := time.Now().Add(time.Second)
	for looks.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := looks.Load(); n < 2 {
		t.Fatalf("no look within a second of the resume")
	}
	from := looks.Load()
	time.Sleep(500 * time.Millisecond)
	// Every 50 ms: 10 in 500 ms; a loaded machine may delay some.
	if n := looks.Load() - from; n < 5 || n > 11 {
		t.Errorf("%d looks in 500 ms after the resume, want about 10", n)
	}
}
