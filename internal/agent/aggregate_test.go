package agent

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
)

const (
	nrRead    = 0 // x86-64
	nrOpenat  = 257
	nrGetppid = 110
	nrMmap    = 9
)

// names maps cgroup ids to containers; others are the host.
func names(m map[uint64]string) Namer {
	return func(pid uint32, cg uint64) (Labels, bool) {
		if n, ok := m[cg]; ok {
			return Labels{Container: n}, true
		}
		return Host, true
	}
}

func newAgg(m map[uint64]string, maxC, maxS int) *Aggregator {
	return New(Options{Arch: event.ArchAMD64, Name: names(m), MaxContainers: maxC, MaxSyscalls: maxS,
		Grace: time.Minute, Settle: 10 * time.Second})
}

// cell makes a kernel cell of n calls, each lat ns, errs of them failing
// with errno 2.
func cell(pid, nr uint32, cg uint64, n uint64, lat uint64, errs uint64) stat.Cell {
	c := stat.Cell{Key: stat.Key{PID: pid, Nr: nr, Cgroup: cg}, Count: n, Total: n * lat, Max: lat, Errors: errs}
	c.Hist[stat.Bucket(lat)] = n
	if errs > 0 {
		c.Errnos = map[int]uint64{2: errs}
	}
	return c
}

func find(v *View, container, syscall string) *SyscallSeries {
	for i := range v.Syscalls {
		if v.Syscalls[i].Container == container && v.Syscalls[i].Syscall == syscall {
			return &v.Syscalls[i]
		}
	}
	return nil
}

func count(v *View, container, syscall string) uint64 {
	if s := find(v, container, syscall); s != nil {
		return s.Count
	}
	return 0
}

// Every kernel bucket lies inside one Prometheus bucket: a latency lands in
// the bucket whose bound is the first power of two above it.
func TestBucketMapping(t *testing.T) {
	for i := 0; i < stat.Buckets; i++ {
		if got := stat.Bucket(kernelLow(i)); got != i {
			t.Fatalf("kernelLow(%d) = %d falls in kernel bucket %d", i, kernelLow(i), got)
		}
	}
	b := Bounds()
	if len(b) != promBuckets-1 || b[0] != 1.024e-6 || b[len(b)-1] < 30 || b[len(b)-1] > 40 {
		t.Fatalf("bounds %v: want powers of two from 1.024µs to about 30 s", b)
	}
	vals := []uint64{0, 1, 7, 8, 1000, 1023, 1024, 1025, 2047, 2048, 1<<35 - 1, 1 << 35, 1<<40 + 5, 1 << 50}
	for range 100000 {
		vals = append(vals, uint64(rand.ExpFloat64()*float64(rand.Uint64N(1<<36)+1)))
	}
	for _, v := range vals {
		j := int(bucketOf[stat.Bucket(v)])
		if j == promBuckets-1 {
			if v < 1<<lastBoundLog2 {
				t.Fatalf("%d ns went to +Inf", v)
			}
			continue
		}
		// Prometheus's le is inclusive; the kernel's bounds are not: only
		// a latency of exactly 2^k ns sits one bucket higher than le=2^k.
		hi := uint64(1) << (firstBoundLog2 + j)
		if v >= hi || (j > 0 && v < hi/2) {
			t.Fatalf("%d ns went to the bucket le=%d ns", v, hi)
		}
	}
}

// The kernel's 32-bit buckets wrap; a difference taken modulo 2^32 is right.
func TestHistogramWrap(t *testing.T) {
	a := newAgg(nil, 10, 10)
	c := cell(1, nrRead, 1, 10, 2000, 0)
	c.Hist[stat.Bucket(2000)] = 1<<32 - 6 // a sum over CPUs past 2^32, seen as uint64
	c.Count = 1<<32 - 6
	a.Fold(time.Unix(100, 0), Snapshot{Cells: []stat.Cell{c}})
	before := count(a.View(), "host", "read")
	c.Hist[stat.Bucket(2000)] = 1<<32 + 4 // 10 more calls; the per-CPU counters wrapped
	c.Count += 10
	a.Fold(time.Unix(105, 0), Snapshot{Cells: []stat.Cell{c}})
	if got := count(a.View(), "host", "read") - before; got != 10 {
		t.Fatalf("10 calls across the wrap counted as %d", got)
	}
}

