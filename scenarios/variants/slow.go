package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var slowVariants = []Variant{
	// slow-syscall: calls that are not waits by design and take ≥ 10 ms
	// (warning from 100 ms of the call's own time, unless the call was a
	// large copy at a copying rate: getrandom and read of /dev/urandom of
	// 128-192 MiB are, and are info). A call meant to be a warning takes 3x
	// the line or more: these VMs swing ±50% from hour to hour.
	{Name: "slow-syscall/fsync-8-procs", Differs: "the device: 8 processes each overwrite 32 MiB of a file and fsync it, twice (20-90 ms each here)",
		Mode: Cmd, Argv: []string{"slowcall", "-k", "fsync", "-p", "8", "-s", "32", "-n", "2"},
		Expect: Expect{IDs: []doctor.ID{doctor.SlowSyscall}, Severity: doctor.Info, Words: []string{"fsync"}}},
	{Name: "slow-syscall/log-truncate", Differs: "a lock: 2 processes append lines to a tmpfs log with write() while a third fallocates and truncates it, holding the inode's i_rwsem",
		Mode: Cmd, Argv: []string{"slowcall", "-k", "truncate", "-p", "2", "-s", "512", "-d", "1.5"},
		Expect: Expect{IDs: []doctor.ID{doctor.SlowSyscall}, Severity: doctor.Warning, Words: []string{"write", "rwsem"}}},
	{Name: "slow-syscall/getrandom-oversubscribed", Differs: "on the CPU: 6 threads in 2 processes on 2 CPUs, getrandom of 128 MiB twice each: mostly preempted; all 12 are one group",
		Mode: Cmd, Argv: []string{"slowcall", "-k", "getrandom", "-p", "2", "-t", "3", "-s", "128", "-n", "2"},
		Expect: Expect{IDs: []doctor.ID{doctor.SlowSyscall}, Severity: doctor.Info, Words: []string{"12 slow getrandom", "running", "large copies"}}},
	{Name: "slow-syscall/urandom-read", Differs: "on the CPU, through read(): 3 reads of 192 MiB from /dev/urandom (getrandom's path, ~0.6 s each), one thread; all 3 are slow",
		Mode: Cmd, Argv: []string{"slowcall", "-k", "urandom", "-s", "192", "-n", "3"},
		Expect: Expect{IDs: []doctor.ID{doctor.SlowSyscall}, Severity: doctor.Info, Words: []string{"3 slow read", "running", "large copies"}}},
	{Name: "slow-syscall/fsync-pid", Differs: "64 MiB overwritten and fsynced in a loop, already running; -p for 1.5 s",
		Mode: PID, Argv: []string{"slowcall", "-k", "fsync", "-s", "64", "-d", "30"},
		Lead: 500 * time.Millisecond, For: 1500 * time.Millisecond,
		Expect: Expect{IDs: []doctor.ID{doctor.SlowSyscall}, Severity: doctor.Info, Words: []string{"fsync"}}},
	{Name: "slow-syscall/log-truncate-host", Differs: "the log truncation, already running (for 8 s); the whole host for 1.5 s",
		Mode: Host, Argv: []string{"slowcall", "-k", "truncate", "-s", "512", "-d", "8"},
		Lead: 500 * time.Millisecond, For: 1500 * time.Millisecond,
		Expect: Expect{IDs: []doctor.ID{doctor.SlowSyscall}, Severity: doctor.Warning, Words: []string{"write", "rwsem"}}},
}
