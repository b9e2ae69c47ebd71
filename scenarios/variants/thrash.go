package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var thrashVariants = []Variant{
	// page-cache-thrash: a reader maps a 96 MiB file and reads it pass
	// after pass in a memory cgroup of 32 MiB, so each pass evicts the
	// pages the next one needs and reads the file from disk again (the
	// demo: `thrash -n 8`). These change what the mechanism does not care
	// about: the access pattern, processes and threads, who set the limit,
	// how sysray is pointed at it; and the cousins that must stay below a
	// warning: one cold pass, a file that fits.
	{Name: "page-cache-thrash/random-4-threads", Differs: "4 threads each touch their quarter of the file in a scattered order after MADV_RANDOM (no read-around: every page a major fault of its own), for 4 s",
		Mode: Cmd, Argv: []string{"thrash", "-r", "-t", "4", "-d", "4"}, Expect: thrashWarns("sysray-thrash", "32.0 MiB", "96.0 MiB")},
	{Name: "page-cache-thrash/4-procs", Differs: "4 processes map the one file in one cgroup of 32 MiB, for 4 s",
		Mode: Cmd, Argv: []string{"thrash", "-p", "4", "-d", "4"}, Expect: thrashWarns("4 processes", "sysray-thrash", "32.0 MiB")},
	{Name: "page-cache-thrash/runtime-cgroup", Differs: "the limit set by a container runtime's way (cgrun: memory.high on cgroup v2, memory.limit_in_bytes on v1), a 64 MiB file under 24 MiB",
		Mode: Cmd, Argv: []string{"cgrun", "-m", "24", "--", "thrash", "-l", "0", "-s", "64", "-d", "4"}, Expect: thrashWarns("sysray-thrash", "24.0 MiB", "64.0 MiB")},
	// The reader outlasts sysray's start however slow (SIGTERM ends it
	// after the trace), so the trace sees it read. Sysray starts 3 s in,
	// after the file is written and its first, cold pass (which reads
	// from disk without refaulting) is done: a trace of the first pass
	// alone would rightly not say thrash, and the doctor attaches in
	// about 1 s on a quiet host.
	{Name: "page-cache-thrash/pid", Differs: "the reader running before sysray; -p for 3 s",
		Mode: PID, Argv: []string{"thrash", "-d", "60"},
		Lead: 3 * time.Second, For: 3 * time.Second, Expect: thrashWarns("sysray-thrash", "32.0 MiB")},
	{Name: "page-cache-thrash/host", Differs: "2 readers running before sysray; the whole host for 3 s",
		Mode: Host, Argv: []string{"thrash", "-p", "2", "-d", "60"},
		Lead: 3 * time.Second, For: 3 * time.Second, Expect: thrashWarns("2 processes", "sysray-thrash", "32.0 MiB")},
	{Name: "page-cache-thrash/one-cold-pass", Differs: "benign: one pass over the file by mmap with no limit: every page read once",
		Mode: Cmd, Argv: []string{"thrash", "-l", "0", "-n", "1"}, Expect: thrashQuiet()},
	{Name: "page-cache-thrash/one-pass-under-limit", Differs: "benign: one pass over the file under the 32 MiB limit: pages evicted, none read again",
		Mode: Cmd, Argv: []string{"thrash", "-n", "1"}, Expect: thrashQuiet()},
	{Name: "page-cache-thrash/cat-once", Differs: "benign: the file read once with read(), as cat or cp read it, no limit",
		Mode: Cmd, Argv: []string{"thrash", "-l", "0", "-n", "1", "-m", "read"}, Expect: thrashQuiet()},
	{Name: "page-cache-thrash/fits", Differs: "benign: a 16 MiB file read 40 times under a 64 MiB limit: read from disk once, then from the cache",
		Mode: Cmd, Argv: []string{"thrash", "-s", "16", "-l", "64", "-n", "40"}, Expect: thrashQuiet()},
	// The same thrash reached through read calls instead of a mapping: no
	// faults, the time is in the calls asleep waiting for the file's pages
	// (filemap_read), and the cgroup's refaults grow the same.
	{Name: "page-cache-thrash/read", Differs: "read() 128 KiB at a time instead of a mapping, pass after pass, for 4 s",
		Mode: Cmd, Argv: []string{"thrash", "-m", "read", "-d", "4"}, Expect: thrashWarns("sysray-thrash", "32.0 MiB", "96.0 MiB", "in read")},
	{Name: "page-cache-thrash/pread-4-procs", Differs: "4 processes pread() the one file (one fd, forked) in one cgroup of 32 MiB, for 4 s",
		Mode: Cmd, Argv: []string{"thrash", "-m", "pread", "-p", "4", "-d", "4"}, Expect: thrashWarns("4 processes", "sysray-thrash", "in pread64")},
	{Name: "page-cache-thrash/readv-4-threads", Differs: "4 threads each readv() their quarter of the file on an fd of their own, for 4 s",
		Mode: Cmd, Argv: []string{"thrash", "-m", "readv", "-t", "4", "-d", "4"}, Expect: thrashWarns("sysray-thrash", "32.0 MiB", "in readv")},
	{Name: "page-cache-thrash/read-pid", Differs: "the read() reader running before sysray; -p for 3 s",
		Mode: PID, Argv: []string{"thrash", "-m", "read", "-d", "60"},
		Lead: 3 * time.Second, For: 3 * time.Second, Expect: thrashWarns("sysray-thrash", "32.0 MiB", "in read")},
	{Name: "page-cache-thrash/pread-host", Differs: "2 pread() readers running before sysray; the whole host for 3 s",
		Mode: Host, Argv: []string{"thrash", "-m", "pread", "-p", "2", "-d", "60"},
		Lead: 3 * time.Second, For: 3 * time.Second, Expect: thrashWarns("2 processes", "sysray-thrash", "in pread64")},
	{Name: "page-cache-thrash/read-runtime-cgroup", Differs: "read() under a limit set the way a container runtime sets it (cgrun: memory.high on cgroup v2, memory.limit_in_bytes on v1), a 64 MiB file under 24 MiB",
		Mode: Cmd, Argv: []string{"cgrun", "-m", "24", "--", "thrash", "-m", "read", "-l", "0", "-s", "64", "-d", "4"}, Expect: thrashWarns("sysray-thrash", "24.0 MiB", "64.0 MiB", "in read")},
	{Name: "page-cache-thrash/read-once-under-limit", Differs: "benign: one read() pass over the file under the 32 MiB limit: pages evicted, none read again",
		Mode: Cmd, Argv: []string{"thrash", "-m", "read", "-n", "1"}, Expect: thrashQuiet()},
	{Name: "page-cache-thrash/read-fits", Differs: "benign: a 16 MiB file read() 40 times under a 64 MiB limit: from disk once, then from the cache",
		Mode: Cmd, Argv: []string{"thrash", "-m", "read", "-s", "16", "-l", "64", "-n", "40"}, Expect: thrashQuiet()},
}

func thrashWarns(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.PageCacheThrash}, Severity: doctor.Warning, Words: words}
}

// thrashQuiet: at most an info (time spent in first reads is worth
// knowing, not a warning).
func thrashQuiet() Expect {
	return Expect{IDs: []doctor.ID{doctor.PageCacheThrash}, Below: doctor.Warning}
}
