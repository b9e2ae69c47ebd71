package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var addrInUseVariants = []Variant{
	// port-in-use: bind or listen refused with EADDRINUSE on an explicit
	// port. addrinuse runs in a network namespace of its own, so the
	// answer (who holds the port) is only in that namespace's tables; these
	// vary the holder, the syscall refused and how sysray is pointed at it.
	{Name: "port-in-use/listener", Differs: "another process listens on 127.0.0.1:8080; bind refused 6 times, 100 ms apart, then exit 1",
		Mode: Cmd, Argv: []string{"addrinuse", "-b", "100"},
		Expect: inUseWarns("127.0.0.1:8080", "not the host's", "LISTEN by addrinuse-hold[", "gave up", "exit status 1")},
	{Name: "port-in-use/timewait", Differs: "the server's previous run closed 16 connections first and exited; the restart binds without SO_REUSEADDR",
		Mode: Cmd, Argv: []string{"addrinuse", "-m", "timewait", "-b", "100"},
		Expect: inUseWarns("127.0.0.1:8080", "16 of them in TIME_WAIT", "without SO_REUSEADDR", "gave up")},
	{Name: "port-in-use/listen", Differs: "both bind the port with SO_REUSEADDR; the other listens first, so listen is what is refused",
		Mode: Cmd, Argv: []string{"addrinuse", "-m", "listen", "-b", "100"},
		Expect: inUseWarns("listen on 127.0.0.1:8080", "LISTEN by addrinuse-hold[", "gave up")},
	{Name: "port-in-use/pid", Differs: "refused before sysray starts (retrying every 100 ms, up to 30 s); -p --children for 1.5 s",
		Mode: PID, Argv: []string{"addrinuse", "-r", "300", "-b", "100"},
		Lead: time.Second, For: 1500 * time.Millisecond,
		Expect: inUseWarns("127.0.0.1:8080", "not the host's", "LISTEN by addrinuse-hold[", "kept retrying")},
	{Name: "port-in-use/host", Differs: "the TIME_WAIT restart retrying before sysray starts; the whole host for 1.5 s",
		Mode: Host, Argv: []string{"addrinuse", "-m", "timewait", "-r", "300", "-b", "100"},
		Lead: time.Second, For: 1500 * time.Millisecond,
		Expect: inUseWarns("127.0.0.1:8080", "not the host's", "in TIME_WAIT", "without SO_REUSEADDR", "kept retrying")},
	{Name: "port-in-use/container", Differs: "refused in a container (containerd, runc; privileged only to make the scenario's own network namespace) before sysray starts; -p its pid --children for 1.5 s",
		Mode: PID, Container: &Container{Privileged: true}, Argv: []string{"addrinuse", "-r", "300", "-b", "100"},
		Lead: 1500 * time.Millisecond, For: 1500 * time.Millisecond,
		Expect: inUseWarns("127.0.0.1:8080", "not the host's", "LISTEN by addrinuse-hold[", "kept retrying")},
	{Name: "port-in-use/probe", Differs: "benign: the port tried once, the next one bound and served for 1 s, exit 0",
		Mode: Cmd, Argv: []string{"addrinuse", "-m", "probe"},
		Expect: Expect{IDs: []doctor.ID{doctor.PortInUse}, Below: doctor.Warning}},
}

func inUseWarns(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.PortInUse}, Severity: doctor.Warning, Words: words}
}
