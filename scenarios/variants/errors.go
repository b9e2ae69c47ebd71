package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var errorVariants = []Variant{
	// error-storm: ≥ 10,000 failures of one syscall with one errno, more
	// than half its calls (info). No demo or live test existed.
	{Name: "error-storm/enoent-1M", Differs: "one process, 1,000,000 stat calls of a missing file (~1 s)",
		Mode: Cmd, Argv: []string{"errloop", "-k", "enoent", "-n", "1000000"}, Expect: storm("newfstatat", "ENOENT")},
	{Name: "error-storm/eagain-threads", Differs: "4 threads, 10,000 reads each of an empty non-blocking pipe",
		Mode: Cmd, Argv: []string{"errloop", "-k", "eagain", "-t", "4", "-n", "10000"}, Expect: storm("read", "EAGAIN")},
	{Name: "error-storm/econnrefused-8-procs", Differs: "8 processes, 2,000 connects each to a closed loopback port: 16,000 in all, no process near 10,000",
		Mode: Cmd, Argv: []string{"errloop", "-k", "econnrefused", "-p", "8", "-n", "2000"}, Expect: storm("connect", "ECONNREFUSED")},
	{Name: "error-storm/busy-neighbour", Differs: "20,000 failing stats in one process while a sibling makes 60,000 that succeed",
		Mode: Cmd, Argv: []string{"errloop", "-k", "enoent", "-n", "20000", "-b"}, Expect: storm("newfstatat", "ENOENT")},
	// 4,400-6,700 failures a second here under the doctor, which now also
	// follows wake-ups: 3 s makes the 10,000 of a storm with room.
	{Name: "error-storm/esrch-pid", Differs: "kill(pid, 0) of a process that is gone, already running; -p for 3 s",
		Mode: PID, Argv: []string{"errloop", "-k", "esrch", "-d", "30", "-i", "20"},
		Lead: 500 * time.Millisecond, For: 3 * time.Second, Expect: storm("kill", "ESRCH")},
	{Name: "error-storm/enoent-host", Differs: "a missing file polled by 2 threads, already running (for 8 s); the whole host for 1.5 s",
		Mode: Host, Argv: []string{"errloop", "-k", "enoent", "-t", "2", "-d", "8", "-i", "20"},
		Lead: 500 * time.Millisecond, For: 1500 * time.Millisecond, Expect: storm("newfstatat", "ENOENT")},
}

func storm(call, errno string) Expect {
	return Expect{IDs: []doctor.ID{doctor.ErrorStorm}, Severity: doctor.Info, Words: []string{call, errno}}
}
