package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var hotVariants = []Variant{
	// hot-syscall: a cheap syscall called so often that its fixed cost is
	// most of a thread's time.
	{Name: "hot-syscall/getppid", Differs: "one process, ~1M getppid/s for 2 s (the case a new user first tried)",
		Mode: Cmd, Argv: []string{"hotcall", "-s", "getppid", "-d", "2"}, Expect: hot("getppid")},
	{Name: "hot-syscall/clock_gettime-8-procs", Differs: "8 processes calling clock_gettime as a raw syscall, 1 s",
		Mode: Cmd, Argv: []string{"hotcall", "-s", "clock_gettime", "-p", "8", "-d", "1"}, Expect: hot("clock_gettime", "vDSO")},
	{Name: "hot-syscall/read1-threads", Differs: "4 threads of one process reading 1 byte at a time",
		Mode: Cmd, Argv: []string{"hotcall", "-s", "read1", "-t", "4", "-d", "1"}, Expect: hot("read", "buffer")},
	{Name: "hot-syscall/sched_yield-pid", Differs: "sched_yield spinning, already running; -p for 2 s",
		Mode: PID, Argv: []string{"hotcall", "-s", "sched_yield", "-d", "30"},
		Lead: time.Second, For: 2 * time.Second, Expect: hot("sched_yield")},
	{Name: "hot-syscall/poll0-host", Differs: "poll with a zero timeout, already running; whole host for 2 s",
		Mode: Host, Argv: []string{"hotcall", "-s", "poll0", "-d", "30"},
		Lead: time.Second, For: 2 * time.Second, Expect: hot("poll", "timeout")},
	{Name: "hot-syscall/half-second", Differs: "getppid for 0.5 s",
		Mode: Cmd, Argv: []string{"hotcall", "-d", "0.5"}, Expect: hot("getppid")},
}

func hot(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.HotSyscall}, Severity: doctor.Warning, Words: words}
}
