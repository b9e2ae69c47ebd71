package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var oomVariants = []Variant{
	// oom-kill: a process over its memory cgroup's limit gets SIGKILL from
	// the kernel's OOM killer. The test (TestOOMKill) runs one
	// single-threaded process that mallocs 16 MiB at a time in one 64 MiB
	// cgroup. oomer makes its cgroups and removes them however it ends.
	{Name: "oom-kill/threads", Differs: "one process, 4 threads growing at once",
		Mode: Cmd, Argv: []string{"oomer", "-p", "1", "-t", "4"}, Expect: oomKilled},
	{Name: "oom-kill/8-procs-2-cgroups", Differs: "8 processes in 2 cgroups of 48 MiB",
		Mode: Cmd, Argv: []string{"oomer", "-p", "8", "-c", "2", "-l", "48"}, Expect: oomKilled},
	{Name: "oom-kill/populate", Differs: "mmap(MAP_POPULATE) of 32 MiB at a time: the charge that fails, and the kill, come inside the syscall",
		Mode: Cmd, Argv: []string{"oomer", "-m", "populate", "-s", "32"}, Expect: oomKilled},
	{Name: "oom-kill/memfd", Differs: "write() to a memfd: shmem page cache, charged inside write, not in the process's RSS",
		Mode: Cmd, Argv: []string{"oomer", "-m", "memfd"}, Expect: oomKilled},
	// Killed about 8 s after it starts: the growth begins before sysray,
	// and the kill comes inside the trace (10 s from 0.7 s plus the attach)
	// for any attach from 0.5 s (a quiet host) to 6 s (a loaded one).
	{Name: "oom-kill/pid", Differs: "one process growing 4 MiB every 250 ms towards 128 MiB since before sysray (killed about 8 s after its start); -p for 10 s",
		Mode: PID, Argv: []string{"oomer", "-p", "0", "-s", "4", "-i", "250", "-l", "128"},
		Lead: 700 * time.Millisecond, For: 10 * time.Second, Expect: oomKilled},
	{Name: "oom-kill/host-restarts", Differs: "a supervisor, already running, restarts a worker the OOM killer ends every ~0.8 s; the whole host for 2 s",
		Mode: Host, Argv: []string{"oomer", "-p", "1", "-r", "-d", "8", "-s", "8", "-i", "100"},
		Lead: 500 * time.Millisecond, For: 2 * time.Second, Expect: oomKilled},
}

var oomKilled = Expect{IDs: []doctor.ID{doctor.OOMKill}, Severity: doctor.Critical, Words: []string{"out-of-memory"}}
