package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var lockConvoyVariants = []Variant{
	// lock-convoy: threads of one process handing one lock on among
	// themselves, most of their time asleep in futex. These change what
	// the mechanism does not care about: the lock's implementation (and
	// so the futex operations), threads, processes, a cgroup, and when
	// sysray began; and the cousins that must stay silent.
	{Name: "lock-convoy/mutex-8-threads", Differs: "8 threads, a default pthread mutex (FUTEX_WAIT, FUTEX_WAKE from glibc's lll_lock), 20 µs of work inside",
		Mode: Cmd, Argv: []string{"lockconvoy", "-t", "8", "-d", "2"}, Expect: convoyWarns("8 threads", "futex", "__lll_lock_wait")},
	{Name: "lock-convoy/rwlock-writers", Differs: "every thread takes a pthread_rwlock for writing (glibc's rwlock words, not the mutex's)",
		Mode: Cmd, Argv: []string{"lockconvoy", "-l", "rwlock", "-d", "2"}, Expect: convoyWarns("8 threads", "futex")},
	{Name: "lock-convoy/pi-mutex", Differs: "a PTHREAD_PRIO_INHERIT mutex: FUTEX_LOCK_PI and FUTEX_UNLOCK_PI, the kernel hands the lock over",
		Mode: Cmd, Argv: []string{"lockconvoy", "-l", "pi", "-d", "2"}, Expect: convoyWarns("8 threads", "futex")},
	{Name: "lock-convoy/spin-then-futex", Differs: "a lock of the program's own that spins 200 times before FUTEX_WAIT (raw syscall)",
		Mode: Cmd, Argv: []string{"lockconvoy", "-l", "spin", "-d", "2"}, Expect: convoyWarns("8 threads", "futex")},
	{Name: "lock-convoy/3-procs", Differs: "3 processes of 4 threads, each its own convoy on its own lock (at the same address: a static binary)",
		Mode: Cmd, Argv: []string{"lockconvoy", "-p", "3", "-t", "4", "-d", "2"}, Expect: convoyWarns("4 threads", "futex")},
	{Name: "lock-convoy/cgroup", Differs: "in a cgroup of its own with a CPU quota of 1.5 CPUs (cgrun), as a container runs it",
		Mode: Cmd, Argv: []string{"cgrun", "-q", "150000", "--", "lockconvoy", "-d", "2"}, Expect: convoyWarns("8 threads", "futex")},
	{Name: "lock-convoy/pid", Differs: "running before sysray starts; -p for 2 s",
		Mode: PID, Argv: []string{"lockconvoy", "-d", "0"}, Lead: time.Second, For: 2 * time.Second, Expect: convoyWarns("8 threads", "futex")},
	{Name: "lock-convoy/host", Differs: "2 processes running before sysray starts; the whole host for 2 s",
		Mode: Host, Argv: []string{"lockconvoy", "-p", "2", "-t", "4", "-d", "0"}, Lead: time.Second, For: 2 * time.Second, Expect: convoyWarns("4 threads", "futex")},
	{Name: "lock-convoy/idle-pool", Differs: "benign: 8 workers parked on a condition variable, one short task every 20 ms from the main thread",
		Mode: Cmd, Argv: []string{"lockconvoy", "-m", "idle", "-i", "20", "-d", "2"}, Expect: convoySilent()},
	{Name: "lock-convoy/short-critical-section", Differs: "benign: 4 threads, 1 µs inside the lock and 50 µs outside: the lock is seldom taken when wanted",
		Mode: Cmd, Argv: []string{"lockconvoy", "-t", "4", "-w", "1", "-o", "50", "-d", "2"}, Expect: convoySilent()},
	{Name: "lock-convoy/go-idle", Differs: "benign: a Go program, 16 goroutines on locked OS threads handed a job every 5 ms; the runtime's idle Ms park in futex",
		Mode: Cmd, Argv: []string{"goidle", "-threads", "16", "-d", "2s"}, Expect: convoySilent()},
}

func convoyWarns(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.LockConvoy}, Severity: doctor.Warning, Words: words}
}

func convoySilent() Expect {
	return Expect{IDs: []doctor.ID{doctor.LockConvoy}, Silent: true}
}
