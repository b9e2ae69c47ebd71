package symbol

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestFollowerRounds walks the reading policy on a made-up clock: read
// when first seen, again a second later, then no more; a failed second
// read is retried a second later.
func TestFollowerRounds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var clock time.Time
	var reads []uint32
	failing := map[uint32]bool{2: true}
	snap := func(pid uint32) error {
		reads = append(reads, pid)
		if failing[pid] {
			return errors.New("gone")
		}
		return nil
	}
	f := follower{}
	for _, step := range []struct {
		at   time.Duration
		pids []uint32
		want []uint32
	}{
		{0, []uint32{1, 2}, []uint32{1, 2}},                       // first seen, even if the read fails
		{500 * time.Millisecond, []uint32{1, 2}, nil},             // too soon
		{time.Second, []uint32{1, 2}, nil},                        // a second is not more than one
		{1200 * time.Millisecond, []uint32{1, 2}, []uint32{1, 2}}, // second read: 1 is done, 2 failed
		{2 * time.Second, []uint32{1, 2, 3}, []uint32{3}},         // 3 is new; 2 was tried 0.8 s ago
		{2300 * time.Millisecond, []uint32{1, 2, 3}, []uint32{2}},
		{9 * time.Second, []uint32{1, 3}, []uint32{3}}, // 1 never again; 2 is not listed
	} {
		clock = t0.Add(step.at)
		reads = nil
		f.round(step.pids, func() time.Time { return clock }, snap)
		if !slices.Equal(reads, step.want) {
			t.Errorf("at %v: read %v, want %v", step.at, reads, step.want)
		}
	}
}

// TestFollow runs Follow over a hand-written /proc: a process it was told
// of resolves after its entry is gone, and Follow returns once stopped.
func TestFollow(t *testing.T) {
	proc := t.TempDir()
	dir := filepath.Join(proc, "42")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "maps"), "00401000-00402000 r-xp 00001000 fd:01 123 /opt/app/bin\n")
	r := NewResolver()
	defer r.Close()
	r.procRoot = proc
	asked := make(chan struct{}, 100)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Follow(func() []uint32 { asked <- struct{}{}; return []uint32{42} }, stop)
	}()
	select {
	case <-asked:
	case <-time.After(5 * time.Second):
		t.Fatal("Follow never asked for the processes to follow")
	}
	// The first round's read ends before the next round asks again.
	select {
	case <-asked:
	case <-time.After(5 * time.Second):
		t.Fatal("Follow asked only once")
	}
	close(stop)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Follow did not return once stopped")
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	want := Frame{Addr: 0x401234, File: "/opt/app/bin"}
	if got := r.Resolve(42, 0x401234); got != want {
		t.Errorf("after exit, Resolve = %+v, want %+v", got, want)
	}
}
