package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var fdVariants = []Variant{
	// fd-exhaustion: calls that create a descriptor failing with EMFILE
	// (the process's RLIMIT_NOFILE reached). No demo existed; these vary
	// what the mechanism does not care about: which call hits the limit,
	// what leaked, processes and threads, and how sysray is pointed at it.
	{Name: "fd-exhaustion/openat-leak", Differs: "one process opens one log file over and over, never closing it, under a limit of 256; then fails every millisecond for 1 s",
		Mode: Cmd, Argv: []string{"fdleak", "-k", "file", "-l", "256", "-d", "1"},
		Expect: fdWarns("openat", "EMFILE", "256", "regular files")},
	{Name: "fd-exhaustion/socket-threads", Differs: "4 threads leak connected UDP sockets into their shared table (limit 512)",
		Mode: Cmd, Argv: []string{"fdleak", "-k", "socket", "-t", "4", "-l", "512", "-d", "1"},
		Expect: fdWarns("socket", "EMFILE", "512", "sockets")},
	{Name: "fd-exhaustion/pipe2-4-procs", Differs: "4 processes, each leaking pipes (pipe2 needs two descriptors) under a limit of 128",
		Mode: Cmd, Argv: []string{"fdleak", "-k", "pipe", "-p", "4", "-l", "128", "-d", "1"},
		Expect: fdWarns("4 processes", "pipe2", "EMFILE", "pipes")},
	{Name: "fd-exhaustion/accept-loop", Differs: "a server on 127.0.0.1 that never closes what it accepts (CLOSE_WAIT); at its limit, accept4 fails while epoll reports the listener readable",
		Mode: Cmd, Argv: []string{"fdleak", "-k", "accept", "-l", "128", "-d", "2"},
		Expect: fdLoop()},
	{Name: "fd-exhaustion/accept-loop-pid", Differs: "the same server spinning before sysray starts; -p for 1.5 s",
		Mode: PID, Argv: []string{"fdleak", "-k", "accept", "-l", "128", "-d", "9"},
		Lead: time.Second, For: 1500 * time.Millisecond, Expect: fdLoop()},
	{Name: "fd-exhaustion/openat-host", Differs: "2 processes at their limit (soft 200 below a hard 4096) before sysray starts, retrying every 10 ms; the whole host for 1.5 s",
		Mode: Host, Argv: []string{"fdleak", "-k", "file", "-p", "2", "-l", "200", "-H", "4096", "-i", "10000", "-d", "9"},
		Lead: time.Second, For: 1500 * time.Millisecond, Expect: fdWarns("openat", "EMFILE", "could raise the soft limit")},
	{Name: "fd-exhaustion/container", Differs: "2 processes at their limit (soft 200 below the container's hard 1024) in a container (containerd, runc) before sysray starts; -p its pid --children for 1.5 s",
		Mode: PID, Container: &Container{}, Argv: []string{"fdleak", "-k", "file", "-p", "2", "-l", "200", "-H", "1024", "-i", "10000", "-d", "30"},
		Lead: 1500 * time.Millisecond, For: 1500 * time.Millisecond, Expect: fdWarns("openat", "EMFILE", "could raise the soft limit")},
}

func fdWarns(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.FDExhaustion}, Severity: doctor.Warning, Words: words}
}

func fdLoop() Expect {
	return Expect{IDs: []doctor.ID{doctor.FDExhaustion}, Severity: doctor.Critical, Words: []string{"busy accept loop", "accept4", "EMFILE"}}
}
