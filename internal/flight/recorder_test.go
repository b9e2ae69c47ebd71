package flight

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
)

const ms = uint64(time.Millisecond)

// genEvents returns n events step ns apart from t0, numbered by
// Syscall.Args[0] (or Fault.Addr), with the stacks, sleeps, captured data
// and process fields a real capture carries, so a round trip checks them.
func genEvents(n int, t0, step uint64, seed uint64) []event.Event {
	rng := rand.New(rand.NewPCG(seed, 1))
	evs := make([]event.Event, n)
	for i := range evs {
		e := &evs[i]
		tid := uint32(100 + rng.IntN(4))
		*e = event.Event{Time: t0 + uint64(i)*step, TID: tid, PID: 100, CPU: uint32(rng.IntN(2)), Comm: "web", Cgroup: 77}
		switch i % 10 {
		case 7:
			e.Kind = event.KindPageFault
			e.Fault = event.Fault{Addr: uint64(i), IP: 0x401000 + uint64(rng.IntN(64)), Error: 6}
		case 9:
			if i%100 == 99 {
				e.Kind = event.KindExit
				e.Proc = event.Proc{ExitCode: 137, GroupDead: true, CgroupPath: "/kubepods/web"}
				continue
			}
			fallthrough
		default:
			e.Kind = event.KindSyscall
			e.Syscall = event.Syscall{
				Nr: uint32(rng.IntN(3)), Args: [6]uint64{uint64(i), 3, 0x7ffd0000 + uint64(rng.IntN(4096))},
				Ret: int64(rng.IntN(4096)), Latency: 1000 + rng.Uint64N(100_000),
				UserStack: []event.Frame{{Addr: 0x401234, Name: "main.serve"}, {Addr: 0x402000 + uint64(rng.IntN(8)), Name: "main.main"}},
			}
			if i%3 == 0 {
				e.Syscall.Data[1] = []byte(fmt.Sprintf("GET /item/%d HTTP/1.1", rng.IntN(1000)))
				e.Syscall.Sleeps = []event.Sleep{{Duration: 5000, Count: 1, Stack: []event.Frame{{Addr: 0xffffffff81000000, Name: "schedule"}}, WakerPID: 9, WakerTID: 9, WakerComm: "db"}}
			}
		}
	}
	return evs
}

func readAll(t *testing.T, path string) (*capture.Reader, []event.Event) {
	t.Helper()
	r, err := capture.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	var evs []event.Event
	for {
		var e event.Event
		err := r.Next(&e)
		if err == io.EOF {
			return r, evs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		evs = append(evs, e)
	}
}

func checkPrivate(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("%s is %v, want 0600", path, st.Mode().Perm())
	}
}

func TestRoundTrip(t *testing.T) {
	evs := genEvents(1000, 5_000*ms, 10*ms, 1) // 10 s, within the window
	r := New(Config{})
	for i := range evs {
		r.Add(&evs[i])
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "snap.sysray")
	hdr := &capture.Header{Hostname: "node1", BootTime: 1_700_000_000_000_000_000, Meta: map[string]string{"kernel": "6.8"}}
	s, err := r.Snapshot(path, hdr, "oom-kill in web")
	if err != nil {
		t.Fatal(err)
	}
	if hdr.Meta[MetaReason] != "" || len(hdr.Meta) != 1 || hdr.Start != 0 {
		t.Fatal("Snapshot modified the caller's header")
	}
	checkPrivate(t, path)
	cr, got := readAll(t, path)
	if len(got) != len(evs) || !reflect.DeepEqual(got, evs) {
		t.Fatalf("read back %d events, added %d (or they differ)", len(got), len(evs))
	}
	first, last := evs[0].Time, evs[len(evs)-1].Time
	if s.Events != 1000 || s.First != first || s.Last != last || s.Blocks != 10 {
		t.Fatalf("summary %+v", s)
	}
	if st, _ := os.Stat(path); st.Size() != s.Bytes {
		t.Fatalf("summary says %d bytes, file has %d", s.Bytes, st.Size())
	}
	h := cr.Header()
	if h.Hostname != "node1" || h.Meta["kernel"] != "6.8" || h.Meta[MetaReason] != "oom-kill in web" ||
		h.Meta[MetaFirst] != strconv.FormatUint(first, 10) || h.Meta[MetaLast] != strconv.FormatUint(last, 10) {
		t.Fatalf("header %+v", h)
	}
	if h.Start != hdr.BootTime+int64(first) || cr.Trailer().End != hdr.BootTime+int64(last) || cr.Trailer().Events != 1000 {
		t.Fatalf("start %d, trailer %+v", h.Start, cr.Trailer())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("directory holds %d files, want the capture alone", len(ents))
	}

	// A second snapshot keeps everything the recorder holds, and never
	// replaces a file.
	if _, err := r.Snapshot(path, hdr, "again"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("snapshot over an existing file: %v", err)
	}
	if _, again := readAll(t, path); len(again) != 1000 {
		t.Fatal("existing capture changed")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("a refused snapshot left %d files", len(ents))
	}
	path2 := filepath.Join(dir, "snap2.sysray")
	more := genEvents(5, last+ms, ms, 2)
	for i := range more {
		r.Add(&more[i])
	}
	if _, got := readAll(t, mustSnap(t, r, path2)); !reflect.DeepEqual(got, append(evs, more...)) {
		t.Fatalf("second snapshot: %d events", len(got))
	}

	// An empty recorder gives a valid, empty capture.
	p3 := filepath.Join(dir, "empty.sysray")
	if s, err := New(Config{}).Snapshot(p3, nil, "sigusr1"); err != nil || s.Events != 0 {
		t.Fatal(s, err)
	}
	if cr, got := readAll(t, p3); len(got) != 0 || cr.Header().Meta[MetaReason] != "sigusr1" {
		t.Fatal("empty snapshot")
	}
}

