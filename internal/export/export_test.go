package export

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// recorder keeps what a Sink is given.
type recorder struct {
	tracks []*Track
	items  []Item
}

func (r *recorder) Begin(h Header, tracks []*Track) error { r.tracks = tracks; return nil }
func (r *recorder) Item(it *Item) error {
	c := *it
	c.Args = slices.Clone(it.Args)
	r.items = append(r.items, c)
	return nil
}
func (r *recorder) End() error { return nil }

func source(evs []event.Event) Source {
	return Source{Arch: event.ArchAMD64, Events: func(fn func(*event.Event) error) error {
		for i := range evs {
			e := evs[i]
			if err := fn(&e); err != nil {
				return err
			}
		}
		return nil
	}}
}

// Whatever the calls' times, the slices on any one track neither overlap
// nor touch, every call is on its own thread's track or one of its lanes,
// and a thread needs no more lanes than calls overlap at once.
func TestLanesKeepTracksNested(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var evs []event.Event
		depth := map[uint32]int{}
		for tid := uint32(1); tid <= 3; tid++ {
			at := uint64(1000)
			var spans [][2]uint64
			for range 1 + rng.IntN(30) {
				// Mostly sequential, sometimes overlapping or touching.
				switch rng.IntN(4) {
				case 0:
					at -= min(at, uint64(rng.IntN(50)))
				case 1:
				default:
					at += uint64(rng.IntN(50))
				}
				lat := uint64(rng.IntN(60))
				e := event.Event{Kind: event.KindSyscall, Time: at, PID: 1, TID: tid, Comm: "t"}
				e.Syscall.Nr, e.Syscall.Latency = 39, lat
				evs = append(evs, e)
				if lat > 0 {
					spans = append(spans, [2]uint64{at, at + lat})
				}
				at += lat
			}
			// The most calls that share an instant (ends included).
			for _, s := range spans {
				n := 0
				for _, o := range spans {
					if o[0] <= s[0] && s[0] <= o[1] {
						n++
					}
				}
				depth[tid] = max(depth[tid], n)
			}
		}
		rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
		var r recorder
		st, err := Export(source(evs), &r, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if st.Slices != len(evs) {
			t.Fatalf("round %d: %d slices of %d calls", round, st.Slices, len(evs))
		}
		lanes := map[uint32]int{}
		for _, tk := range r.tracks {
			if tk.Kind == TrackLane {
				lanes[tk.TID]++
			}
		}
		for tid, d := range depth {
			if lanes[tid] > max(d-1, 0) {
				t.Errorf("round %d: thread %d has %d lanes for calls at most %d deep", round, tid, lanes[tid], d)
			}
		}
		byTrack := map[*Track][]Item{}
		for _, it := range r.items {
			if it.Kind == Counter {
				continue
			}
			if it.Track.TID != 0 && it.Kind == Instant && it.Track.Kind == TrackLane {
				t.Errorf("round %d: a zero-length call on a lane", round)
			}
			if it.Kind == Slice {
				byTrack[it.Track] = append(byTrack[it.Track], it)
			}
		}
		for tk, list := range byTrack {
			slices.SortFunc(list, func(a, b Item) int { return int(a.Time) - int(b.Time) })
			for i := 1; i < len(list); i++ {
				if list[i].Time <= list[i-1].Time+list[i-1].Dur {
					t.Fatalf("round %d: track %q: [%d +%d] and [%d +%d] overlap or touch", round, tk.Name,
						list[i-1].Time, list[i-1].Dur, list[i].Time, list[i].Dur)
				}
			}
		}
	}
}

// A capture that reads differently the second time is an error, not a
// panic or a thread without a track.
func TestChangedCapture(t *testing.T) {
	calls := 0
	src := Source{Arch: event.ArchAMD64, Events: func(fn func(*event.Event) error) error {
		calls++
		e := event.Event{Kind: event.KindExit, Time: 1, PID: 1, TID: uint32(calls)}
		return fn(&e)
	}}
	if _, err := Export(src, &recorder{}, Options{}); !errors.Is(err, errChanged) {
		t.Errorf("got %v", err)
	}
	failing := errors.New("read error")
	src.Events = func(fn func(*event.Event) error) error { return failing }
	if _, err := Export(src, &recorder{}, Options{}); !errors.Is(err, failing) {
		t.Errorf("got %v", err)
	}
}

// A thread id that a second process reuses later is a second thread, under
// its own process, with its own calls.
func TestReusedThreadID(t *testing.T) {
	var evs []event.Event
	for i, pid := range []uint32{10, 20} {
		e := event.Event{Kind: event.KindSyscall, Time: uint64(1000 * (i + 1)), PID: pid, TID: 77, Comm: "c" + string(rune('a'+i))}
		e.Syscall.Nr, e.Syscall.Latency = 39, 100
		evs = append(evs, e)
	}
	var r recorder
	if _, err := Export(source(evs), &r, Options{}); err != nil {
		t.Fatal(err)
	}
	parent := map[uint64]*Track{}
	for _, tk := range r.tracks {
		parent[tk.UUID] = tk
	}
	var threads []string
	for _, tk := range r.tracks {
		if tk.Kind == TrackThread {
			threads = append(threads, tk.Name+"@"+parent[tk.Parent].Name)
		}
	}
	if !slices.Equal(threads, []string{"ca@ca", "cb@cb"}) {
		t.Errorf("threads %v", threads)
	}
	for _, it := range r.items {
		if it.Kind == Slice && parent[it.Track.Parent].PID != it.Track.PID {
			t.Errorf("slice on %+v", it.Track)
		}
	}
	if r.items[len(r.items)-2].Track == r.items[len(r.items)-1].Track {
		t.Error("both calls on one track")
	}
}
