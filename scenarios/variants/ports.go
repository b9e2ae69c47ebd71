package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var portVariants = []Variant{
	// port-range-exhausted: connect's EADDRNOTAVAIL with every port of the
	// range in TIME_WAIT. portexhaust runs in a network namespace of its
	// own with a narrow range, so nothing global changes; these vary the
	// clients, the range and how sysray is pointed at it.
	{Name: "port-range-exhausted/timewait", Differs: "one client closing first, 64 ports, retries every 10 ms for 1 s",
		Mode: Cmd, Argv: []string{"portexhaust", "-d", "1"},
		Expect: portWarns("EADDRNOTAVAIL", "10.200.0.1:8080", "TIME_WAIT", "range of 64 ports")},
	{Name: "port-range-exhausted/4-clients", Differs: "4 client threads, 128 ports",
		Mode: Cmd, Argv: []string{"portexhaust", "-c", "4", "-n", "128", "-d", "1"},
		Expect: portWarns("EADDRNOTAVAIL", "TIME_WAIT", "range of 128 ports")},
	{Name: "port-range-exhausted/loopback", Differs: "a server on 127.0.0.1, 16 ports, 3 s: tcp_tw_reuse=2 reuses TIME_WAIT ports towards loopback after a second, so refusals mix with connects",
		Mode: Cmd, Argv: []string{"portexhaust", "-l", "-n", "16", "-d", "3"},
		Expect: portWarns("EADDRNOTAVAIL", "127.0.0.1:8080", "range of 16 ports")},
	{Name: "port-range-exhausted/pid", Differs: "refused before sysray starts; its namespace read from outside; -p for 1.5 s",
		Mode: PID, Argv: []string{"portexhaust", "-d", "30"},
		Lead: time.Second, For: 1500 * time.Millisecond,
		Expect: portWarns("EADDRNOTAVAIL", "TIME_WAIT", "range of 64 ports")},
	{Name: "port-range-exhausted/host", Differs: "refused before sysray starts; the whole host for 1.5 s",
		Mode: Host, Argv: []string{"portexhaust", "-d", "30"},
		Lead: time.Second, For: 1500 * time.Millisecond,
		Expect: portWarns("EADDRNOTAVAIL", "TIME_WAIT", "range of 64 ports")},
	// The container's own network namespace holds the narrow range and
	// the TIME_WAIT sockets: the finding must give its numbers, not the
	// host's (a range of 28,232 ports, and none of the container's
	// sockets).
	{Name: "port-range-exhausted/container", Differs: "in a container's own network namespace (containerd, runc; privileged only to set its namespace's range to 64 ports and lo's address); -p its pid for 1.5 s",
		Mode: PID, Container: &Container{Privileged: true},
		Argv: []string{"/bin/sh", "-c", "ip link set lo up && ip addr add 10.200.0.1/32 dev lo && " +
			"echo '40000 40063' >/proc/sys/net/ipv4/ip_local_port_range && exec {bin}/portexhaust -k -d 30"},
		Lead: 1500 * time.Millisecond, For: 1500 * time.Millisecond,
		Expect: portWarns("EADDRNOTAVAIL", "10.200.0.1:8080", "not the host's", "TIME_WAIT", "range of 64 ports (40000–40063")},
}

func portWarns(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.PortRangeExhausted}, Severity: doctor.Warning, Words: words}
}
