package doctor

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
)

const tick = 4_000_000 // HZ=250

// jiffies rounds a latency the way ticks measure it (a long call the
// clock did not time, or a capture made with the doctor's older lean
// timing): the number of tick boundaries crossed, for an entry at a random
// phase of the tick.
func jiffies(rng *rand.Rand, lat uint64) uint64 {
	phase := uint64(rng.Int63n(tick))
	return ((phase + lat) / tick) * tick
}

// Thirty forks, each after 1,600 more mappings, timed in ticks, as captures
// made with tick-timed calls say: the growth is found from them, not only
// from 100 exact calls. Mappings come from the kernel's count on each event.
func TestGrowthFewTickTimedCalls(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var evs []event.Event
	tm := uint64(1e9)
	for i := range 30 {
		maps := 1600 * (i + 1)
		lat := uint64(maps) * 1700 // ~1.7 µs a mapping: 2.7 ms to 82 ms
		e := sys(5, tm, nrClone, int64(1000+i), jiffies(rng, lat))
		e.Syscall.Approx, e.Syscall.Maps = true, uint32(maps)
		evs = append(evs, e)
		tm += 100_000_000
	}
	f := byID(findings(evs), "latency-grows-with-count")
	if f == nil {
		t.Fatal("no latency-grows-with-count finding for 30 tick-timed forks")
	}
	if f.Evidence["grows_with"] != "memory mappings" || f.Evidence["calls_timed_in_ticks"] != uint64(30) {
		t.Errorf("evidence %v", f.Evidence)
	}
	if s := f.Evidence["slope_ns_per_unit"].(float64); s < 1200 || s > 2200 {
		t.Errorf("slope %.0f ns per mapping, want about 1700", s)
	}
}

// The same thirty calls with a flat latency, as noisy: nothing.
func TestFlatFewCallsDoNotGrow(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	var evs []event.Event
	tm := uint64(1e9)
	for i := range 30 {
		e := sys(5, tm, nrClone, int64(1000+i), jiffies(rng, 20_000_000))
		e.Syscall.Approx, e.Syscall.Maps = true, uint32(1600*(i+1))
		evs = append(evs, e)
		tm += 100_000_000
	}
	if f := byID(findings(evs), "latency-grows-with-count"); f != nil {
		t.Errorf("flat latency reported as growing: %s", f.Summary)
	}
}

func TestSignificant(t *testing.T) {
	for _, c := range []struct {
		r2   float64
		bins int
		want bool
	}{{0.96, 6, true}, {0.93, 6, false}, {0.75, 20, true}, {0.65, 20, false}, {0.99, 5, false}} {
		if got := significant(c.r2, c.bins); got != c.want {
			t.Errorf("significant(%.2f, %d) = %v", c.r2, c.bins, got)
		}
	}
}

const nrGetppid = 110

// A million getppid calls a second for 2 s, counted by the kernel, with
// one event a millisecond: hot-syscall, a warning, names the fix.
func TestHotSyscall(t *testing.T) {
	d := New(host, nil)
	tm := uint64(1e9)
	for range 2000 {
		e := sys(9, tm, nrGetppid, 8, 300)
		d.Observe(&e)
		tm += 1_000_000
	}
	d.Counts([]stat.Cell{{Key: stat.Key{PID: 9, Nr: nrGetppid}, Count: 2_000_000, Total: 2_000_000 * 450}})
	f := byID(checked(d.Report()).Findings, "hot-syscall")
	if f == nil || f.Severity != Warning {
		t.Fatalf("finding %+v", f)
	}
	if !strings.Contains(f.Summary, "does not change") || f.Evidence["calls"] != uint64(2_000_000) {
		t.Errorf("finding %s %v", f.Summary, f.Evidence)
	}
	if s := f.Evidence["share_of_time"].(float64); s < 0.4 || s > 0.5 {
		t.Errorf("share %.2f, want 0.45", s)
	}
}

