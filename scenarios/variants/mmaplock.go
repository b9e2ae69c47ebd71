package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var mmapLockVariants = []Variant{
	// mmap-lock-contention: threads of one process waiting on its mmap lock
	// while a sibling holds it. The rule keys on the sleep (an rwsem slow
	// path under a frame that takes mm->mmap_lock), not on the call, the
	// thread count or who holds it.
	{Name: "mmap-lock-contention/mprotect", Differs: "2 threads flip one page's protection while a sibling maps 512 MiB with MAP_POPULATE",
		Mode: Cmd, Argv: []string{"mmaplock", "-w", "mprotect"}, Expect: lockWarns("mprotect")},
	{Name: "mmap-lock-contention/mmap-8-threads", Differs: "8 threads, small mmap and munmap",
		Mode: Cmd, Argv: []string{"mmaplock", "-w", "mmap", "-t", "8"}, Expect: lockWarns("mmap")},
	{Name: "mmap-lock-contention/brk", Differs: "the heap: one thread moves brk up and down",
		Mode: Cmd, Argv: []string{"mmaplock", "-w", "brk"}, Expect: lockWarns("brk")},
	{Name: "mmap-lock-contention/munmap-holder", Differs: "the holder unmaps touched memory instead (shorter holds); 4 waiters",
		Mode: Cmd, Argv: []string{"mmaplock", "-h", "munmap", "-t", "4"},
		Expect: Expect{IDs: []doctor.ID{doctor.MmapLockContention}, Severity: doctor.Info, Words: []string{"mmap lock"}}},
	{Name: "mmap-lock-contention/pid", Differs: "already running; -p for 2 s",
		Mode: PID, Argv: []string{"mmaplock", "-d", "30"}, Lead: 500 * time.Millisecond, For: 2 * time.Second, Expect: lockWarns("mprotect")},
	{Name: "mmap-lock-contention/host", Differs: "already running; the whole host for 2 s",
		Mode: Host, Argv: []string{"mmaplock", "-w", "mmap", "-d", "30"}, Lead: 500 * time.Millisecond, For: 2 * time.Second,
		Expect: lockWarns("mmap")},
	// Waits in page faults, in no syscall: 4 threads read fresh pages of
	// a mapping whose protection a sibling changes again and again. A
	// fault's wait counts from the slow bar (10 ms), by its stack's mean:
	// -s 512 makes each hold 25-50 ms; with -s 256 the holds were 13-25
	// ms, the faults' mean wait sat at the bar, and on a faster host the
	// variant missed both runs (3-13% of the process's time counted).
	{Name: "mmap-lock-contention/fault", Differs: "the waiters wait in page faults, not calls: 4 threads fault on a 1 GiB mapping a sibling mprotects again and again",
		Mode: Cmd, Argv: []string{"mmaplock", "-h", "mprotect", "-w", "fault", "-t", "4", "-s", "512", "-d", "3"}, Expect: lockWarns("page fault")},
	{Name: "mmap-lock-contention/fault-pid", Differs: "the faulting threads already running; -p for 2 s",
		Mode: PID, Argv: []string{"mmaplock", "-h", "mprotect", "-w", "fault", "-t", "4", "-s", "512", "-d", "30"},
		Lead: 500 * time.Millisecond, For: 2 * time.Second, Expect: lockWarns("page fault")},
}

func lockWarns(call string) Expect {
	return Expect{IDs: []doctor.ID{doctor.MmapLockContention}, Severity: doctor.Warning, Words: []string{call, "mmap lock"}}
}
