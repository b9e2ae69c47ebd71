package doctor

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/stat"
)

func cell(pid, nr uint32, count, total uint64) stat.Cell {
	return stat.Cell{Key: stat.Key{PID: pid, Nr: nr, Cgroup: uint64(pid)}, Count: count, Total: total}
}

// Windows hold the calls that ended in each interval, by how many
// processes made them; the first read is only a starting point.
func TestSeriesWindows(t *testing.T) {
	s := NewSeries()
	const ms = 1_000_000
	s.Add(0, []stat.Cell{cell(1, 221, 10, 100)})
	// 250 ms: one caller, 100 calls of 10 µs.
	s.Add(250*ms, []stat.Cell{cell(1, 221, 110, 100+100*10_000)})
	// 500 ms: two callers, 200 calls of 40 µs; pid 3 is new (counted from 0).
	s.Add(500*ms, []stat.Cell{cell(1, 221, 210, 100+100*10_000+100*40_000), cell(3, 221, 100, 100*40_000)})
	// 750 ms: nothing new.
	s.Add(750*ms, []stat.Cell{cell(1, 221, 210, 100+100*10_000+100*40_000), cell(3, 221, 100, 100*40_000)})
	lv := s.byCallers(221, nil)
	if len(lv) != 2 || lv[1] == nil || lv[2] == nil {
		t.Fatalf("levels %v, want 1 and 2 callers", lv)
	}
	if lv[1].n != 100 || lv[1].total != 100*10_000 || lv[1].busy != 250*ms {
		t.Errorf("1 caller: %+v", *lv[1])
	}
	if lv[2].n != 200 || lv[2].total != 200*40_000 || lv[2].busy != 250*ms {
		t.Errorf("2 callers: %+v", *lv[2])
	}
	c := latencyCurve(lv, "calling it", 10)
	if c.lowL != 1 || c.highL != 2 || c.low != 10_000 || c.high != 40_000 {
		t.Errorf("curve %+v", c)
	}
	// Little's law: 8 ms of calls in 250 ms is 0.03 in flight.
	if len(c.lines) != 2 || !strings.Contains(c.lines[1], "40.0µs mean over 200 calls, 0.03 in flight") {
		t.Errorf("curve lines %q", c.lines)
	}
	if s.byCallers(0, nil) == nil || len(s.byCallers(0, nil)) != 0 {
		t.Errorf("a syscall nobody called has levels")
	}
}

// Levels with few calls (intervals in which callers came or went) are left out.
func TestCurveSkipsThinLevels(t *testing.T) {
	lv := map[int]*levelStat{1: {n: 1000, total: 1000 * 5}, 3: {n: 50, total: 50 * 500}, 4: {n: 1000, total: 1000 * 9}}
	c := latencyCurve(lv, "calling it", 10)
	if len(c.lines) != 2 || c.highL != 4 || c.high != 9 {
		t.Errorf("curve %+v", c)
	}
}

// Three processes spend half their time in one syscall. Its latency triples
// from one caller to three: contention, unless the extra time was spent
// waiting for a CPU, which is queueing, and only a hotspot.
func TestContentionExcludesCPUWait(t *testing.T) {
	const nrFadvise, us, ms = 221, 1000, 1_000_000
	for _, queued := range []bool{false, true} {
		d := New(host, nil)
		for pid := uint32(1); pid <= 3; pid++ {
			for i := uint64(0); i < 1000; i++ {
				e := sys(pid, i*100*us, nrFadvise, 0, 50*us)
				d.Observe(&e)
			}
		}
		s := NewSeries()
		var runq uint64
		if queued {
			runq = 20 * ms // 20 µs a call of the 30
		}
		s.Add(0, nil)
		s.Add(250*ms, []stat.Cell{cell(1, nrFadvise, 1000, 10*ms)})
		s.Add(500*ms, []stat.Cell{
			{Key: stat.Key{PID: 1, Nr: nrFadvise, Cgroup: 1}, Count: 2000, Total: 40 * ms, Runq: runq},
			{Key: stat.Key{PID: 2, Nr: nrFadvise, Cgroup: 2}, Count: 1000, Total: 30 * ms, Runq: runq},
			{Key: stat.Key{PID: 3, Nr: nrFadvise, Cgroup: 3}, Count: 1000, Total: 30 * ms, Runq: runq},
		})
		d.Series(s)
		fs := checked(d.Report()).Findings
		want := KernelContention
		if queued {
			want = KernelHotspot
		}
		f := byID(fs, want)
		if f == nil {
			t.Fatalf("queued=%v: no %s in %v", queued, want, fs)
		}
		if queued && !strings.Contains(f.Summary, "queue for CPUs") {
			t.Errorf("hotspot does not say the growth is CPU queueing: %s", f.Summary)
		}
		if !queued && !strings.Contains(f.Summary, "10.0µs with 1 caller(s) in it against 30.0µs with 3") {
			t.Errorf("contention summary: %s", f.Summary)
		}
	}
}

func restartCell(pid, nr uint32, count uint64) stat.Cell {
	return stat.Cell{Key: stat.Key{PID: pid, Nr: nr, Cgroup: 1}, Count: count, Total: 100 * count}
}

// A key whose cell went counts from zero in the next window, not from
// its old total.
func TestSeriesRestart(t *testing.T) {
	s := NewSeries()
	s.Add(0, []stat.Cell{restartCell(6, 0, 10)})
	gone := []stat.Cell{restartCell(6, 0, 12)}
	s.Add(1e6, gone)
	s.Restart(gone)
	s.Add(2e6, []stat.Cell{restartCell(6, 0, 3)})
	if len(s.windows) != 2 {
		t.Fatalf("%d windows, want 2", len(s.windows))
	}
	for i, want := range []uint64{2, 3} {
		if got := s.windows[i].byNr[0][6]; got == nil || got.calls != want {
			t.Errorf("window %d: %+v, want %d calls", i, got, want)
		}
	}
}

// A process forgotten leaves every window it was in, and nothing else does.
func TestSeriesForget(t *testing.T) {
	s := NewSeries()
	const ms = 1_000_000
	s.Add(0, nil)
	s.Add(250*ms, []stat.Cell{cell(1, 221, 10, 1000), cell(2, 221, 10, 1000), cell(2, 0, 5, 500)})
	s.Add(500*ms, []stat.Cell{cell(1, 221, 20, 2000), cell(2, 221, 20, 2000), cell(2, 0, 5, 500)})
	s.Add(750*ms, []stat.Cell{cell(1, 221, 30, 3000), cell(3, 221, 10, 1000)})
	s.forget(map[uint32]bool{2: true, 9: true})
	for i, w := range s.windows {
		for nr, byPID := range w.byNr {
			if byPID[2] != nil {
				t.Errorf("window %d still holds pid 2's calls of %d", i, nr)
			}
		}
	}
	if _, ok := s.windows[0].byNr[0]; ok {
		t.Errorf("syscall 0, made only by pid 2, still has an entry")
	}
	if _, ok := s.spans[2]; ok || s.spans[1] != [2]int{0, 2} || s.spans[3] != [2]int{2, 2} {
		t.Errorf("spans %v", s.spans)
	}
	// Pid 1 alone in the first two windows (10 calls each), with pid 3 in
	// the last (10 each).
	if lv := s.byCallers(221, nil); lv[1] == nil || lv[1].n != 20 || lv[2] == nil || lv[2].n != 20 {
		t.Errorf("levels after forgetting pid 2: %v", lv)
	}
}
