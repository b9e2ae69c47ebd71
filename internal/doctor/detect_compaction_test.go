package doctor

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// thpFaults is n page faults of thread tid (process pid), one every gap
// ns from 1 s on, each stalling in direct compaction for two passes (the
// Normal zone, then DMA32) of pass ns each, for an order-9 allocation at
// its own address, as bpf/reclaim.h reports them.
func thpFaults(pid, tid uint32, n int, gap, pass uint64) []event.Event {
	var evs []event.Event
	for i := range n {
		t := uint64(1e9) + uint64(i)*gap
		addr := 0x7f0000000000 + uint64(i)<<21
		for z := range 2 {
			end := t + uint64(z+1)*pass + uint64(z)*10_000
			evs = append(evs, event.Event{Kind: event.KindReclaim, Time: end, PID: pid, TID: tid, Comm: "thp",
				Reclaim: event.Reclaim{Duration: pass, Pages: 512, Nr: -1, What: event.ReclaimCompact, Order: 9, Status: 8,
					FaultAddr: addr}})
		}
	}
	return evs
}

func compactFindings(t *testing.T, h Host, evs []event.Event) []Finding {
	t.Helper()
	d := New(h, nil)
	for i := range evs {
		d.Observe(&evs[i])
	}
	var out []Finding
	for _, f := range checked(d.Report()).Findings {
		if f.ID == CompactionStall {
			out = append(out, f)
		}
	}
	return out
}

func TestCompactionStall(t *testing.T) {
	meta := host
	meta.Meta = map[string]string{"transparent_hugepage.enabled": "madvise", "transparent_hugepage.defrag": "madvise"}
	// 40 faults 12 ms apart, each 2 × 5 ms compacting: 400 ms of a
	// thread whose life (a call at 1 s, then the faults) is about 480 ms.
	start := sys(7, 1e9-ms, 39, 7, 1000)
	start.Comm = "thp"
	faults := append([]event.Event{start}, thpFaults(7, 7, 40, 12*ms, 5*ms)...)
	fs := compactFindings(t, meta, faults)
	if len(fs) != 1 {
		t.Fatalf("%d findings, want 1: %+v", len(fs), fs)
	}
	f := fs[0]
	ev := f.Evidence
	if f.Severity != Warning || ev["stall_ns"] != uint64(400*ms) || ev["stalls"] != uint64(40) || ev["fault_stalls"] != uint64(40) || ev["compaction_passes"] != uint64(80) ||
		ev["in_faults_ns"] != uint64(400*ms) || ev["in_syscalls_ns"] != uint64(0) || ev["max_stall_ns"] != uint64(10*ms) ||
		ev["thp_enabled"] != "madvise" || ev["thp_defrag"] != "madvise" || ev["threads"] != 1 {
		t.Errorf("got %s %+v", f.Severity, ev)
	}
	if r := ev["compaction_results"].(map[string]uint64); r["success"] != 80 {
		t.Errorf("results %v", r)
	}
	if a := ev["fault_addresses"]; a != "0x7f0000000000-0x7f0004e00000" {
		t.Errorf("fault addresses %v", a)
	}
	for _, w := range []string{"thp[7]", "40 time(s)", "direct compaction inside page faults", "400.00ms", "order-9",
		"enabled=madvise, defrag=madvise", "MADV_HUGEPAGE"} {
		if !strings.Contains(f.Title+" "+f.Summary, w) {
			t.Errorf("no %q in %q / %q", w, f.Title, f.Summary)
		}
	}
	if !strings.Contains(f.Fix, "defer+madvise") || !strings.Contains(f.Fix, "compaction_proactiveness") || strings.Contains(f.Fix, "min_free_kbytes") {
		t.Errorf("fix %q", f.Fix)
	}
	if f.Key != "compaction-stall:thp|direct compaction" {
		t.Errorf("key %q", f.Key)
	}

	// From a capture without the settings: unknown, not a guess.
	fs = compactFindings(t, host, faults)
	if len(fs) != 1 || fs[0].Evidence["thp_defrag"] != "unknown" || !strings.Contains(fs[0].Summary, "defrag=unknown") {
		t.Errorf("no settings: %+v", fs)
	}
}

// Traced from after the process began (-p): the thread's only events are
// its passes, whose time begins before their events do.
func TestCompactionStallAttached(t *testing.T) {
	fs := compactFindings(t, host, thpFaults(7, 7, 20, 12*ms, 5*ms))
	if len(fs) != 1 || fs[0].Severity != Warning || fs[0].Evidence["stalls"] != uint64(20) {
		t.Fatalf("got %+v", fs)
	}
	// 200 ms of compaction over the threads' 12 ms × 19 + 10 ms.
	if s := fs[0].Evidence["share_of_thread_time"]; s != "84%" {
		t.Errorf("share %v", s)
	}
}

