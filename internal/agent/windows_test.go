package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
)

func newWindows() *Windows {
	return &Windows{
		New:   func() *doctor.Doctor { return doctor.New(doctor.Host{Arch: event.ArchAMD64}, nil) },
		Store: NewFindings(FindingsOptions{ActiveFor: time.Minute, Name: testNamer, MaxContainers: 10}),
	}
}

func crash(pid uint32, t uint64) []event.Event {
	return []event.Event{
		{Kind: event.KindSignalDeliver, Time: t, PID: pid, TID: pid, Comm: "crash",
			Signal: event.Signal{Sig: 11, Code: 1, Addr: 0x10, TargetPID: pid, TargetTID: pid}},
		{Kind: event.KindExit, Time: t + 1, PID: pid, TID: pid, Comm: "crash", Proc: event.Proc{ExitCode: 11, GroupDead: true}},
	}
}

// A crash in each of three windows is one finding seen three times, news
// only the first time; a window without one reports nothing new.
func TestWindowsCarryFindings(t *testing.T) {
	w := newWindows()
	t0 := time.Unix(1_700_000_000, 0)
	var all [][]Finding
	for i, pid := range []uint32{7, 0, 9, 11} {
		if pid != 0 {
			for _, e := range crash(pid, uint64(i+1)*1e9) {
				w.Observe(&e)
			}
		}
		_, news := w.Close(t0.Add(time.Duration(i)*10*time.Second), nil, nil, [2]uint64{})
		all = append(all, news)
	}
	if len(all[0]) != 1 || all[0][0].ID != "fatal-signal" || len(all[1])+len(all[2])+len(all[3]) != 0 {
		t.Fatalf("news by window: %+v", all)
	}
	l := w.Store.List(t0.Add(30 * time.Second))
	if len(l) != 1 || l[0].Occurrences != 3 || !l[0].FirstSeen.Equal(t0) || !l[0].LastSeen.Equal(t0.Add(30*time.Second)) {
		t.Errorf("kept: %+v", l)
	}
}

// A window is handed what the kernel counted during it, not since the
// probe was loaded; a reloaded probe's counts start again.
func TestWindowsCountDeltas(t *testing.T) {
	w := newWindows()
	k := stat.Key{PID: 5, Nr: 39}
	cell := func(count, errs uint64, enoent uint64) stat.Cell {
		c := stat.Cell{Key: k, Count: count, Errors: errs, Total: count * 100, Errnos: map[int]uint64{2: enoent}}
		c.Hist[3] = count
		return c
	}
	if got := w.cellsDelta([]stat.Cell{cell(100, 10, 10)}); len(got) != 1 || got[0].Count != 100 {
		t.Fatalf("first read: %+v", got)
	}
	got := w.cellsDelta([]stat.Cell{cell(250, 40, 40)})
	if len(got) != 1 || got[0].Count != 150 || got[0].Errors != 30 || got[0].Total != 15000 || got[0].Hist[3] != 150 || got[0].Errnos[2] != 30 {
		t.Errorf("second read: %+v", got)
	}
	if got := w.cellsDelta([]stat.Cell{cell(250, 40, 40)}); len(got) != 0 {
		t.Errorf("an idle cell: %+v", got)
	}
	if got := w.cellsDelta([]stat.Cell{cell(20, 0, 0)}); len(got) != 1 || got[0].Count != 20 {
		t.Errorf("after a reload: %+v", got)
	}

	s := func(n uint64) doctor.CPUSample {
		return doctor.CPUSample{PID: 5, Syscall: 221, Kernel: []string{"generic_fadvise", "ksys_fadvise64_64"}, Count: n}
	}
	w.samplesDelta([]doctor.CPUSample{s(10), s(5)})
	d := w.samplesDelta([]doctor.CPUSample{s(30), s(5)})
	if len(d) != 1 || d[0].Count != 20 {
		t.Errorf("samples: %+v", d)
	}
}

// A crash cut by a window's edge: its fault and signal before the edge,
// its exit after (a core being written, an exit waiting on a full audit
// backlog). The next window's doctor is handed them, so its finding has
// the fault's address and the thread's last calls, as one window's would;
// the window before reports no death. The same for a thread that died
// before the rest of its process.
func TestWindowsCarryCrashAcrossEdge(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	for _, threads := range []bool{false, true} {
		w := newWindows()
		pid, tid := uint32(40), uint32(40)
		if threads {
			tid = 41
		}
		open := event.Event{Kind: event.KindSyscall, Time: 100, PID: pid, TID: tid, Comm: "crash",
			Syscall: event.Syscall{Nr: 257, Args: [6]uint64{^uint64(99), 0x1000}, Ret: 3, Latency: 1000}}
		first := []event.Event{open,
			{Kind: event.KindPageFault, Time: 200, PID: pid, TID: tid, Comm: "crash", Fault: event.Fault{Addr: 0x10, IP: 0x401000, Error: 6}},
			{Kind: event.KindSignalGenerate, Time: 210, PID: pid, TID: tid, Comm: "crash",
				Signal: event.Signal{Sig: 11, Code: 1, Addr: 0x10, SenderPID: pid, TargetPID: pid, TargetTID: tid}},
		}
		if threads {
			first = append(first, event.Event{Kind: event.KindExit, Time: 300, PID: pid, TID: tid, Comm: "crash", Proc: event.Proc{ExitCode: 11}})
		}
		for _, e := range first {
			w.Observe(&e)
		}
		rep, _ := w.Close(t0, nil, nil, [2]uint64{})
		for _, f := range rep.Findings {
			if f.ID == "fatal-signal" {
				t.Fatalf("threads %v: a death before the exit: %+v", threads, f)
			}
		}
		exit := event.Event{Kind: event.KindExit, Time: 2e9, PID: pid, TID: pid, Comm: "crash", Proc: event.Proc{ExitCode: 11, GroupDead: true}}
		w.Observe(&exit)
		rep, news := w.Close(t0.Add(10*time.Second), nil, nil, [2]uint64{})
		var got *doctor.Finding
		for i := range rep.Findings {
			if rep.Findings[i].ID == "fatal-signal" {
				got = &rep.Findings[i]
			}
		}
		if got == nil || got.Severity != doctor.Critical || got.Evidence["fault_addr"] != "0x10" || got.Evidence["si_code"] != "SEGV_MAPERR" ||
			got.Evidence["tid"] != tid {
			t.Fatalf("threads %v: the crash after the edge: %+v", threads, got)
		}
		if last, _ := got.Evidence["last_syscalls"].([]string); len(last) != 1 || !strings.HasPrefix(last[0], "openat(") {
			t.Errorf("threads %v: last syscalls %v, want the openat before the edge", threads, got.Evidence["last_syscalls"])
		}
		if len(news) != 1 || news[0].ID != "fatal-signal" {
			t.Errorf("threads %v: news %+v", threads, news)
		}
	}
}