func mustSnap(t *testing.T, r *Recorder, path string) string {
	t.Helper()
	if _, err := r.Snapshot(path, nil, "test"); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestWindowByTime: 100 s of events 10 ms apart with a 30 s window and
// 1 s blocks. Blocks hold events [100k, 100k+99]; the newest event is
// #9999, so block k is kept while 9999 - (100k+99) <= 3000 (in 10 ms),
// i.e. from k = 69: events 6900-9999.
func TestWindowByTime(t *testing.T) {
	evs := genEvents(10_000, 1_000*ms, 10*ms, 3)
	r := New(Config{Window: 30 * time.Second})
	for i := range evs {
		r.Add(&evs[i])
	}
	st := r.Stats()
	// Event 9999 is in the open block [9900, 9999].
	if st.Open != 100 || st.Blocks != 30 || st.Events != 3000 || st.DroppedBlocks != 69 || st.DroppedEvents != 6900 {
		t.Fatalf("stats %+v", st)
	}
	_, got := readAll(t, mustSnap(t, r, filepath.Join(t.TempDir(), "w.sysray")))
	if !reflect.DeepEqual(got, evs[6900:]) {
		t.Fatalf("snapshot has %d events from #%d, want 3100 from #6900", len(got), got[0].Syscall.Args[0])
	}
	newest := evs[len(evs)-1].Time
	if got[0].Time > newest-uint64(30*time.Second) {
		t.Fatal("snapshot reaches back less than the window")
	}
	if st := r.Stats(); st.Open != 0 || st.Blocks != 31 {
		t.Fatalf("after snapshot: %+v", st)
	}
}

// TestWindowBySize: with a window far longer than the events, only the
// byte cap drops blocks. The expected blocks are built apart with the same
// boundaries (every 100 events, 1 s); the recorder must keep the longest
// run of newest blocks that fits.
func TestWindowBySize(t *testing.T) {
	evs := genEvents(5_000, 0, 10*ms, 4)
	var sizes []int
	bb := capture.NewBlockBuilder()
	for i := range evs {
		bb.Add(&evs[i])
		if bb.Len() == 100 {
			sizes = append(sizes, bb.Finish().Size())
		}
	}
	const maxBytes = 40 << 10
	keep, total := 0, 0
	for k := len(sizes) - 1; k >= 0 && total+sizes[k] <= maxBytes; k-- {
		total += sizes[k]
		keep++
	}
	if keep == 0 || keep == len(sizes) {
		t.Fatalf("cap keeps %d of %d blocks: test does not test the cap", keep, len(sizes))
	}
	t.Logf("%d-byte cap keeps %d of %d blocks (%d bytes)", maxBytes, keep, len(sizes), total)
	r := New(Config{Window: time.Hour, MaxBytes: maxBytes})
	for i := range evs {
		r.Add(&evs[i])
	}
	path := mustSnap(t, r, filepath.Join(t.TempDir(), "s.sysray"))
	st := r.Stats()
	from := len(evs) - 100*keep
	if st.Blocks != keep || st.Bytes != int64(total) || st.DroppedEvents != uint64(from) || st.DroppedBlocks != uint64(len(sizes)-keep) {
		t.Fatalf("stats %+v; want %d blocks of %d bytes, %d events dropped", st, keep, total, from)
	}
	if _, got := readAll(t, path); !reflect.DeepEqual(got, evs[from:]) {
		t.Fatalf("snapshot has %d events, want the last %d", len(got), len(evs)-from)
	}
}

// TestBlockBytes: blocks are sealed by encoded size too.
func TestBlockBytes(t *testing.T) {
	evs := genEvents(2_000, 0, 1000, 5) // 2 ms in all: never by time
	r := New(Config{BlockBytes: 16 << 10})
	for i := range evs {
		r.Add(&evs[i])
	}
	st := r.Stats()
	if st.Blocks < 3 || st.Events+st.Open != len(evs) {
		t.Fatalf("stats %+v", st)
	}
	if _, got := readAll(t, mustSnap(t, r, filepath.Join(t.TempDir(), "b.sysray"))); !reflect.DeepEqual(got, evs) {
		t.Fatal("round trip with size-sealed blocks")
	}
}

func TestRejected(t *testing.T) {
	r := New(Config{})
	big := make([]byte, 40<<20)
	e := event.Event{Kind: event.KindSyscall, Time: 1, Syscall: event.Syscall{Data: [6][]byte{big, big}}}
	r.Add(&e)
	small := event.Event{Kind: event.KindSyscall, Time: 2}
	r.Add(&small)
	if st := r.Stats(); st.Rejected != 1 || st.Open != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestConcurrentSnapshot snapshots while events are added (run with
// -race): every snapshot must be a whole capture holding a gapless run of
// events ending no earlier than the last event added before it began.
func TestConcurrentSnapshot(t *testing.T) {
	const n = 40_000
	evs := genEvents(n, 0, 250_000, 6) // 10 s of events, window 3 s
	r := New(Config{Window: 3 * time.Second, BlockBytes: 64 << 10})
	var added sync.WaitGroup
	var last atomic.Int64 // the latest event added
	last.Store(-1)
	mid := make(chan struct{}) // holds the adder halfway until snapshots have overlapped it
	added.Go(func() {
		for i := range evs {
			if i == n/2 {
				<-mid
			}
			r.Add(&evs[i])
			last.Store(int64(i))
		}
	})
	dir := t.TempDir()
	for k := 0; k < 12; k++ {
		if k == 4 {
			close(mid)
		}
		before := int(last.Load())
		path := filepath.Join(dir, fmt.Sprintf("c%d.sysray", k))
		s, err := r.Snapshot(path, nil, "concurrent")
		if err != nil {
			t.Fatal(err)
		}
		_, got := readAll(t, path)
		if len(got) != s.Events {
			t.Fatalf("snapshot %d: summary %d events, file %d", k, s.Events, len(got))
		}
		if len(got) == 0 {
			if before >= 0 {
				t.Fatalf("snapshot %d empty after event %d", k, before)
			}
			continue
		}
		start := int(got[0].Time / 250_000) // events are numbered by time
		if !reflect.DeepEqual(got, evs[start:start+len(got)]) {
			t.Fatalf("snapshot %d: not a gapless run from event %d", k, start)
		}
		if end := start + len(got) - 1; end < before {
			t.Fatalf("snapshot %d ends at event %d, before %d which was added before it", k, end, before)
		}
		time.Sleep(time.Millisecond)
	}
	added.Wait()
	st := r.Stats()
	if st.Events+st.Open+int(st.DroppedEvents) != n {
		t.Fatalf("stats %+v do not add up to %d", st, n)
	}
}

// BenchmarkAdd measures the event reader's cost per event on the format's
// worst case (a getppid loop: nothing but timing noise to compress) and on
// events with stacks and captured data.
func BenchmarkAdd(b *testing.B) {
	b.Run("getppid", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(1, 2))
		e := event.Event{Kind: event.KindSyscall, Time: 1, CPU: 3, PID: 4242, TID: 4242, Comm: "getppid-loop",
			Syscall: event.Syscall{Nr: 110, Ret: 4100}}
		benchAdd(b, func() *event.Event {
			e.Time += e.Syscall.Latency + 250 + rng.Uint64N(100)
			e.Syscall.Latency = 256 + rng.Uint64N(1<<20-256)
			return &e
		})
	})
	b.Run("stacks", func(b *testing.B) {
		evs := genEvents(100_000, 0, 0, 7)
		i := 0
		var t uint64
		benchAdd(b, func() *event.Event {
			e := &evs[i%len(evs)]
			t += 20_000
			e.Time = t
			i++
			return e
		})
	})
}

func benchAdd(b *testing.B, next func() *event.Event) {
	r := New(Config{Window: time.Hour, MaxBytes: 1 << 40})
	b.ReportAllocs()
	for b.Loop() {
		r.Add(next())
	}
	r.mu.Lock()
	r.seal()
	r.mu.Unlock()
	st := r.Stats()
	b.ReportMetric(float64(st.Bytes)/float64(st.Events), "bytes/event")
}