// Calls that do real work in the kernel (50 µs each) are not hot-syscall's
// however many there are; and a few thousand cheap calls are start-up.
func TestHotSyscallNeedsCheapAndMany(t *testing.T) {
	for name, c := range map[string]struct{ n, mean uint64 }{"costly": {40_000, 50_000}, "few": {5_000, 300}} {
		d := New(host, nil)
		tm := uint64(1e9)
		for range 2000 {
			e := sys(9, tm, nrGetppid, 8, c.mean)
			d.Observe(&e)
			tm += 1_000_000
		}
		d.Counts([]stat.Cell{{Key: stat.Key{PID: 9, Nr: nrGetppid}, Count: c.n, Total: c.n * c.mean}})
		if f := byID(checked(d.Report()).Findings, "hot-syscall"); f != nil {
			t.Errorf("%s: %s", name, f.Title)
		}
	}
}

const nrFadvise = 221

// Three processes in one cgroup spending 40% of their time in a syscall
// that takes 20 µs a call: kernel-hotspot, a warning, though
// one cgroup holds them all. One or two such processes are reported too, as
// info: they may be doing their job.
func TestHotspotOneCgroup(t *testing.T) {
	for _, procs := range []int{1, 2, 3} {
		d := New(host, nil)
		tm := uint64(1e9)
		var cells []stat.Cell
		for pid := range uint32(procs) {
			for range 1000 {
				e := sys(4+pid, tm, nrFadvise, 0, 20000, 3, 0, 0, 4)
				e.Cgroup = 77
				d.Observe(&e)
				tm += 1_000_000
			}
			tm -= 1_000_000_000 // the processes run at the same time
			// 1 s of thread time, 20,000 calls of 20 µs: 0.4 s in fadvise64.
			cells = append(cells, stat.Cell{Key: stat.Key{Cgroup: 77, PID: 4 + pid, Nr: nrFadvise}, Count: 20000, Total: 400_000_000})
		}
		d.Counts(cells)
		f := byID(checked(d.Report()).Findings, "kernel-hotspot")
		want := map[int]Severity{1: Info, 2: Info, 3: Warning}[procs]
		if f == nil || f.Severity != want {
			t.Fatalf("%d processes: finding %+v, want %s", procs, f, want)
		}
		if strings.Contains(f.Summary, "cgroup limit") {
			t.Errorf("one cgroup, yet the summary speaks of cgroup limits: %s", f.Summary)
		}
	}
}

// Three processes creating many files spend 40% of their time in openat:
// their work, not a request repeated, so info; the same three re-creating
// one journal path are a warning. Git's shape: most opens are cheap
// re-opens of its few config files, and the time is in creating objects,
// each a new file: info too (the time, not the count, is spread).
func TestHotspotManyFiles(t *testing.T) {
	const nrOpenat = 257
	for _, c := range []struct {
		name string
		path func(pid uint32, i int) (string, uint64)
		want Severity
	}{
		{"many files", func(pid uint32, i int) (string, uint64) { return fmt.Sprintf("/x/%d/%d", pid, i), 400_000 }, Info},
		{"one journal", func(uint32, int) (string, uint64) { return "/var/db/t.db-journal", 400_000 }, Warning},
		{"config re-opened, objects created", func(pid uint32, i int) (string, uint64) {
			if i%5 != 0 {
				return fmt.Sprintf("/r/.git/config%d", i%3), 2_000
			}
			return fmt.Sprintf("/r/.git/objects/%d/%d", pid, i), 1_990_000
		}, Info},
	} {
		d := New(host, nil)
		tm := uint64(1e9)
		var cells []stat.Cell
		for pid := range uint32(3) {
			for i := range 1000 {
				path, lat := c.path(pid, i)
				e := sys(4+pid, tm, nrOpenat, 3, lat, ^uint64(99), 0x1000, 0o101, 0o644)
				e.Syscall.Data[1] = []byte(path)
				d.Observe(&e)
				tm += 1_000_000
			}
			tm -= 1_000_000_000
			cells = append(cells, stat.Cell{Key: stat.Key{PID: 4 + pid, Nr: nrOpenat}, Count: 1000, Total: 400_000_000})
		}
		d.Counts(cells)
		f := byID(checked(d.Report()).Findings, "kernel-hotspot")
		if f == nil || f.Severity != c.want {
			t.Errorf("%s: finding %+v, want %s", c.name, f, c.want)
		}
	}
}

const nrEpollWait = 232

