package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var mapCountVariants = []Variant{
	// map-count-limit: mmap, mprotect and munmap failing with ENOMEM at
	// vm.max_map_count, with the host's memory free (scenarios/errno,
	// mapcount). These vary what the mechanism does not care about:
	// processes, threads, which call is refused, how often the program
	// retries, and how sysray is pointed at it. The limit is the host's
	// as it is.
	{Name: "map-count-limit/one-proc", Differs: "one process fills its mappings, then retries a 256 KiB mmap and a splitting mprotect every millisecond for 1 s",
		Mode: Cmd, Argv: []string{"mapcount", "-d", "1"}, Expect: mapCountAt("mmap", "mprotect")},
	{Name: "map-count-limit/threads", Differs: "4 threads retry in the one full address space",
		Mode: Cmd, Argv: []string{"mapcount", "-t", "4", "-d", "1"}, Expect: mapCountAt("mmap", "mprotect")},
	{Name: "map-count-limit/3-procs", Differs: "3 processes, each at the limit in its own address space (one finding lists them)",
		Mode: Cmd, Argv: []string{"mapcount", "-p", "3", "-d", "1"}, Expect: mapCountAt("mmap", "3 processes")},
	{Name: "map-count-limit/mprotect", Differs: "only mprotect is retried (a split of one mapping into three), after the fill's one failed mmap",
		Mode: Cmd, Argv: []string{"mapcount", "-c", "mprotect", "-d", "1"}, Expect: mapCountAt("mprotect")},
	{Name: "map-count-limit/munmap", Differs: "only munmap is retried, of one page in the middle of a mapping: freeing memory fails with ENOMEM",
		Mode: Cmd, Argv: []string{"mapcount", "-c", "munmap", "-d", "1"}, Expect: mapCountAt("munmap")},
	{Name: "map-count-limit/slow-retry", Differs: "a retry every 100 ms for 1 s: a dozen failures, not thousands",
		Mode: Cmd, Argv: []string{"mapcount", "-b", "100000", "-d", "1"}, Expect: mapCountAt("mmap")},
	{Name: "map-count-limit/pid", Differs: "at the limit and retrying before sysray starts; -p for 1.5 s",
		Mode: PID, Argv: []string{"mapcount", "-d", "30"}, Lead: 1500 * time.Millisecond, For: 1500 * time.Millisecond,
		Expect: mapCountAt("mmap")},
	{Name: "map-count-limit/host", Differs: "2 processes of 2 threads at the limit before sysray starts; the whole host for 1.5 s",
		Mode: Host, Argv: []string{"mapcount", "-p", "2", "-t", "2", "-d", "12"}, Lead: 5 * time.Second, For: 1500 * time.Millisecond,
		Expect: mapCountAt("mmap")},
	{Name: "map-count-limit/container", Differs: "at the limit and retrying in a container (containerd, runc) before sysray starts; --container for 1.5 s",
		Mode: InContainer, Container: &Container{}, Argv: []string{"mapcount", "-d", "30"}, Lead: 1500 * time.Millisecond, For: 1500 * time.Millisecond,
		Expect: mapCountAt("mmap")},
	// The same errno from the same program for another reason: an
	// RLIMIT_AS of 195 MiB stops the fill below the map count. The doctor
	// must name that limit, and not the map count.
	{Name: "memory-refused/rlimit-as", Differs: "RLIMIT_AS 195 MiB: the fill stops at ≈49,600 mappings, below vm.max_map_count; only mmap fails",
		Mode: Cmd, Argv: []string{"mapcount", "-a", "195", "-d", "1"},
		Expect: Expect{IDs: []doctor.ID{doctor.MemoryRefused}, Severity: doctor.Warning, Words: []string{"RLIMIT_AS", "195.0 MiB", "mmap", "below vm.max_map_count"}}},
}

// mapCountAt: the map count measured at the limit, with the calls refused.
func mapCountAt(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.MapCountLimit}, Severity: doctor.Critical,
		Words: append([]string{"vm.max_map_count", "ENOMEM", "not short"}, words...)}
}
