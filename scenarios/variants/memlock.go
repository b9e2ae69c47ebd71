package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var memlockVariants = []Variant{
	// memlock-limit: calls that lock memory refused by the process's own
	// RLIMIT_MEMLOCK (64 KiB unless said), with the host's memory free
	// (scenarios/errno, memlock). These vary what the mechanism does not
	// care about: which call locks and which errno it gets, how many
	// processes, whether the program gives up or retries, and how sysray
	// is pointed at it.
	{Name: "memlock-limit/mlock", Differs: "mlock of 64 KiB chunks until ENOMEM, retried every 10 ms for 1 s",
		Mode: Cmd, Argv: []string{"memlock", "-m", "mlock", "-d", "1"}, Expect: memlockAt("mlock", "ENOMEM", "64 KiB", "VmLck")},
	{Name: "memlock-limit/mlockall", Differs: "mlockall(MCL_CURRENT|MCL_FUTURE), then plain 64 KiB mmaps until EAGAIN: the refused call asks for no lock",
		Mode: Cmd, Argv: []string{"memlock", "-m", "mlockall", "-d", "1"}, Expect: memlockAt("mmap", "EAGAIN", "VmLck")},
	{Name: "memlock-limit/malloc", Differs: "mlockall(MCL_CURRENT|MCL_FUTURE), then malloc: brk refused and glibc's fallback mmap EAGAIN, one cause",
		Mode: Cmd, Argv: []string{"memlock", "-m", "malloc", "-d", "1"}, Expect: memlockAt("mmap", "EAGAIN", "VmLck")},
	{Name: "memlock-limit/maplocked", Differs: "mmap(MAP_LOCKED) of 64 KiB chunks: EAGAIN, not ENOMEM",
		Mode: Cmd, Argv: []string{"memlock", "-m", "maplocked", "-d", "1"}, Expect: memlockAt("mmap", "EAGAIN", "64 KiB more")},
	{Name: "memlock-limit/iouring", Differs: "io_uring_setup of 256-entry rings until ENOMEM: counted against the user's locked pages, VmLck stays 0",
		Mode: Cmd, Argv: []string{"memlock", "-m", "iouring", "-d", "1"}, Expect: memlockAt("io_uring_setup", "ENOMEM", "256 entries")},
	{Name: "memlock-limit/zero", Differs: "RLIMIT_MEMLOCK 0: every mlock fails with EPERM, not ENOMEM",
		Mode: Cmd, Argv: []string{"memlock", "-l", "0", "-d", "1"}, Expect: memlockAt("mlock", "EPERM")},
	{Name: "memlock-limit/3-procs", Differs: "3 processes, each at its own limit (one finding lists them)",
		Mode: Cmd, Argv: []string{"memlock", "-p", "3", "-d", "1"}, Expect: memlockAt("mlock", "3 processes")},
	{Name: "memlock-limit/gave-up", Differs: "one refused mlock, then exit 1: a program that gives up",
		Mode: Cmd, Argv: []string{"memlock", "-x"}, Expect: memlockAt("mlock", "gave up")},
	{Name: "memlock-limit/pid", Differs: "at the limit and retrying before sysray starts; -p for 1.5 s",
		Mode: PID, Argv: []string{"memlock", "-d", "30"}, Lead: 1500 * time.Millisecond, For: 1500 * time.Millisecond,
		Expect: memlockAt("mlock", "VmLck")},
	{Name: "memlock-limit/host", Differs: "2 processes at the limit (mmap(MAP_LOCKED)) before sysray starts; the whole host for 1.5 s",
		Mode: Host, Argv: []string{"memlock", "-m", "maplocked", "-p", "2", "-d", "8"}, Lead: 2 * time.Second, For: 1500 * time.Millisecond,
		Expect: memlockAt("mmap", "2 processes")},
	{Name: "memlock-limit/container", Differs: "mlock at the limit and retrying in a container (containerd, runc) before sysray starts; --container for 1.5 s",
		Mode: InContainer, Container: &Container{}, Argv: []string{"memlock", "-d", "30"}, Lead: 1500 * time.Millisecond, For: 1500 * time.Millisecond,
		Expect: memlockAt("mlock", "VmLck")},
	// The benign cousin: one mlock refused, and the program goes on
	// unlocked, as one that only tries to pin its buffers does.
	{Name: "memlock-limit/handled", Differs: "one refused mlock, then 1 s of work unlocked and exit 0: handled, not a finding",
		Mode: Cmd, Argv: []string{"memlock", "-o", "-d", "1"}, Expect: Expect{IDs: []doctor.ID{doctor.MemlockLimit}, Silent: true}},
}

// memlockAt: RLIMIT_MEMLOCK named with the memory free, and the calls refused.
func memlockAt(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.MemlockLimit}, Severity: doctor.Warning,
		Words: append([]string{"RLIMIT_MEMLOCK", "not short"}, words...)}
}
