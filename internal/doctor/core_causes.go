package doctor

// The sleeps whose cause one detector explains, so that no other reports
// them as well: slow-syscall leaves these calls to the detector named.

import (
	"strings"

	"github.com/sysray/sysray/internal/event"
)

// memcgReclaim is a call's time asleep charging memory to its cgroup, and
// whether that is at least half its time off the CPU: then the limit is
// why it was slow, and the call is cgroup-limit's, not slow-syscall's.
// balance_dirty_pages is left out: its stack does not say whether the
// dirty limit was a cgroup's or the host's (and on v1 it is the host's).
func memcgReclaim(sc *event.Syscall) (uint64, bool) {
	var ns, off uint64
	for i := range sc.Sleeps {
		sl := &sc.Sleeps[i]
		off += sl.Duration
		if hasFrame(sl.Stack, memcgFrames) && !hasFrame(sl.Stack, memcgControlFrames) {
			ns += sl.Duration
		}
	}
	return ns, ns > 0 && ns*2 >= off
}

// bioCause says what a call waited for, if it is a call that did not ask
// for I/O and spent at least half its time waiting for the storage: the
// cause and the time asleep in it. Less than half, and the call is slow
// for another reason first (slow-syscall's).
func bioCause(name string, sc *event.Syscall) (cause string, ns uint64, stack []event.Frame) {
	if event.Is(name, event.AsksIO) {
		return "", 0, nil
	}
	if _, memcg := memcgReclaim(sc); memcg {
		return "", 0, nil // writeback waited for inside reclaim at a memory limit: cgroup-limit's
	}
	for i := range sc.Sleeps {
		if hasFrame(sc.Sleeps[i].Stack, syncFrames) {
			return "", 0, nil // a write to a file opened O_SYNC or O_DSYNC asked to wait
		}
	}
	for i := range sc.Sleeps {
		sl := &sc.Sleeps[i]
		if preempted(sl) {
			continue
		}
		for _, f := range sl.Stack {
			if c := bioCauses[funcOf(f.Name)]; c != "" {
				if cause == "" {
					cause, stack = c, sl.Stack
				}
				if c == cause {
					ns += sl.Duration
				}
				break
			}
		}
	}
	if ns*2 < sc.Latency {
		return "", 0, nil
	}
	return cause, ns, stack
}

// ownsMmapLock says whether a slow call is mmap-lock-contention's: at least half
// of it asleep on the mmap lock.
func ownsMmapLock(sc *event.Syscall) bool {
	ns, _, _ := mmapLockWait(sc)
	return ns > 0 && ns*2 >= sc.Latency
}

// bioCauses maps a frame to what the call waited for. Order matters: the
// first cause found in a stack, scanning from the innermost frame, wins.
var bioCauses = map[string]string{
	"blkdev_issue_discard":      "discard",
	"__blkdev_issue_discard":    "discard",
	"ext4_issue_discard":        "discard",
	"blkdev_issue_secure_erase": "discard",

	"balance_dirty_pages":                   "dirty-throttle",
	"balance_dirty_pages_ratelimited_flags": "dirty-throttle",

	"jbd2_log_wait_commit":      "journal",
	"wait_transaction_locked":   "journal",
	"add_transaction_credits":   "journal",
	"start_this_handle":         "journal",
	"__jbd2_log_wait_for_space": "journal",
	"jbd2_journal_lock_updates": "journal",
	"xlog_wait":                 "journal",
	"xfs_log_force":             "journal",
	"btrfs_commit_transaction":  "journal",

	"folio_wait_writeback":         "writeback",
	"folio_wait_stable":            "writeback",
	"wait_on_page_writeback":       "writeback",
	"__filemap_fdatawait_range":    "writeback",
	"filemap_fdatawait_range":      "writeback",
	"filemap_write_and_wait_range": "writeback",
	"writeback_inodes_sb":          "writeback",
	"sync_inodes_sb":               "writeback",

	"blkdev_issue_flush": "flush",
}

// syncFrames mark a call that asked for durability: a write to a file
// opened with O_SYNC or O_DSYNC syncs inside the write.
var syncFrames = []string{"generic_write_sync", "vfs_fsync_range", "ext4_sync_file", "xfs_file_fsync",
	"btrfs_sync_file", "blkdev_fsync", "iomap_dio_complete"}

// Frames of a sleep that is a charge to a memory cgroup: reclaim, or the
// penalty sleep above memory.high.
var memcgFrames = []string{"try_charge_memcg", "__mem_cgroup_handle_over_high", "mem_cgroup_handle_over_high",
	"reclaim_high", "try_to_free_mem_cgroup_pages", "mem_cgroup_out_of_memory"}

// Frames of a write to a control file that reclaims because it was asked
// to (memory.reclaim, lowering a limit): not a limit reached.
var memcgControlFrames = []string{"memory_reclaim", "memory_high_write", "memory_max_write", "mem_cgroup_resize_max",
	"mem_cgroup_force_empty", "mem_cgroup_write"}

