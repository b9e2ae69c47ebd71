package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var cpuWaitVariants = []Variant{
	// cpu-wait: a loop that sleeps a millisecond and measures how late it
	// wakes shares its CPU with busier tasks of a higher priority. These
	// change what the mechanism does not care about: whether the victim
	// is woken or preempted, processes or threads, how sysray is pointed
	// at it, a cgroup of its own; and the cousins that must stay below
	// warning. Not here: the victim unpinned among more nice -10 hogs
	// than CPUs (cpuwait -u), which did not pass on the loaded hosts it
	// was tried on (docs/detectors/cpu-wait.md).
	{Name: "cpu-wait/pinned", Differs: "the demo: the victim and 3 hogs at nice -10 pinned to one CPU",
		Mode: Cmd, Argv: []string{"cpuwait", "-d", "3"}, Expect: cpuWaitWarns("affinity mask", "nice -10")},
	{Name: "cpu-wait/preempted", Differs: "the victim computes instead of sleeping: preempted, not woken late",
		Mode: Cmd, Argv: []string{"cpuwait", "-m", "-d", "3"}, Expect: cpuWaitWarns("outrank", "preemption")},
	{Name: "cpu-wait/3-victims-thread-hogs", Differs: "3 victim processes; the hogs are 3 threads of one process",
		Mode: Cmd, Argv: []string{"cpuwait", "-p", "3", "-T", "-d", "3"}, Expect: cpuWaitWarns("3 processes", "affinity mask")},
	{Name: "cpu-wait/pid", Differs: "running before sysray; -p the victim for 2 s (the hogs, its children, are not traced: they show as what ran)",
		Mode: PID, Argv: []string{"cpuwait", "-d", "8"}, Lead: time.Second, For: 2 * time.Second,
		Expect: cpuWaitWarns("affinity mask", "nice -10")},
	{Name: "cpu-wait/host", Differs: "running before sysray; the whole host for 2 s",
		Mode: Host, Argv: []string{"cpuwait", "-d", "8"}, Lead: time.Second, For: 2 * time.Second,
		Expect: cpuWaitWarns("affinity mask", "nice -10")},
	{Name: "cpu-wait/cgroup", Differs: "in a cgroup of its own, as a container runtime makes (cgrun)",
		Mode: Cmd, Argv: []string{"cgrun", "-p", "64", "--", "cpuwait", "-d", "3"}, Expect: cpuWaitWarns("affinity mask", "nice -10")},
	{Name: "cpu-wait/idle-pool", Differs: "benign: 8 threads parked on a condition variable, one woken every 5 ms for a few µs",
		Mode: Cmd, Argv: []string{"cpuwait", "-I", "8", "-d", "3"}, Expect: cpuWaitSilent()},
	{Name: "cpu-wait/build", Differs: "benign: a parallel build, 2 compile-like jobs of 20-80 ms of CPU at a time, equal priority, nothing pinned",
		Mode: Cmd, Argv: []string{"cpuwait", "-B", "2", "-d", "3"}, Expect: cpuWaitSilent()},
}

func cpuWaitWarns(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.CPUWait}, Severity: doctor.Warning, Words: words}
}

func cpuWaitSilent() Expect {
	return Expect{IDs: []doctor.ID{doctor.CPUWait}, Silent: true}
}
