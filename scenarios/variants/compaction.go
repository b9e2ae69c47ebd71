package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var compactionVariants = []Variant{
	// compaction-stall: a process faults a MADV_HUGEPAGE region while the
	// host's free memory is scattered 4 KiB pages (thpcompact: hugetlb
	// pages reserved, 4 KiB pages faulted and every other one given back,
	// the free 2 MiB blocks left reserved too), so each fault compacts
	// first. These change what the mechanism does not care about: threads,
	// a cgroup of its own, how sysray is pointed at it; and the cousins
	// that must stay below a warning.
	{Name: "compaction-stall/madvise-region", Differs: "the demo: one thread faults a 512 MiB MADV_HUGEPAGE region on fragmented free memory",
		Mode: Cmd, Argv: []string{"thpcompact"}, Expect: compactionWarns("thpcompact", "direct compaction", "page faults")},
	{Name: "compaction-stall/2-threads", Differs: "2 threads fault their halves of the region at once",
		Mode: Cmd, Argv: []string{"thpcompact", "-t", "2"}, Expect: compactionWarns("thpcompact", "direct compaction", "2 thread(s)")},
	{Name: "compaction-stall/cgroup", Differs: "in a cgroup of its own, as a container runtime makes (cgrun, a pids limit only: no memory limit to reclaim against)",
		Mode: Cmd, Argv: []string{"cgrun", "-p", "64", "--", "thpcompact"}, Expect: compactionWarns("thpcompact", "direct compaction")},
	// Fragmenting takes 1-3 s here, more on a loaded host; the rounds
	// begin 8 s after the workload started (-d, a clock) and are spread
	// over the 16 s after (-D), as many as the pages given back allow.
	// sysray starts 9 s after the workload and takes 0.5-1 s to attach on
	// a quiet host, up to 6 s on a loaded one: it traces 8 s from 9.5-15
	// s, within the rounds. (Back to back, the rounds ran out of pages in
	// under a second on a host that compacts fast, before sysray
	// attached.)
	{Name: "compaction-stall/pid", Differs: "running before sysray, fragmenting, then faulting round after round from 8 s to 24 s (a child a round, 16 faults each); -p for 8 s",
		Mode: PID, Argv: []string{"thpcompact", "-s", "32", "-f", "3072", "-d", "8", "-D", "16"}, Lead: 9 * time.Second, For: 8 * time.Second,
		Expect: compactionWarns("thpcompact", "direct compaction")},
	{Name: "compaction-stall/host", Differs: "running before sysray, fragmenting, then faulting round after round from 8 s to 24 s; the whole host for 8 s",
		Mode: Host, Argv: []string{"thpcompact", "-s", "32", "-f", "3072", "-d", "8", "-D", "16"}, Lead: 9 * time.Second, For: 8 * time.Second,
		Expect: compactionWarns("thpcompact", "direct compaction")},
	{Name: "compaction-stall/container", Differs: "in a containerd container (privileged: it reserves the host's hugetlb pages), running before sysray, fragmenting, then faulting round after round from 8 s to 24 s; --container for 8 s",
		Mode: InContainer, Container: &Container{Privileged: true, Sysctls: []string{"vm/nr_hugepages"}},
		Argv: []string{"thpcompact", "-s", "32", "-f", "3072", "-d", "8", "-D", "16"}, Lead: 9 * time.Second, For: 8 * time.Second,
		Expect: compactionWarns("thpcompact", "direct compaction")},
	{Name: "compaction-stall/unfragmented", Differs: "benign: the same THP faults on the host's free memory as it is, in large blocks: no compaction",
		Mode: Cmd, Argv: []string{"thpcompact", "-b"}, Expect: compactionQuiet()},
	{Name: "compaction-stall/one-fault", Differs: "benign: one THP fault on fragmented free memory: one stall at most (on this VM it often finds a 2 MiB block left free and does not compact)",
		Mode: Cmd, Argv: []string{"thpcompact", "-s", "2"}, Expect: compactionQuiet()},
}

func compactionWarns(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.CompactionStall}, Severity: doctor.Warning, Words: words}
}

// compactionQuiet: at most an info.
func compactionQuiet() Expect {
	return Expect{IDs: []doctor.ID{doctor.CompactionStall}, Below: doctor.Warning}
}
