package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var vsyscallVariants = []Variant{
	// legacy-vsyscall: an old libc or static binary calls fixed addresses in
	// the vsyscall page; the kernel emulates each call in a page fault, or
	// refuses a read of the page with SIGSEGV. The demos call time() from
	// one process for 1 s (vsyscall-bench) and read the page from the main
	// thread of one process (vsyscall-crash).
	{Name: "legacy-vsyscall/gettimeofday", Differs: "gettimeofday() through the page (its first entry) instead of time(), 0.5 s",
		Mode: Cmd, Argv: []string{"vsyscaller", "-c", "gettimeofday", "-d", "0.5"}, Expect: emulated(doctor.Warning, "gettimeofday")},
	{Name: "legacy-vsyscall/getcpu-8-procs", Differs: "getcpu() through the page from 8 processes, 2,000 calls each",
		Mode: Cmd, Argv: []string{"vsyscaller", "-c", "getcpu", "-p", "8", "-n", "2000"}, Expect: emulated(doctor.Warning, "getcpu")},
	{Name: "legacy-vsyscall/20-calls", Differs: "20 time() calls in all: too few to cost anything, still worth an info",
		Mode: Cmd, Argv: []string{"vsyscaller", "-n", "20"}, Expect: emulated(doctor.Info, "time")},
	// The workloads of -p and whole-host runs outlast sysray's start,
	// however slow (the runner ends them after the trace): under load the
	// start took over 3.5 s, and a 4 s workload ended before the trace
	// began ("no findings", twice in a row).
	{Name: "legacy-vsyscall/threads-pid", Differs: "4 threads calling time() through the page, already running; -p for 1.5 s",
		Mode: PID, Argv: []string{"vsyscaller", "-t", "4", "-d", "30"},
		Lead: 500 * time.Millisecond, For: 1500 * time.Millisecond, Expect: emulated(doctor.Warning, "time")},
	{Name: "legacy-vsyscall/host", Differs: "gettimeofday() through the page, already running; the whole host for 1.5 s",
		Mode: Host, Argv: []string{"vsyscaller", "-c", "gettimeofday", "-d", "30"},
		Lead: 500 * time.Millisecond, For: 1500 * time.Millisecond, Expect: emulated(doctor.Warning, "gettimeofday")},
	{Name: "legacy-vsyscall/read-in-thread", Differs: "the last of 3 threads reads the page, in each of 2 child processes; the parent lives",
		Mode: Cmd, Argv: []string{"vsyscaller", "-c", "read", "-p", "2", "-t", "3"},
		Expect: Expect{IDs: []doctor.ID{doctor.LegacyVsyscall}, Severity: doctor.Critical, Words: []string{"died", "vsyscall"}}},
}

func emulated(sev doctor.Severity, call string) Expect {
	return Expect{IDs: []doctor.ID{doctor.LegacyVsyscall}, Severity: sev, Words: []string{call, "emulate"}}
}
