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
// first, so the variants change those. The -p and whole-host workloads
// run 30 s and are ended after the trace: attaching under load took 3-7 s
// here, which a 4-6 s workload did not outlive.
var cgroupVariants = []Variant{
	{Name: "cgroup-limit/pids-4-procs", Differs: "pids.max 16; 4 processes fork children until fork() (clone) fails with EAGAIN",
		Mode: Cmd, Argv: []string{"cgrun", "-p", "16", "--", "cgwork", "fork", "-n", "4", "-d", "1.5"},
		Expect: cgroupPids("clone")},
	{Name: "cgroup-limit/pids-threads", Differs: "pids.max 16; one process creates threads until pthread_create (clone3) fails with EAGAIN",
		Mode: Cmd, Argv: []string{"cgrun", "-p", "16", "--", "cgwork", "fork", "-t", "-d", "1.5"},
		Expect: cgroupPids("clone3")},
	{Name: "cgroup-limit/pids-pid", Differs: "the fork bomb at its pids.max before sysray starts; -p for 1.5 s",
		Mode: PID, Argv: []string{"cgrun", "-p", "12", "--", "cgwork", "fork", "-d", "30"},
		Lead: 700 * time.Millisecond, For: 1500 * time.Millisecond, Expect: cgroupPids("clone")},
	// The same EAGAIN from the user's RLIMIT_NPROC (scenarios/errno,
	// nprocfill): the limit set for the scenario alone, 16 tasks above what
	// uid 65534 already runs on the host, then setresuid to it (root is
	// exempt). These change what the mechanism does not care about: the
	// call that creates the task, one process or several of the user,
	// whether sysray started first, and a cgroup of its own far from its
	// pids.max.
	{Name: "cgroup-limit/nproc-fork", Differs: "RLIMIT_NPROC, not pids.max: one process of uid 65534 forks children until fork() (clone) fails with EAGAIN, retried every 10 ms",
		Mode: Cmd, Argv: []string{"nprocfill", "-m", "fork", "-d", "1.5"}, Expect: nprocAt("clone")},
	{Name: "cgroup-limit/nproc-threads", Differs: "RLIMIT_NPROC; threads: pthread_create's clone3 fails",
		Mode: Cmd, Argv: []string{"nprocfill", "-m", "thread", "-d", "1.5"}, Expect: nprocAt("clone3")},
	{Name: "cgroup-limit/nproc-vfork", Differs: "RLIMIT_NPROC; filled by fork, then vfork() retried",
		Mode: Cmd, Argv: []string{"nprocfill", "-m", "vfork", "-d", "1.5"}, Expect: nprocAt("vfork")},
	{Name: "cgroup-limit/nproc-spawn", Differs: "RLIMIT_NPROC; filled by fork, then posix_spawn retried (glibc's clone3 with CLONE_VM|CLONE_VFORK)",
		Mode: Cmd, Argv: []string{"nprocfill", "-m", "spawn", "-d", "1.5"}, Expect: nprocAt("clone3")},
	{Name: "cgroup-limit/nproc-3-procs", Differs: "RLIMIT_NPROC; 3 processes of the user share its one count",
		Mode: Cmd, Argv: []string{"nprocfill", "-p", "3", "-d", "1.5"}, Expect: nprocAt("clone")},
	{Name: "cgroup-limit/nproc-pid", Differs: "RLIMIT_NPROC; at the limit and retrying before sysray starts; -p for 1.5 s",
		Mode: PID, Argv: []string{"nprocfill", "-d", "30"}, Lead: 700 * time.Millisecond, For: 1500 * time.Millisecond,
		Expect: nprocAt("clone")},
	{Name: "cgroup-limit/nproc-host", Differs: "RLIMIT_NPROC; 2 processes creating threads, at the limit before sysray starts; the whole host for 1.5 s",
		Mode: Host, Argv: []string{"nprocfill", "-m", "thread", "-p", "2", "-d", "30"}, Lead: time.Second, For: 1500 * time.Millisecond,
		Expect: nprocAt("clone3")},
	{Name: "cgroup-limit/nproc-cgroup", Differs: "RLIMIT_NPROC inside a pids cgroup of its own (cgrun, pids.max 4096): the cgroup is not the limit",
		Mode: Cmd, Argv: []string{"cgrun", "-p", "4096", "--", "nprocfill", "-d", "1.5"}, Expect: nprocAt("clone", "of its pids.max 4096")},
	// The benign cousin: a pool that sizes itself to the tasks it can
	// start. One fork refused, then 1 s of work with the children it got
	// and exit 0: the limit was reached (info says so), nothing is stuck.
	{Name: "cgroup-limit/nproc-handled", Differs: "one refused fork, then 1 s of work and exit 0: handled, info at most",
		Mode: Cmd, Argv: []string{"nprocfill", "-o", "-d", "1"}, Expect: Expect{IDs: []doctor.ID{doctor.CgroupLimit}, Below: doctor.Warning}},
	{Name: "cgroup-limit/memory-write", Differs: "a 32 MiB memory limit; one process writes and reads back 128 MiB files: write() and read() reclaim",
		Mode: Cmd, Argv: []string{"cgrun", "-m", "32", "--", "cgwork", "file", "-s", "128", "-d", "2"},
		Expect: cgroupMemory},
	{Name: "cgroup-limit/memory-3-procs", Differs: "3 processes share a 48 MiB limit",
		Mode: Cmd, Argv: []string{"cgrun", "-m", "48", "--", "cgwork", "file", "-n", "3", "-s", "64", "-d", "2"},
		Expect: cgroupMemory},
	{Name: "cgroup-limit/memory-host", Differs: "already at its limit when sysray starts; the whole host for 2 s",
		Mode: Host, Argv: []string{"cgrun", "-m", "32", "--", "cgwork", "file", "-s", "128", "-d", "30"},
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
	{Name: "cgroup-limit/cpu-quota-no-calls", Differs: "cpu 10 ms per 100 ms; the process computes in user space and makes no syscall: no event of its own shows the throttling, and the cgroup is gone at the report",
		Mode: Cmd, Argv: []string{"cgrun", "-q", "10000", "--", "cgwork", "loop", "-d", "2"},
		Expect: cgroupCPU},
	{Name: "cgroup-limit/cpu-threads-pid", Differs: "2 threads under 10 ms per 100 ms, throttled before sysray starts; -p for 2 s",
		Mode: PID, Argv: []string{"cgrun", "-q", "10000", "--", "cgwork", "spin", "-t", "-d", "30"},
		Lead: 700 * time.Millisecond, For: 2 * time.Second, Expect: cgroupCPU},
	{Name: "cgroup-limit/cpu-host", Differs: "2 processes under 20 ms per 100 ms; the whole host for 2 s",
		Mode: Host, Argv: []string{"cgrun", "-q", "20000", "--", "cgwork", "spin", "-n", "2", "-d", "30"},
		Lead: 500 * time.Millisecond, For: 2 * time.Second, Expect: cgroupCPU},
}

func cgroupPids(call string) Expect {
	return Expect{IDs: []doctor.ID{doctor.CgroupLimit}, Severity: doctor.Warning, Words: []string{call, "EAGAIN", "pids.max"}}
}

// nprocAt: the user's RLIMIT_NPROC named, why EAGAIN misleads, and the
// call refused.
func nprocAt(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.CgroupLimit}, Severity: doctor.Warning,
		Words: append([]string{"RLIMIT_NPROC", "EAGAIN", "Resource temporarily unavailable", "per user"}, words...)}
}

var (
	cgroupMemory = Expect{IDs: []doctor.ID{doctor.CgroupLimit}, Severity: doctor.Warning, Words: []string{"memory-cgroup reclaim", "memory limit"}}
	cgroupCPU    = Expect{IDs: []doctor.ID{doctor.CgroupLimit}, Severity: doctor.Warning, Words: []string{"CPU-throttled"}}
)
