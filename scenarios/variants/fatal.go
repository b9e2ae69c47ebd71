package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var fatalVariants = []Variant{
	// fatal-signal: a process killed by the signal its own bad access or
	// instruction raised. The tests have a child writing to address 0x10
	// (SIGSEGV in the NULL page) and stack overflows on the main thread and
	// on a thread; the vsyscall demo reads the vsyscall page.
	{Name: "fatal-signal/sigbus-truncated", Differs: "SIGBUS: a read of a shared file mapping past the end of the file, truncated after mmap",
		Mode: Cmd, Argv: []string{"crasher", "-k", "sigbus"}, Expect: killed("SIGBUS", "file")},
	{Name: "fatal-signal/unmapped-8-procs", Differs: "8 processes each read a 1 MiB block after free() unmapped it",
		Mode: Cmd, Argv: []string{"crasher", "-k", "segv-unmapped", "-p", "8"}, Expect: killed("SIGSEGV", "unmapped")},
	{Name: "fatal-signal/read-only-thread", Differs: "the last of 3 threads writes to a read-only file mapping it never read (SEGV_ACCERR on a page not present)",
		Mode: Cmd, Argv: []string{"crasher", "-k", "segv-ro", "-t", "3"}, Expect: killed("SIGSEGV", "read-only")},
	{Name: "fatal-signal/sigfpe-thread", Differs: "SIGFPE: the last of 3 threads divides by zero; no page fault at all",
		Mode: Cmd, Argv: []string{"crasher", "-k", "sigfpe", "-t", "3"}, Expect: killed("SIGFPE", "by zero")},
	// The crash comes 8 s after the program starts. Sysray starts 0.5 s
	// in and attaches in 0.5-1 s on a quiet host, up to 6 s on a loaded
	// one: the trace (10 s) covers 8 s for any attach in that range. A
	// trace of 6 s ended before the crash once the doctor attached in 1 s.
	{Name: "fatal-signal/pid", Differs: "already running; reads a freed block 8 s after it started; -p for 10 s",
		Mode: PID, Argv: []string{"crasher", "-k", "segv-unmapped", "-w", "8"},
		Lead: 500 * time.Millisecond, For: 10 * time.Second, Expect: killed("SIGSEGV", "unmapped")},
	{Name: "fatal-signal/sigill-host", Differs: "SIGILL (ud2) in a child restarted every 200 ms by a supervisor already running; the whole host for 1.5 s",
		Mode: Host, Argv: []string{"crasher", "-k", "sigill", "-r", "200", "-d", "8"},
		Lead: 500 * time.Millisecond, For: 1500 * time.Millisecond, Expect: killed("SIGILL", "illegal")},
}

func killed(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.FatalSignal}, Severity: doctor.Critical, Words: words}
}