// Counters never go back: cells vanish when processes go, pids come back
// with fresh cells, the probe reloads; each only adds.
func TestMonotonicAcrossExitsAndReuse(t *testing.T) {
	a := newAgg(map[uint64]string{7: "web"}, 10, 10)
	now := time.Unix(1000, 0)
	steps := []struct {
		gen   uint64
		cells []stat.Cell
		calls uint64 // web's getppid total after the step
		errs  uint64 // web's openat ENOENT total
	}{
		{0, []stat.Cell{cell(100, nrGetppid, 7, 10, 500, 0), cell(100, nrOpenat, 7, 4, 3000, 3)}, 10, 3},
		{0, []stat.Cell{cell(100, nrGetppid, 7, 25, 500, 0), cell(100, nrOpenat, 7, 6, 3000, 4)}, 25, 4},
		// pid 100 exited and its cells went; another process runs.
		{0, []stat.Cell{cell(101, nrGetppid, 7, 5, 500, 0)}, 30, 4},
		// pid 100 is back, a new process with a fresh cell below the old count.
		{0, []stat.Cell{cell(101, nrGetppid, 7, 5, 500, 0), cell(100, nrGetppid, 7, 3, 500, 0), cell(100, nrOpenat, 7, 1, 3000, 1)}, 33, 5},
		// Same pid, same cell, grows.
		{0, []stat.Cell{cell(101, nrGetppid, 7, 9, 500, 0), cell(100, nrGetppid, 7, 8, 500, 0), cell(100, nrOpenat, 7, 2, 3000, 2)}, 42, 6},
		// The probe reloaded: every cell starts again, even above old counts.
		{1, []stat.Cell{cell(101, nrGetppid, 7, 20, 500, 0), cell(100, nrOpenat, 7, 7, 3000, 7)}, 62, 13},
		{1, nil, 62, 13},
	}
	for i, st := range steps {
		now = now.Add(5 * time.Second)
		a.Fold(now, Snapshot{Gen: st.gen, Cells: st.cells})
		v := a.View()
		if got := count(v, "web", "getppid"); got != st.calls {
			t.Errorf("step %d: getppid in web = %d, want %d", i, got, st.calls)
		}
		var errs uint64
		if s := find(v, "web", "openat"); s != nil {
			errs = s.Errnos["ENOENT"]
			var inBuckets uint64
			for _, n := range s.Buckets {
				inBuckets += n
			}
			if inBuckets != s.Count {
				t.Errorf("step %d: openat buckets hold %d calls, count %d", i, inBuckets, s.Count)
			}
			if s.SumNS != s.Count*3000 {
				t.Errorf("step %d: openat sum %d ns for %d calls of 3000 ns", i, s.SumNS, s.Count)
			}
		}
		if errs != st.errs {
			t.Errorf("step %d: openat ENOENT in web = %d, want %d", i, errs, st.errs)
		}
	}
}

// Errnos are keyed by process and syscall in the kernel: a process that
// moved cgroup has several cells carrying the same errno counts. Each
// failure goes once, to the cell that failed.
func TestErrnosFollowTheFailingCell(t *testing.T) {
	// Before moving to web, the process made 4 calls in db, none failing;
	// in web 3, 2 failing with ENOENT.
	c1, c2 := cell(100, nrOpenat, 8, 4, 3000, 0), cell(100, nrOpenat, 7, 3, 3000, 2)
	c1.Errnos, c2.Errnos = map[int]uint64{2: 2}, map[int]uint64{2: 2}
	for _, order := range [][]stat.Cell{{c1, c2}, {c2, c1}} {
		a := newAgg(map[uint64]string{7: "web", 8: "db"}, 10, 10)
		a.Fold(time.Unix(10, 0), Snapshot{Cells: order})
		v := a.View()
		if s := find(v, "web", "openat"); s == nil || s.Errnos["ENOENT"] != 2 {
			t.Errorf("web's openat: %+v; want 2 ENOENT", s)
		}
		if s := find(v, "db", "openat"); s == nil || len(s.Errnos) != 0 {
			t.Errorf("db's openat: %+v; want no errors", s)
		}
	}
	// Later both cells fail: each gets as many as it had.
	a := newAgg(map[uint64]string{7: "web", 8: "db"}, 10, 10)
	a.Fold(time.Unix(10, 0), Snapshot{Cells: []stat.Cell{c1, c2}})
	d1, d2 := cell(100, nrOpenat, 8, 6, 3000, 1), cell(100, nrOpenat, 7, 5, 3000, 5)
	d1.Errnos = map[int]uint64{2: 5, 13: 1}
	d2.Errnos = d1.Errnos
	a.Fold(time.Unix(15, 0), Snapshot{Cells: []stat.Cell{d1, d2}})
	var total uint64
	for _, s := range a.View().Syscalls {
		for _, n := range s.Errnos {
			total += n
		}
	}
	if total != 6 {
		t.Errorf("%d errors in the series, want 6: %+v", total, a.View().Syscalls)
	}
}

