package doctor

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// The kernel stacks of a reader's fault waits, as the kernel took them.
var (
	fileFaultStack = kframes("__schedule+0x618", "schedule+0x23", "io_schedule+0x3f", "folio_wait_bit_common+0x110",
		"filemap_fault+0x739", "__do_fault+0x34", "do_fault+0x319", "__handle_mm_fault+0x7fc", "handle_mm_fault+0xd0",
		"exc_page_fault+0x176", "asm_exc_page_fault+0x22")
	swapStack = kframes("__schedule+0x618", "schedule+0x23", "io_schedule+0x3f", "folio_wait_bit_common+0x110",
		"swap_read_folio+0x40", "do_swap_page+0x300", "__handle_mm_fault+0x7fc", "handle_mm_fault+0xd0",
		"exc_page_fault+0x176", "asm_exc_page_fault+0x22")
	faultLockStack = kframes("__schedule+0x618", "schedule+0x23", "rwsem_down_read_slowpath+0x2a0",
		"down_read_killable+0x50", "lock_mm_and_find_vma+0x40", "do_user_addr_fault+0x1a0", "exc_page_fault+0x176",
		"asm_exc_page_fault+0x22")
)

func kframes(names ...string) []event.Frame {
	out := make([]event.Frame, len(names))
	for i, n := range names {
		out[i] = event.Frame{Addr: 0xffffffff81000000 + uint64(i), Name: n}
	}
	return out
}

// thrashRun is n windows of one reader (pid), 250 ms apart, each asleep
// sleep ns at stack on a 96 MiB mapping of /var/tmp/data, in a cgroup of
// 32 MiB whose refault counter grows by refaults a window.
func thrashRun(pid uint32, n int, sleep uint64, stack []event.Frame, refaults uint64, mem event.MemFacts) []event.Event {
	var evs []event.Event
	for i := range n {
		t := uint64(1e9) + uint64(i)*250*ms
		m := mem
		m.RefaultFile = 1000 + uint64(i)*refaults
		evs = append(evs, event.Event{Kind: event.KindFaultWait, Time: t, PID: pid, TID: pid, Comm: "reader",
			FaultWait: event.FaultWait{Start: t - 250*ms, Duration: sleep, Count: 20, MajFaults: 3, MinFaults: 900,
				Lo: 0x7f0000000000, Hi: 0x7f0005000000,
				Places: []event.FaultPlace{{Duration: sleep, Count: 20, Addr: 0x7f0000100000, Stack: stack,
					Map: event.Mapping{Start: 0x7f0000000000, End: 0x7f0006000000, Path: "/var/tmp/data", Inode: 12}}},
				Mem: m}})
	}
	return evs
}

var limited = event.MemFacts{Read: true, Cgroup: "/jobs/reader", Max: 32 << 20, Current: 32 << 20}

func TestPageCacheThrash(t *testing.T) {
	host := event.MemFacts{Read: true, Cgroup: "/", Host: true, Max: event.NoLimit, High: event.NoLimit}
	v2 := limited
	v2.High = event.NoLimit
	two := append(thrashRun(7, 8, 100*ms, fileFaultStack, 4000, limited), thrashRun(8, 8, 100*ms, fileFaultStack, 4000, limited)...)
	// The last window read as the process left its cgroup (an older
	// writer): the cgroup it lived in still counts.
	leaving := thrashRun(7, 8, 100*ms, fileFaultStack, 4000, limited)
	leaving[7].FaultWait.Mem = host
	// Little sleep, much reclaim inside the faults: both are time lost.
	reclaiming := thrashRun(7, 8, 10*ms, fileFaultStack, 4000, limited)
	for i := range 8 {
		reclaiming = append(reclaiming, event.Event{Kind: event.KindReclaim, Time: 1e9 + uint64(i)*250*ms + ms, PID: 7, TID: 7,
			Reclaim: event.Reclaim{Duration: 100 * ms, Pages: 4000, Nr: -1}})
	}
	tests := []struct {
		name  string
		evs   []event.Event
		sev   Severity
		words []string // nil: no finding
	}{
		{"pass after pass under a limit", thrashRun(7, 8, 100*ms, fileFaultStack, 4000, limited), Warning,
			[]string{"reader[7]", "/var/tmp/data", "96.0 MiB", "32.0 MiB", "/jobs/reader", "28000 pages", "memory.limit_in_bytes", "800.00ms asleep in 160 page faults"}},
		{"memory.max on cgroup v2", thrashRun(7, 8, 100*ms, fileFaultStack, 4000, v2), Warning, []string{"(memory.max;"}},
		{"two readers of one file", two, Warning, []string{"2 processes", "reader[7]", "reader[8]"}},
		{"the last read outside the cgroup", leaving, Warning, []string{"/jobs/reader"}},
		{"reclaim inside faults", reclaiming, Warning, []string{"800.00ms reclaiming"}},
		{"a cold read: nothing read twice", thrashRun(7, 8, 100*ms, fileFaultStack, 0, limited), Info, []string{"a first read"}},
		{"a few refaults", thrashRun(7, 8, 100*ms, fileFaultStack, 30, limited), Info, []string{"a first read"}},
		{"no limit: the host's counters", thrashRun(7, 8, 100*ms, fileFaultStack, 4000, host), Info, []string{"on the host"}},
		{"a small share of the time", thrashRun(7, 8, 20*ms, fileFaultStack, 4000, limited), Info, []string{"/var/tmp/data"}},
		{"felt by no one", thrashRun(7, 8, 10*ms, fileFaultStack, 4000, limited), Info, nil},
		{"anonymous memory swapped in", thrashRun(7, 8, 100*ms, swapStack, 4000, limited), Info, nil},
		{"the mmap lock", thrashRun(7, 8, 100*ms, faultLockStack, 4000, limited), Info, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := byID(findings(tt.evs), PageCacheThrash)
			if tt.words == nil {
				if f != nil {
					t.Fatalf("want none, got %s %s: %s", f.Severity, f.Title, f.Summary)
				}
				return
			}
			if f == nil {
				t.Fatal("no finding")
			}
			if f.Severity != tt.sev {
				t.Errorf("severity %v, want %v: %s", f.Severity, tt.sev, f.Title)
			}
			text := f.Title + " " + f.Summary
			for _, w := range tt.words {
				if !strings.Contains(text, w) {
					t.Errorf("%q missing from %s", w, text)
				}
			}
			if !strings.HasSuffix(f.Key, "/var/tmp/data") {
				t.Errorf("key %q", f.Key)
			}
		})
	}
}

// The evidence carries the exact sums of the windows.
func TestPageCacheThrashEvidence(t *testing.T) {
	f := byID(findings(thrashRun(7, 8, 100*ms, fileFaultStack, 4000, limited)), PageCacheThrash)
	if f == nil {
		t.Fatal("no finding")
	}
	for k, want := range map[string]any{"fault_sleep_ns": uint64(800 * ms), "fault_sleeps": uint64(160), "major_faults": uint64(24),
		"minor_faults": uint64(7200), "refaulted_pages": uint64(28000), "limit_bytes": uint64(32 << 20),
		"mapping_bytes": uint64(96 << 20), "file": "/var/tmp/data", "cgroup": "/jobs/reader"} {
		if got := f.Evidence[k]; got != want {
			t.Errorf("%s = %v, want %v", k, got, want)
		}
	}
	if len(f.Procs) != 1 || f.Procs[0].PID != 7 {
		t.Errorf("procs %v", f.Procs)
	}
}
