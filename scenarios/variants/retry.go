package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var retryVariants = []Variant{
	// failed-syscall-retry: a call that fails and is made again at once
	// without a flag. The demo (map32) retries mmap without MAP_32BIT after
	// ENOMEM, ~500 times in one process.
	{Name: "failed-syscall-retry/odirect-25", Differs: "openat with O_DIRECT on a filesystem without direct I/O: EINVAL, retried buffered; only 25 times",
		Mode: Cmd, Argv: []string{"retrier", "-k", "odirect", "-n", "25"}, Expect: retried("openat", "EINVAL", "O_DIRECT")},
	{Name: "failed-syscall-retry/odirect-200k", Differs: "the same 200,000 times in one process",
		Mode: Cmd, Argv: []string{"retrier", "-k", "odirect", "-n", "200000"}, Expect: retried("openat", "EINVAL", "O_DIRECT")},
	{Name: "failed-syscall-retry/excl-8-procs", Differs: "openat O_CREAT|O_EXCL, 0644 of a file that exists: EEXIST, retried without O_CREAT|O_EXCL (so glibc passes no mode); 8 processes, 30 times each",
		Mode: Cmd, Argv: []string{"retrier", "-k", "excl", "-p", "8", "-n", "30"}, Expect: retried("openat", "EEXIST", "O_EXCL")},
	{Name: "failed-syscall-retry/hugetlb-threads", Differs: "mmap MAP_HUGETLB with no huge pages reserved: ENOMEM, retried without; 4 threads, 50 times each",
		Mode: Cmd, Argv: []string{"retrier", "-k", "hugetlb", "-t", "4", "-n", "50"}, Expect: retried("mmap", "ENOMEM", "MAP_HUGETLB")},
	{Name: "failed-syscall-retry/noreplace-pid", Differs: "mmap MAP_FIXED_NOREPLACE at an address in use: EEXIST; 1,000 a second, already running; -p for 1.5 s",
		Mode: PID, Argv: []string{"retrier", "-k", "noreplace", "-d", "30", "-i", "1000"},
		Lead: 500 * time.Millisecond, For: 1500 * time.Millisecond, Expect: retried("mmap", "EEXIST", "MAP_FIXED_NOREPLACE")},
	{Name: "failed-syscall-retry/map32-forks", Differs: "the demo's program timing a fork after every 100 threads, 3,000 threads: the forks' growth is the larger cost and outranks the retry, which must still be found",
		Mode: Cmd, Argv: []string{"map32", "-n", "3000"}, Expect: retried("mmap", "ENOMEM", "MAP_32BIT")},
	{Name: "failed-syscall-retry/odirect-host", Differs: "O_DIRECT fallback in 4 threads, already running; the whole host for 1.5 s",
		Mode: Host, Argv: []string{"retrier", "-k", "odirect", "-t", "4", "-d", "30", "-i", "500"},
		Lead: 500 * time.Millisecond, For: 1500 * time.Millisecond, Expect: retried("openat", "EINVAL", "O_DIRECT")},
}

func retried(call, errno, flag string) Expect {
	return Expect{IDs: []doctor.ID{doctor.FailedRetry}, Severity: doctor.Warning, Words: []string{call, errno, flag}}
}