// mmapLockWait is the time a call spent asleep waiting for its process's
// mmap lock (0: none), with the stack of the longest such sleep, and the
// tids that woke it.
func mmapLockWait(sc *event.Syscall) (ns uint64, stack []event.Frame, wakers []uint32) {
	var longest uint64
	for i := range sc.Sleeps {
		sl := &sc.Sleeps[i]
		if preempted(sl) || !hasFrame(sl.Stack, rwsemFrames) || !hasFrame(sl.Stack, mmapLockFrames) {
			continue
		}
		ns += sl.Duration
		if sl.Duration > longest {
			longest, stack = sl.Duration, sl.Stack
		}
		if sl.WakerTID != 0 {
			wakers = append(wakers, sl.WakerTID)
		}
	}
	return ns, stack, wakers
}

// Frames that take mm->mmap_lock on the syscall paths. A sleep in an rwsem
// slow path under one of them is a wait for the mmap lock.
var mmapLockFrames = []string{"vm_mmap_pgoff", "do_mprotect_pkey", "__vm_munmap", "__do_sys_brk", "do_madvise",
	"__mm_populate", "__do_sys_mremap", "lock_mm_and_find_vma", "mmap_read_lock_killable", "do_mmap",
	"__x64_sys_munmap", "__x64_sys_brk", "__x64_sys_mremap", "do_vmi_munmap", "__do_sys_msync", "do_mlock",
	"__do_sys_mlockall", "__do_sys_munlockall", "__do_sys_remap_file_pages", "__do_sys_process_madvise"}

var rwsemFrames = []string{"rwsem_down_write_slowpath", "rwsem_down_read_slowpath"}

// faultMmapLock says a place a thread slept at outside syscalls was a page
// fault waiting for its process's mmap lock: an rwsem slow path under
// lock_mm_and_find_vma (6.4 and later: a fault that could not use its
// mapping's own lock, because the mapping was being changed or needed an
// anon_vma, takes the process's), or under the fault handler itself (older
// kernels read-lock it in do_user_addr_fault).
func faultMmapLock(pl *event.FaultPlace) bool {
	if !hasFrame(pl.Stack, rwsemFrames) {
		return false
	}
	return hasFrame(pl.Stack, []string{"lock_mm_and_find_vma"}) || nextAfterLock(pl.Stack, []string{"do_user_addr_fault", "exc_page_fault"})
}

// nextAfterLock says the first frame past the rwsem's own (the slow path,
// down_read and its kin) is one of callers: the lock was taken there.
func nextAfterLock(stack []event.Frame, callers []string) bool {
	in := false
	for _, f := range stack {
		fn := funcOf(f.Name)
		switch {
		case contains(rwsemFrames, fn) || strings.HasPrefix(fn, "down_read") || strings.HasPrefix(fn, "__down_read"):
			in = true
		case in:
			return contains(callers, fn)
		}
	}
	return false
}

// allocStalls follows, by thread, the direct compaction and direct
// reclaim passes made inside syscalls since its last call seen ended (the
// pass events carry the syscall they ran in). That time is on the CPU, so
// no sleep stack shows it: a call slow for it is compaction-stall's, not
// slow-syscall's (a write to vm.nr_hugepages that compacted for 180 ms
// was reported as a slow write "running in the kernel"). Passes end inside
// their call, so their events come before its exit; a call that did not
// cross over (a fast one, live) leaves its passes to be told apart by time
// at the next call's exit.
type allocStalls map[uint32][]allocPass

type allocPass struct{ begin, ns uint64 }

// allocStallsMax bounds the threads followed, allocPassesMax the passes
// kept for one (the latest): past them a call's passes may be missed, and
// the call stays slow-syscall's.
const (
	allocStallsMax = 1 << 14
	allocPassesMax = 64
)

// observe keeps a direct compaction or reclaim pass made inside a syscall.
func (a allocStalls) observe(e *event.Event) {
	r := &e.Reclaim
	if e.Kind != event.KindReclaim || r.Nr < 0 || (r.What != event.ReclaimCompact && r.What != event.ReclaimDirect) {
		return
	}
	ps, ok := a[e.TID]
	if !ok && len(a) >= allocStallsMax {
		return
	}
	if len(ps) == allocPassesMax {
		ps = append(ps[:0], ps[1:]...)
	}
	a[e.TID] = append(ps, allocPass{begin: e.Time - min(r.Duration, e.Time), ns: r.Duration})
}

// owns takes the thread's passes at the exit of its call, and says whether
// those made during the call were at least half of it: then the allocator
// is why it was slow.
func (a allocStalls) owns(e *event.Event) bool {
	ps, ok := a[e.TID]
	if !ok {
		return false
	}
	delete(a, e.TID)
	sc := &e.Syscall
	start := e.Time - min(sc.Latency, e.Time)
	var ns uint64
	for _, p := range ps {
		if p.begin >= start {
			ns += p.ns
		}
	}
	return ns > 0 && ns*2 >= sc.Latency
}
