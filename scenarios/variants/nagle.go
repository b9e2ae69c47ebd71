package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var nagleVariants = []Variant{
	// nagle-delayed-ack: a client writes each request in two small writes
	// without TCP_NODELAY and the server acknowledges the first only when
	// its delayed-ACK timer fires. These change what the mechanism does not
	// care about: the calls that write and read, processes, requests, how
	// sysray is pointed at it; and the cousins that must stay silent.
	{Name: "nagle-delayed-ack/write-read", Differs: "one client, 40 requests, each a 16-byte write and a 48-byte write, the reply read with read",
		Mode: Cmd, Argv: []string{"nagle", "-n", "40"}, Expect: nagleWarns("127.0.0.1", "write", "read")},
	{Name: "nagle-delayed-ack/sendto-recvfrom-4-procs", Differs: "4 client processes on their own connections, sendto and recvfrom, 25 requests each",
		Mode: Cmd, Argv: []string{"nagle", "-p", "4", "-n", "25", "-w", "sendto", "-r", "recvfrom"}, Expect: nagleWarns("4 processes", "sendto", "recvfrom")},
	{Name: "nagle-delayed-ack/writev-poll", Differs: "each part a one-element writev; the reply waited for with poll, then read",
		Mode: Cmd, Argv: []string{"nagle", "-n", "30", "-w", "writev", "-r", "poll"}, Expect: nagleWarns("writev", "poll")},
	{Name: "nagle-delayed-ack/send-recv-few", Differs: "send and recv, 8 requests: the first acknowledged at once, 7 delayed",
		Mode: Cmd, Argv: []string{"nagle", "-n", "8", "-w", "send", "-r", "recv"}, Expect: nagleWarns("send", "recv")},
	// Running before sysray, the connect is not seen: the peer is read
	// from /proc, except on a host whose full audit backlog stalls opens
	// (the doctor then reads nothing, and the finding names an unknown
	// peer), so the variants do not ask for the address.
	{Name: "nagle-delayed-ack/pid", Differs: "the client running before sysray, write and read only (its connect unseen); -p for 2 s",
		Mode: PID, Argv: []string{"nagle", "-n", "0", "-d", "10"},
		Lead: time.Second, For: 2 * time.Second, Expect: nagleWarns("delayed ACK", "write", "read")},
	{Name: "nagle-delayed-ack/host", Differs: "2 clients running before sysray, sendto and poll; the whole host for 2 s",
		Mode: Host, Argv: []string{"nagle", "-p", "2", "-n", "0", "-d", "10", "-w", "sendto", "-r", "poll"},
		Lead: time.Second, For: 2 * time.Second, Expect: nagleWarns("2 processes", "sendto", "poll")},
	{Name: "nagle-delayed-ack/nodelay", Differs: "benign: TCP_NODELAY set, the same two writes; replies in microseconds",
		Mode: Cmd, Argv: []string{"nagle", "-n", "200", "-N"}, Expect: nagleSilent()},
	{Name: "nagle-delayed-ack/one-write", Differs: "benign: each request in one write; replies in microseconds",
		Mode: Cmd, Argv: []string{"nagle", "-n", "200", "-1"}, Expect: nagleSilent()},
	{Name: "nagle-delayed-ack/slow-server", Differs: "benign: one write, a server that takes 40 ms to answer (a slow server, not a timer)",
		Mode: Cmd, Argv: []string{"nagle", "-n", "30", "-1", "-s", "40"}, Expect: nagleSilent()},
	{Name: "nagle-delayed-ack/sometimes-slow-pid", Differs: "benign: two writes, TCP_NODELAY set before sysray starts (its setsockopt unseen), a server that takes 40 ms on every 4th request; -p for 2 s",
		Mode: PID, Argv: []string{"nagle", "-n", "0", "-d", "10", "-N", "-s", "40", "-e", "4"},
		Lead: time.Second, For: 2 * time.Second, Expect: nagleSilent()},
	{Name: "nagle-delayed-ack/slow-server-nodelay", Differs: "benign: two writes with TCP_NODELAY, a server that takes 40 ms",
		Mode: Cmd, Argv: []string{"nagle", "-n", "30", "-N", "-s", "40"}, Expect: nagleSilent()},
	// The setsockopt unseen and every reply in the timer's band: only the
	// socket itself can say TCP_NODELAY is set.
	{Name: "nagle-delayed-ack/slow-server-nodelay-pid", Differs: "benign: two writes, TCP_NODELAY set before sysray starts (its setsockopt unseen), a server that takes 40 ms on every request, for 10 s; -p for 2 s",
		Mode: PID, Argv: []string{"nagle", "-n", "0", "-d", "10", "-N", "-s", "40"},
		Lead: time.Second, For: 2 * time.Second, Expect: nagleSilent()},
}

func nagleWarns(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.NagleDelayedAck}, Severity: doctor.Warning, Words: words}
}

func nagleSilent() Expect {
	return Expect{IDs: []doctor.ID{doctor.NagleDelayedAck}, Silent: true}
}