// An epoll_wait that blocks (timeout -1) yet returns at once every time has
// a descriptor ready that the program does not drain (a listener whose
// accept fails with EMFILE): hot-syscall only informs; a zero timeout is
// polling, and warns.
func TestHotPollTimeout(t *testing.T) {
	for _, c := range []struct {
		timeout int32
		want    Severity
		words   string
	}{{-1, Info, "a descriptor is ready every time"}, {0, Warning, "polling"}} {
		d := New(host, nil)
		tm := uint64(1e9)
		for range 2000 {
			e := sys(9, tm, nrEpollWait, 1, 300, 4, 0x7ffc0000, 64, uint64(uint32(c.timeout)))
			d.Observe(&e)
			tm += 1_000_000
		}
		d.Counts([]stat.Cell{{Key: stat.Key{PID: 9, Nr: nrEpollWait}, Count: 2_000_000, Total: 2_000_000 * 450}})
		f := byID(checked(d.Report()).Findings, "hot-syscall")
		if f == nil || f.Severity != c.want || !strings.Contains(f.Summary, c.words) {
			t.Errorf("timeout %d: want %s with %q, got %+v", c.timeout, c.want, c.words, f)
		}
	}
}

// A duty-cycled agent traced syscalls for the first fifth of a window in
// which the thread also made rare events: its calls' share is of the time
// they were traced.
func TestHotSyscallTracedPart(t *testing.T) {
	run := func(traced bool) float64 {
		d := New(host, nil)
		tm := uint64(1e9)
		for range 400 { // 0.4 s of sampled calls
			e := sys(9, tm, nrGetppid, 8, 300)
			d.Observe(&e)
			tm += 1_000_000
		}
		// A signal 1.6 s later, while syscalls were not traced.
		late := event.Event{Kind: event.KindSignalDeliver, Time: tm + 1_600_000_000, PID: 9, TID: 9, Comm: "prog",
			Signal: event.Signal{Sig: 17, TargetPID: 9, TargetTID: 9, Handler: 1}}
		d.Observe(&late)
		d.Counts([]stat.Cell{{Key: stat.Key{PID: 9, Nr: nrGetppid}, Count: 400_000, Total: 400_000 * 450}})
		if traced {
			d.Traced(1e9, tm)
		}
		f := byID(checked(d.Report()).Findings, "hot-syscall")
		if f == nil {
			return 0
		}
		return f.Evidence["share_of_time"].(float64)
	}
	if s := run(true); s < 0.4 || s > 0.5 {
		t.Errorf("share over the traced time %.2f, want 0.45", s)
	}
	if s := run(false); s > 0.1 {
		t.Errorf("share over the whole window %.2f, want under a tenth", s)
	}
}

// Three processes spending 40% of their time in rename, most of it asleep
// while the device discards the blocks a rename over a file freed (ext4
// mounted with discard): the device's time, which blocked-in-kernel-io
// explains, so kernel-hotspot stays at info. The same calls spent on the
// CPU warn, as TestHotspotOneCgroup's.
func TestHotspotAsleepForDevice(t *testing.T) {
	const nrRename = 82
	discard := []event.Frame{{Name: "__schedule+0x2f"}, {Name: "io_schedule_timeout+0x19"},
		{Name: "wait_for_completion_io_timeout+0x7e"}, {Name: "submit_bio_wait+0x5f"}, {Name: "blkdev_issue_discard+0x5a"}}
	for _, asleep := range []bool{true, false} {
		d := New(host, nil)
		tm := uint64(1e9)
		var cells []stat.Cell
		for pid := range uint32(3) {
			for range 1000 {
				e := sys(4+pid, tm, nrRename, 0, 400_000)
				if asleep {
					e.Syscall.Sleeps = []event.Sleep{{Duration: 300_000, Count: 1, Stack: discard}}
				}
				d.Observe(&e)
				tm += 1_000_000
			}
			tm -= 1_000_000_000
			cells = append(cells, stat.Cell{Key: stat.Key{PID: 4 + pid, Nr: nrRename}, Count: 1000, Total: 400_000_000})
		}
		d.Counts(cells)
		f := byID(checked(d.Report()).Findings, "kernel-hotspot")
		want := map[bool]Severity{true: Info, false: Warning}[asleep]
		if f == nil || f.Severity != want {
			t.Fatalf("asleep for the device %v: finding %+v, want %s", asleep, f, want)
		}
		if asleep && !strings.Contains(f.Summary, "asleep waiting for the storage device") {
			t.Errorf("the summary does not say the time was the device's: %s", f.Summary)
		}
	}
}
