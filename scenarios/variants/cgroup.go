package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

// cgroup-limit: a process held back by its own cgroup's limits. There is
// no bundled demo; each variant runs a workload (cgwork) under cgrun, which
// makes a cgroup with one limit set, moves itself in, execs the workload
// and removes the cgroup however it ends. The mechanism does not depend on
// processes against threads, their number, or whether sysray started
// first, so the variants change those.
var cgroupVariants = []Variant{
	{Name: "cgroup-limit/pids-4-procs", Differs: "pids.max 16; 4 processes fork children until fork() (clone) fails with EAGAIN",
		Mode: Cmd, Argv: []string{"cgrun", "-p", "16", "--", "cgwork", "fork", "-n", "4", "-d", "1.5"},
		Expect: cgroupPids("clone")},
	{Name: "cgroup-limit/pids-threads", Differs: "pids.max 16; one process creates threads until pthread_create (clone3) fails with EAGAIN",
		Mode: Cmd, Argv: []string{"cgrun", "-p", "16", "--", "cgwork", "fork", "-t", "-d", "1.5"},
		Expect: cgroupPids("clone3")},
	{Name: "cgroup-limit/pids-pid", Differs: "the fork bomb at its pids.max before sysray starts; -p for 1.5 s",
		Mode: PID, Argv: []string{"cgrun", "-p", "12", "--", "cgwork", "fork", "-d", "4"},
		Lead: 700 * time.Millisecond, For: 1500 * time.Millisecond, Expect: cgroupPids("clone")},
	{Name: "cgroup-limit/memory-write", Differs: "a 32 MiB memory limit; one process writes and reads back 128 MiB files: write() and read() reclaim",
		Mode: Cmd, Argv: []string{"cgrun", "-m", "32", "--", "cgwork", "file", "-s", "128", "-d", "2"},
		Expect: cgroupMemory},
	{Name: "cgroup-limit/memory-3-procs", Differs: "3 processes share a 48 MiB limit",
		Mode: Cmd, Argv: []string{"cgrun", "-m", "48", "--", "cgwork", "file", "-n", "3", "-s", "64", "-d", "2"},
		Expect: cgroupMemory},
	{Name: "cgroup-limit/memory-host", Differs: "already at its limit when sysray starts; the whole host for 2 s",
		Mode: Host, Argv: []string{"cgrun", "-m", "32", "--", "cgwork", "file", "-s", "128", "-d", "5"},
		Lead: 700 * time.Millisecond, For: 2 * time.Second, Expect: cgroupMemory},
	{Name: "cgroup-limit/memory-small-writes", Differs: "16 KiB calls instead of 1 MiB: each reclaims a little and almost none is slower than 10 ms",
		Mode: Cmd, Argv: []string{"cgrun", "-m", "32", "--", "cgwork", "file", "-s", "128", "-b", "16", "-d", "2"},
		Expect: cgroupMemory},
	{Name: "cgroup-limit/memory-mapped", Differs: "the file is read through mmap: the page cache is charged, and reclaimed, in page faults outside any syscall",
		Mode: Cmd, Argv: []string{"cgrun", "-m", "32", "--", "cgwork", "mapread", "-s", "128", "-d", "2"},
		Expect: Expect{IDs: []doctor.ID{doctor.CgroupLimit}, Severity: doctor.Warning, Words: []string{"memory-cgroup reclaim", "memory limit", "page faults outside syscalls"}}},
	{Name: "cgroup-limit/cpu-quota", Differs: "cpu 10 ms per 100 ms; one process reads /dev/urandom (CPU time inside syscalls)",
		Mode: Cmd, Argv: []string{"cgrun", "-q", "10000", "--", "cgwork", "spin", "-d", "2"},
		Expect: cgroupCPU},
	{Name: "cgroup-limit/cpu-threads-pid", Differs: "2 threads under 10 ms per 100 ms, throttled before sysray starts; -p for 2 s",
		Mode: PID, Argv: []string{"cgrun", "-q", "10000", "--", "cgwork", "spin", "-t", "-d", "4"},
		Lead: 700 * time.Millisecond, For: 2 * time.Second, Expect: cgroupCPU},
	{Name: "cgroup-limit/cpu-host", Differs: "2 processes under 20 ms per 100 ms; the whole host for 2 s",
		Mode: Host, Argv: []string{"cgrun", "-q", "20000", "--", "cgwork", "spin", "-n", "2", "-d", "4"},
		Lead: 500 * time.Millisecond, For: 2 * time.Second, Expect: cgroupCPU},
}

func cgroupPids(call string) Expect {
	return Expect{IDs: []doctor.ID{doctor.CgroupLimit}, Severity: doctor.Warning, Words: []string{call, "EAGAIN", "pids.max"}}
}

var (
	cgroupMemory = Expect{IDs: []doctor.ID{doctor.CgroupLimit}, Severity: doctor.Warning, Words: []string{"memory-cgroup reclaim", "memory limit"}}
	cgroupCPU    = Expect{IDs: []doctor.ID{doctor.CgroupLimit}, Severity: doctor.Warning, Words: []string{"CPU-throttled"}}
)
