package doctor

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

const (
	nrMprotect = 10
)

var mmapLockStack = []string{"rwsem_down_write_slowpath+0x1e0", "down_write_killable+0x4e", "do_mprotect_pkey+0xb5"}

// A waiter's sleep on the mmap lock, woken by the sibling that released it.
func lockWait(tid uint32, t uint64, nr uint32, lat, d uint64, waker uint32) event.Event {
	e := slept(tid, t, nr, lat, d, false, mmapLockStack...)
	e.PID = 40
	e.Syscall.Sleeps[0].WakerPID, e.Syscall.Sleeps[0].WakerTID = 40, waker
	return e
}

func TestMmapLock(t *testing.T) {
	holder := sys(41, 100, nrMmap, 0x7f0000000000, 280_000_000, 0, 512<<20, 3, 0x8022, ^uint64(0), 0)
	holder.PID = 40
	start, end := sys(42, 0, 0, 0, 1000), sys(42, 2_000_000_000, 0, 0, 1000)
	start.PID, end.PID = 40, 40
	tests := []struct {
		name  string
		evs   []event.Event
		sev   Severity
		words []string // nil: no finding
	}{
		{"a 250 ms wait behind a sibling's populate", []event.Event{start, holder,
			lockWait(42, 200, nrMprotect, 260_000_000, 250_000_000, 41), end},
			Warning, []string{"mmap lock", "1 mprotect", "released by thread 41", "MAP_POPULATE"}},
		{"short waits, a small share", []event.Event{start, holder,
			lockWait(42, 200, nrMprotect, 30_000_000, 25_000_000, 41), end},
			Info, []string{"mmap lock"}},
		{"the rwsem of a file, not of the address space", []event.Event{
			slept(42, 200, nrWrite, 260_000_000, 250_000_000, false, "rwsem_down_write_slowpath+0x1e0", "down_write+0x30",
				"ext4_buffered_write_iter+0x3a")}, 0, nil},
		{"preempted on the way is the CPU queue", []event.Event{
			slept(42, 200, nrMprotect, 260_000_000, 250_000_000, true, mmapLockStack...)}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := findings(tt.evs)
			f := byID(fs, "mmap-lock-contention")
			if tt.words == nil {
				if f != nil {
					t.Fatalf("unexpected finding: %s", f.Title)
				}
				return
			}
			if f == nil {
				t.Fatalf("no mmap-lock-contention finding in %v", fs)
			}
			if f.Severity != tt.sev {
				t.Errorf("severity %s, want %s", f.Severity, tt.sev)
			}
			for _, w := range tt.words {
				if !strings.Contains(f.Title+" "+f.Summary, w) {
					t.Errorf("%q missing from:\n%s\n%s", w, f.Title, f.Summary)
				}
			}
			for _, o := range fs {
				if o.ID == "slow-syscall" && strings.Contains(o.Title, "mprotect") {
					t.Errorf("the wait is also slow-syscall's: %s", o.Title)
				}
			}
		})
	}
}

// faultLockWait is a thread's window of sleeps outside syscalls, each at
// stack (innermost first).
func faultLockWait(tid uint32, t, d uint64, count uint32, stack ...string) event.Event {
	pl := event.FaultPlace{Duration: d, Count: count}
	for _, s := range stack {
		pl.Stack = append(pl.Stack, event.Frame{Name: s})
	}
	return event.Event{Kind: event.KindFaultWait, Time: t, PID: 40, TID: tid, Comm: "prog",
		FaultWait: event.FaultWait{Start: t - d, Duration: d, Count: count, Places: []event.FaultPlace{pl}}}
}

var mmapFaultStack = []string{"__schedule+0x618", "schedule+0x23", "schedule_preempt_disabled+0x11",
	"rwsem_down_read_slowpath+0x253", "down_read_killable+0x44", "lock_mm_and_find_vma+0x9e",
	"exc_page_fault+0x1d8", "asm_exc_page_fault+0x22"}

// Page faults that wait for the mmap lock are the lock's waits, in no
// syscall; a fault waiting on another rwsem (a file's) is not.
func TestMmapLockFaults(t *testing.T) {
	start, end := sys(42, 0, 0, 0, 1000), sys(42, 2_000_000_000, 0, 0, 1000)
	start.PID, end.PID = 40, 40
	older := []string{"rwsem_down_read_slowpath+0x253", "down_read+0x44", "do_user_addr_fault+0x1a0", "exc_page_fault+0x70"}
	file := []string{"rwsem_down_read_slowpath+0x253", "down_read+0x44", "filemap_fault+0x90", "__do_fault+0x30",
		"do_user_addr_fault+0x1a0", "exc_page_fault+0x70"}
	tests := []struct {
		name  string
		evs   []event.Event
		sev   Severity
		words []string // nil: no finding
	}{
		{"faults waiting 1.2 s of 2", []event.Event{start, faultLockWait(42, 1e9, 600_000_000, 20, mmapFaultStack...),
			faultLockWait(43, 1.5e9, 600_000_000, 15, mmapFaultStack...), end},
			Warning, []string{"35 page fault(s)", "1.20s", "mmap lock", "2 thread(s)"}},
		{"an older kernel's fault handler takes it itself", []event.Event{start, faultLockWait(42, 1e9, 900_000_000, 9, older...), end},
			Warning, []string{"9 page fault(s)"}},
		{"a few waits at the slow bar, a small share", []event.Event{start, faultLockWait(42, 1e9, 24_000_000, 2, mmapFaultStack...), end}, 0, nil},
		// 50 threads' first faults on their new stacks, 1.9 ms each on
		// average, while siblings mapped theirs (map32 -m stack).
		{"one fault's wait, once", []event.Event{start, faultLockWait(42, 1e9, 133_000_000, 1, mmapFaultStack...), end}, 0, nil},
		// 14 new threads' first faults behind siblings' stack mmaps
		// (map32 -m stack -n 1100), each at the slow bar: 0% of the time.
		{"new threads' first faults, a small share", []event.Event{start, faultLockWait(42, 1e9, 150_000_000, 14, mmapFaultStack...),
			sys(42, 20_000_000_000, 0, 0, 1000)}, 0, nil},
		{"short waits, under the slow bar on average", []event.Event{start, faultLockWait(42, 1e9, 94_000_000, 50, mmapFaultStack...), end}, 0, nil},
		{"a file's lock in a fault", []event.Event{start, faultLockWait(42, 1e9, 900_000_000, 9, file...), end}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := byID(findings(tt.evs), "mmap-lock-contention")
			if tt.words == nil {
				if f != nil {
					t.Fatalf("unexpected finding: %s", f.Title)
				}
				return
			}
			if f == nil {
				t.Fatal("no mmap-lock-contention finding")
			}
			if f.Severity != tt.sev {
				t.Errorf("severity %s, want %s", f.Severity, tt.sev)
			}
			for _, w := range tt.words {
				if !strings.Contains(f.Title+" "+f.Summary, w) {
					t.Errorf("%q missing from:\n%s\n%s", w, f.Title, f.Summary)
				}
			}
		})
	}
}