// The busiest newcomers get the slots, the rest fold into other, and
// nothing is lost on the way.
func TestCardinalityCaps(t *testing.T) {
	m := map[uint64]string{1: "a", 2: "b", 3: "c", 4: "d"}
	a := newAgg(m, 2, 2)
	var cells []stat.Cell
	var want uint64
	for cg := uint64(1); cg <= 4; cg++ {
		for i, nr := range []uint32{nrRead, nrOpenat, nrGetppid, nrMmap} {
			n := cg*1000 + uint64(i)*100 // c and d are busiest; read..mmap in rising order
			cells = append(cells, cell(uint32(cg*10), nr, cg, n, 1000, 0))
			want += n
		}
	}
	cells = append(cells, cell(99, nrRead, 0, 5, 1000, 0)) // the host is never capped away
	want += 5
	a.Fold(time.Unix(10, 0), Snapshot{Cells: cells})
	v := a.View()
	got := map[string]map[string]uint64{}
	var total uint64
	for _, s := range v.Syscalls {
		if got[s.Container] == nil {
			got[s.Container] = map[string]uint64{}
		}
		got[s.Container][s.Syscall] = s.Count
		total += s.Count
	}
	if total != want {
		t.Errorf("series hold %d calls, the kernel counted %d", total, want)
	}
	if len(got) != 4 || got["c"] == nil || got["d"] == nil || got["other"] == nil || got["host"] == nil {
		t.Fatalf("containers %v: want c, d (busiest), other and host", keys(got))
	}
	for _, c := range []string{"c", "d", "other"} {
		if len(got[c]) != 3 || got[c]["mmap"] == 0 || got[c]["getppid"] == 0 || got[c]["other"] == 0 {
			t.Errorf("%s has syscalls %v: want its busiest two (mmap, getppid) and other", c, got[c])
		}
	}
	if got["d"]["other"] != 4000+4100 {
		t.Errorf("d's other = %d, want read and openat's 8100", got["d"]["other"])
	}
	// a and b went to other: their counts are there.
	if got["other"]["other"]+got["other"]["mmap"]+got["other"]["getppid"] != 1000+1100+1200+1300+2000+2100+2200+2300 {
		t.Errorf("other holds %v", got["other"])
	}
	if n := len(v.Syscalls); n > (2+2)*(2+1) {
		t.Errorf("%d series, above the bound", n)
	}
}

// A container idle for the grace period loses its series and its slot; a
// newcomer takes the slot.
func TestGraceRemovesGoneContainers(t *testing.T) {
	a := newAgg(map[uint64]string{1: "old", 2: "new"}, 1, 5)
	t0 := time.Unix(0, 0)
	a.Fold(t0, Snapshot{Cells: []stat.Cell{cell(1, nrRead, 1, 10, 100, 0)}})
	// old stops; new starts but there is no slot yet.
	a.Fold(t0.Add(30*time.Second), Snapshot{Cells: []stat.Cell{cell(1, nrRead, 1, 10, 100, 0), cell(2, nrRead, 2, 4, 100, 0)}})
	v := a.View()
	if count(v, "old", "read") != 10 || count(v, "other", "read") != 4 || count(v, "new", "read") != 0 {
		t.Fatalf("before grace: %+v", v.Syscalls)
	}
	a.Fold(t0.Add(61*time.Second), Snapshot{Cells: []stat.Cell{cell(2, nrRead, 2, 7, 100, 0)}})
	v = a.View()
	if find(v, "old", "read") != nil {
		t.Errorf("old's series outlived the grace period")
	}
	if count(v, "new", "read") != 3 || count(v, "other", "read") != 4 {
		t.Errorf("after grace: %+v; want new with the 3 calls since it got the slot, other still 4", v.Syscalls)
	}
}