// Threads and processes of one program add up; threads that never
// stalled do not dilute the share.
func TestCompactionStallThreads(t *testing.T) {
	var evs []event.Event
	for i, tid := range []uint32{7, 8, 9} {
		idle := sys(100+uint32(i), 1e9, 39, 7, 1000)
		idle.PID, idle.Comm = 7, "thp"
		late := idle
		late.Time = 60e9
		evs = append(evs, idle, late)
		evs = append(evs, thpFaults(7, tid, 10, 12*ms, 5*ms)...)
	}
	evs = append(evs, thpFaults(12, 12, 10, 12*ms, 5*ms)...)
	fs := compactFindings(t, host, evs)
	if len(fs) != 1 || fs[0].Severity != Warning || fs[0].Evidence["stalls"] != uint64(40) || fs[0].Evidence["threads"] != 4 ||
		!strings.Contains(fs[0].Summary, "2 processes") {
		t.Fatalf("got %+v", fs)
	}
}

// Direct reclaim in a syscall: its own words and fix.
func TestCompactionStallDirectReclaim(t *testing.T) {
	var evs []event.Event
	for i := range 10 {
		evs = append(evs, event.Event{Kind: event.KindReclaim, Time: 1e9 + uint64(i)*30*ms, PID: 7, TID: 7, Comm: "writer",
			Reclaim: event.Reclaim{Duration: 20 * ms, Pages: 32, Nr: nrWrite, What: event.ReclaimDirect}})
	}
	fs := compactFindings(t, host, evs)
	if len(fs) != 1 || fs[0].Severity != Warning || !strings.Contains(fs[0].Title, "direct reclaim inside syscalls (write)") ||
		!strings.Contains(fs[0].Fix, "min_free_kbytes") || strings.Contains(fs[0].Fix, "defer+madvise") ||
		fs[0].Evidence["in_syscalls_ns"] != uint64(200*ms) {
		t.Fatalf("got %+v", fs)
	}
	if s := fs[0].Syscalls; len(s) != 1 || s[0] != "write" {
		t.Errorf("syscalls %v", s)
	}
}

// The benign cousins stay below a warning.
func TestCompactionStallBenign(t *testing.T) {
	long := sys(7, 1e9-ms, 39, 7, 1000)
	long.Comm = "thp"
	end := long
	end.Time = 20e9
	tests := []struct {
		name string
		evs  []event.Event
		sev  Severity
		none bool
	}{
		// One short stall: a millisecond's compaction, once.
		{"one short stall", thpFaults(7, 7, 1, 12*ms, ms/2), 0, true},
		// One long stall is still one: the first huge page after a
		// quiet spell.
		{"one long stall", thpFaults(7, 7, 1, 12*ms, 100*ms), Info, false},
		// Many stalls, a small share of a long-lived thread.
		{"a small share", append([]event.Event{long, end}, thpFaults(7, 7, 40, 100*ms, ms)...), Info, false},
		// Memory-cgroup reclaim is cgroup-limit's.
		{"memcg reclaim", []event.Event{{Kind: event.KindReclaim, Time: 2e9, PID: 7, TID: 7, Comm: "thp",
			Reclaim: event.Reclaim{Duration: 500 * ms, Nr: -1}}}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := compactFindings(t, host, tt.evs)
			if tt.none {
				if len(fs) != 0 {
					t.Errorf("got %+v", fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].Severity != tt.sev {
				t.Errorf("got %+v, want one %s", fs, tt.sev)
			}
		})
	}
}

// Passes of one fault are one stall however far apart; passes of one call
// are one only when they follow each other.
func TestCompactionStallCounting(t *testing.T) {
	c := newCompaction(&host)
	pass := func(t0, dur uint64, nr int32, addr uint64) {
		c.Observe(&event.Event{Kind: event.KindReclaim, Time: t0 + dur, PID: 7, TID: 7, Comm: "thp",
			Reclaim: event.Reclaim{Duration: dur, Nr: nr, What: event.ReclaimCompact, Order: 9, FaultAddr: addr}})
	}
	pass(1e9, ms, -1, 0x7f0000000000)
	pass(1e9+10*ms, ms, -1, 0x7f0000000000) // preempted between: the same fault
	pass(1e9+12*ms, ms, -1, 0x7f0000200000) // the next fault
	pass(2e9, ms, 1, 0)
	pass(2e9+ms+ms/2, ms, 1, 0) // the same write
	pass(2e9+10*ms, ms, 1, 0)   // another
	if p := c.procs[7]; p.stalls != 4 || p.inFaults != 2 || p.maxStall != 2*ms {
		t.Errorf("stalls %d (%d in faults), max %d", p.stalls, p.inFaults, p.maxStall)
	}
}

// The mapping a fault stalled in, from the live process's smaps.
func TestCompactionRegion(t *testing.T) {
	c := newCompaction(&Host{Live: true})
	c.smaps = func(uint32) ([]byte, error) {
		return []byte(`55d0c0000000-55d0c0021000 rw-p 00000000 00:00 0                          [heap]
AnonHugePages:         0 kB
VmFlags: rd wr mr mw me ac sd
7f0000000000-7f0010200000 rw-p 00000000 00:00 0 
Size:             264192 kB
AnonHugePages:    131072 kB
VmFlags: rd wr mr mw me ac sd hg
`), nil
	}
	got := c.regionsOf(7, 0x7f0000400000)
	if len(got) != 1 || got[0] != "0x7f0000000000-0x7f0010200000 (258.0 MiB, MADV_HUGEPAGE, 128.0 MiB in huge pages now)" {
		t.Errorf("got %q", got)
	}
}