// Counts of a cgroup the namer cannot name yet wait, then all arrive.
func TestSettleDefersUnsure(t *testing.T) {
	sure := false
	a := New(Options{Arch: event.ArchAMD64, MaxContainers: 5, MaxSyscalls: 5, Grace: time.Hour, Settle: 10 * time.Second,
		Name: func(pid uint32, cg uint64) (Labels, bool) {
			if sure {
				return Labels{Container: "late", Pod: "p", Namespace: "ns"}, true
			}
			return Host, false
		}})
	t0 := time.Unix(0, 0)
	a.Fold(t0, Snapshot{Cells: []stat.Cell{cell(5, nrRead, 9, 10, 100, 0)}, Procs: map[uint32]ProcCounts{5: {Faults: 3}}})
	a.Signal(5, 9, 11)
	a.Fold(t0.Add(5*time.Second), Snapshot{Cells: []stat.Cell{cell(5, nrRead, 9, 12, 100, 0)}, Procs: map[uint32]ProcCounts{5: {Faults: 4}}})
	if n := len(a.View().Syscalls); n != 0 {
		t.Fatalf("unsure counts were folded: %+v", a.View().Syscalls)
	}
	sure = true
	a.Fold(t0.Add(6*time.Second), Snapshot{Cells: []stat.Cell{cell(5, nrRead, 9, 15, 100, 0)}, Procs: map[uint32]ProcCounts{5: {Faults: 6}}})
	v := a.View()
	s := find(v, "late", "read")
	if s == nil || s.Count != 15 || s.Pod != "p" || s.Namespace != "ns" {
		t.Fatalf("got %+v, want 15 reads in late (pod p, namespace ns)", v.Syscalls)
	}
	if len(v.Containers) != 1 || v.Containers[0].Faults != 6 || v.Containers[0].Signals["SIGSEGV"] != 1 {
		t.Fatalf("containers %+v: want 6 faults and one SIGSEGV", v.Containers)
	}
}

// A container still unnamed when Settle runs out is folded under the bare
// id it has, and Unnamed is told once, so the agent can say why; the host,
// unsure too, is not a container to name.
func TestUnnamedToldOnce(t *testing.T) {
	var told []string
	a := New(Options{Arch: event.ArchAMD64, MaxContainers: 5, MaxSyscalls: 5, Grace: time.Hour, Settle: 10 * time.Second,
		Name: func(pid uint32, cg uint64) (Labels, bool) {
			if cg == 9 {
				return Labels{Container: "0123456789ab"}, false
			}
			return Host, false
		},
		Unnamed: func(pid uint32, cg uint64, l Labels) {
			told = append(told, fmt.Sprintf("%d %d %s", pid, cg, l.Container))
		}})
	t0 := time.Unix(0, 0)
	for i, at := range []time.Duration{0, 5 * time.Second, 10 * time.Second, 11 * time.Second} {
		a.Fold(t0.Add(at), Snapshot{Cells: []stat.Cell{cell(5, nrRead, 9, uint64(10+i), 100, 0), cell(6, nrRead, 1, 7, 100, 0)}})
		want := 0
		if at >= 10*time.Second {
			want = 1
		}
		if len(told) != want {
			t.Fatalf("at %v: told %q; want %d", at, told, want)
		}
	}
	if told[0] != "5 9 0123456789ab" {
		t.Errorf("told %q", told)
	}
	if got := count(a.View(), "0123456789ab", "read"); got != 13 {
		t.Errorf("0123456789ab read = %d, want 13", got)
	}
}

// What a scrape gathers is consistent (the registry checks histograms and
// label sets) and carries the counts.
func TestCollect(t *testing.T) {
	a := newAgg(map[uint64]string{7: "web"}, 5, 5)
	a.Fold(time.Unix(10, 0), Snapshot{Cells: []stat.Cell{cell(1, nrOpenat, 7, 4, 3000, 2), cell(2, nrRead, 0, 3, 1<<36, 0)},
		Procs: map[uint32]ProcCounts{1: {Faults: 9, Vsyscalls: 2}}, Lost: stat.Lost{Full: 5, NoMem: 2}, RingDrops: 1,
		BPF: map[string]time.Duration{"sys_enter": time.Second}, Reloads: 3, Untraced: 1500 * time.Millisecond, InFlight: 4})
	reg := prometheus.NewRegistry()
	reg.MustRegister(a)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.Metric {
			key := f.GetName()
			for _, l := range m.Label {
				if l.GetValue() != "" {
					key += "," + l.GetName() + "=" + l.GetValue()
				}
			}
			switch {
			case m.Counter != nil:
				got[key] = m.Counter.GetValue()
			case m.Histogram != nil:
				got[key] = float64(m.Histogram.GetSampleCount())
				b := m.Histogram.Bucket
				got[key+",last_finite"] = float64(b[len(b)-1].GetCumulativeCount())
			}
		}
	}
	want := map[string]float64{
		"sysray_syscall_duration_seconds,container=web,syscall=openat":            4,
		"sysray_syscall_duration_seconds,container=host,syscall=read":             3,
		"sysray_syscall_duration_seconds,container=host,syscall=read,last_finite": 0, // 68 s calls: +Inf only
		"sysray_syscall_errors_total,container=web,errno=ENOENT,syscall=openat":   2,
		"sysray_page_faults_total,container=web":                                  9,
		"sysray_vsyscall_emulations_total,container=web":                          2,
		"sysray_events_dropped_total,reason=count_table":                          5,
		"sysray_events_dropped_total,reason=count_memory":                         2,
		"sysray_events_dropped_total,reason=reload_in_flight":                     4,
		"sysray_events_dropped_total,reason=ring_buffer_full":                     1,
		"sysray_bpf_run_seconds_total,program=sys_enter":                          1,
		"sysray_agent_probe_reloads_total":                                        3,
		"sysray_agent_untraced_seconds_total":                                     1.5,
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, w)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The last read of a generation cannot wait: what is not named yet is
// folded as it is named then, not lost with the old counters.
func TestFinalReadFoldsUnsure(t *testing.T) {
	a := New(Options{Arch: event.ArchAMD64, MaxContainers: 5, MaxSyscalls: 5, Grace: time.Hour, Settle: time.Minute,
		Name: func(uint32, uint64) (Labels, bool) { return Host, false }})
	t0 := time.Unix(0, 0)
	a.Fold(t0, Snapshot{Gen: 1, Cells: []stat.Cell{cell(5, nrRead, 9, 10, 100, 0)}})
	a.Fold(t0.Add(time.Second), Snapshot{Gen: 1, Final: true, Cells: []stat.Cell{cell(5, nrRead, 9, 12, 100, 0)}})
	a.Fold(t0.Add(2*time.Second), Snapshot{Gen: 2, Cells: []stat.Cell{cell(5, nrRead, 9, 3, 100, 0)}})
	if got := count(a.View(), "host", "read"); got != 12 {
		t.Fatalf("host read = %d after the final read of generation 1; want its 12", got)
	}
}

// Other holds no slot; idle for the grace period it is removed, but not in
// the read that folds a newcomer into it (that would take its counts back).
func TestOtherKeptWhileFedAfterIdle(t *testing.T) {
	a := newAgg(map[uint64]string{1: "a", 2: "b", 3: "c"}, 1, 5)
	t0 := time.Unix(0, 0)
	a.Fold(t0, Snapshot{Cells: []stat.Cell{cell(1, nrRead, 1, 10, 100, 0), cell(2, nrRead, 2, 5, 100, 0)}})
	// a keeps its slot; b stops; nothing goes to other for two minutes.
	a.Fold(t0.Add(2*time.Minute), Snapshot{Cells: []stat.Cell{cell(1, nrRead, 1, 20, 100, 0), cell(2, nrRead, 2, 5, 100, 0),
		cell(3, nrRead, 3, 4, 100, 0)}})
	if got := count(a.View(), "other", "read"); got != 5+4 {
		t.Fatalf("other read = %d, want b's 5 and c's 4", got)
	}
	a.Fold(t0.Add(5*time.Minute), Snapshot{Cells: []stat.Cell{cell(1, nrRead, 1, 30, 100, 0)}})
	if find(a.View(), "other", "read") != nil {
		t.Fatalf("other outlived the grace period idle")
	}
}

// A slot idle for Reclaim goes to a newcomer that finds no room, before
// Grace: the calls of a container's start do not hold its slots.
func TestReclaimIdleSlots(t *testing.T) {
	a := New(Options{Arch: event.ArchAMD64, Name: names(map[uint64]string{1: "a", 2: "b"}), MaxContainers: 1, MaxSyscalls: 2,
		Grace: time.Hour, Reclaim: time.Minute})
	t0 := time.Unix(0, 0)
	start := []stat.Cell{cell(1, 59, 1, 1, 1e6, 0), cell(1, 165, 1, 3, 1e5, 0)} // execve, mount
	a.Fold(t0, Snapshot{Cells: start})
	a.Fold(t0.Add(30*time.Second), Snapshot{Cells: append(start, cell(1, nrRead, 1, 100, 100, 0))})
	if got := count(a.View(), "a", "other"); got != 100 {
		t.Fatalf("30 s in, a's reads went to %v; want other (no slot idle for a minute yet)", a.View().Syscalls)
	}
	a.Fold(t0.Add(70*time.Second), Snapshot{Cells: append(start, cell(1, nrRead, 1, 150, 100, 0))})
	v := a.View()
	// execve and mount are as idle; the first by name goes.
	if count(v, "a", "read") != 50 || count(v, "a", "other") != 100 || find(v, "a", "execve") != nil || find(v, "a", "mount") == nil {
		t.Fatalf("70 s in: %+v; want read to take execve's slot with its 50 new calls, other keeping 100", v.Syscalls)
	}
	// Container a goes quiet; b arrives after a minute and takes the slot.
	a.Fold(t0.Add(100*time.Second), Snapshot{Cells: append(start, cell(1, nrRead, 1, 150, 100, 0), cell(2, nrRead, 2, 5, 100, 0))})
	if count(a.View(), "other", "read") != 5 {
		t.Fatalf("b found no idle slot yet, so other: %+v", a.View().Syscalls)
	}
	a.Fold(t0.Add(140*time.Second), Snapshot{Cells: append(start, cell(1, nrRead, 1, 150, 100, 0), cell(2, nrRead, 2, 9, 100, 0))})
	v = a.View()
	if count(v, "b", "read") != 4 || find(v, "a", "read") != nil {
		t.Fatalf("140 s in: %+v; want b in a's slot (a idle 70 s) with its 4 new calls", v.Syscalls)
	}
}

// Duty-cycled reads count about one call in Scale: the series grow by
// Scale times what the kernel counted, errors by errno too.
func TestScaledReads(t *testing.T) {
	a := newAgg(map[uint64]string{7: "web"}, 10, 10)
	a.Fold(time.Unix(10, 0), Snapshot{Cells: []stat.Cell{cell(100, nrOpenat, 7, 3, 3000, 1)}, Scale: 10})
	a.Fold(time.Unix(15, 0), Snapshot{Cells: []stat.Cell{cell(100, nrOpenat, 7, 5, 3000, 2)}, Scale: 10})
	s := find(a.View(), "web", "openat")
	if s == nil || s.Count != 50 || s.SumNS != 50*3000 || s.Errnos["ENOENT"] != 20 {
		t.Fatalf("scaled series: %+v; want 50 calls, 150 µs, 20 ENOENT", s)
	}
	var inBuckets uint64
	for _, n := range s.Buckets {
		inBuckets += n
	}
	if inBuckets != 50 {
		t.Errorf("buckets hold %d calls, want 50", inBuckets)
	}
}
