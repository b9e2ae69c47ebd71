package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var resolverVariants = []Variant{
	// dns-timeout: lookups whose name server never answers, each waiting
	// out the resolver's timeout in poll. The program makes its own
	// network and mount namespaces (the server is a socket of its own on
	// 127.0.0.153:53, its resolv.conf a bind mount there). These change
	// what the mechanism does not care about: the call that looks the
	// name up, the queries per wait, processes, how sysray is pointed at
	// it, a container; and the cousins that must stay silent.
	{Name: "dns-timeout/getaddrinfo", Differs: "one process, 4 getaddrinfo(AF_INET) lookups, timeout:1 attempts:1: one A query and one 1 s wait each",
		Mode: Cmd, Argv: []string{"resolver", "-n", "4"}, Expect: dnsWarns("127.0.0.153", "4 DNS queries", "timeout:1")},
	{Name: "dns-timeout/gethostbyname-attempts", Differs: "gethostbyname, attempts:2: two waits a lookup, each query sent with send",
		Mode: Cmd, Argv: []string{"resolver", "-n", "2", "-c", "gethostbyname", "-a", "2"}, Expect: dnsWarns("127.0.0.153", "4 DNS queries", "attempts:2")},
	{Name: "dns-timeout/unspec-single-request", Differs: "getaddrinfo(AF_UNSPEC) with single-request: the A query first, alone; unanswered, the lookup fails without the AAAA one",
		Mode: Cmd, Argv: []string{"resolver", "-n", "3", "-c", "unspec", "-o", "single-request"}, Expect: dnsWarns("127.0.0.153", "3 DNS queries", "single-request")},
	{Name: "dns-timeout/unspec-4-procs", Differs: "4 processes, getaddrinfo(AF_UNSPEC): A and AAAA sent together with sendmmsg, one wait",
		Mode: Cmd, Argv: []string{"resolver", "-p", "4", "-n", "2", "-c", "unspec"}, Expect: dnsWarns("4 processes", "8 DNS queries", "sendmmsg")},
	{Name: "dns-timeout/container", Differs: "in a cgroup of its own (cgrun, as a container runtime), 3 lookups",
		Mode: Cmd, Argv: []string{"cgrun", "-p", "64", "--", "resolver", "-n", "3"}, Expect: dnsWarns("127.0.0.153", "3 DNS queries")},
	{Name: "dns-timeout/pid", Differs: "the service looking names up before sysray starts, one a second; -p for 3 s",
		Mode: PID, Argv: []string{"resolver", "-n", "0", "-d", "30"},
		Lead: time.Second, For: 3 * time.Second, Expect: dnsWarns("127.0.0.153", "DNS queries")},
	{Name: "dns-timeout/host", Differs: "2 processes looking names up before sysray starts; the whole host for 3 s",
		Mode: Host, Argv: []string{"resolver", "-p", "2", "-n", "0", "-d", "8"},
		Lead: time.Second, For: 3 * time.Second, Expect: dnsWarns("127.0.0.153", "2 processes")},
	{Name: "dns-timeout/answered", Differs: "benign: a responder that answers at once, 200 lookups",
		Mode: Cmd, Argv: []string{"resolver", "-n", "200", "-m", "answer"}, Expect: dnsSilent()},
	{Name: "dns-timeout/slow-answer", Differs: "benign: a responder that answers after 300 ms (a slow server, not a silent one)",
		Mode: Cmd, Argv: []string{"resolver", "-n", "5", "-m", "answer", "-s", "300"}, Expect: dnsSilent()},
	{Name: "dns-timeout/nxdomain", Differs: "benign: every name answered \"no such name\" at once, 200 lookups (an NXDOMAIN storm)",
		Mode: Cmd, Argv: []string{"resolver", "-n", "200", "-m", "nxdomain", "-c", "unspec"}, Expect: dnsSilent()},
	{Name: "dns-timeout/refused", Differs: "benign here: nothing listens on port 53, the lookups fail at once with ECONNREFUSED",
		Mode: Cmd, Argv: []string{"resolver", "-n", "50", "-m", "refused"}, Expect: dnsSilent()},
	{Name: "dns-timeout/heartbeat", Differs: "benign: one answered lookup, then polls with a 1 s timeout on a UDP socket bound to port 7777 that nothing sends to",
		Mode: Cmd, Argv: []string{"resolver", "-n", "3", "-m", "listen"}, Expect: dnsSilent()},
	{Name: "dns-timeout/idle-after-lookup", Differs: "benign: one answered lookup, then polls on a pipe with a 1 s timeout, resolv.conf's own wait (an idle event loop)",
		Mode: Cmd, Argv: []string{"resolver", "-n", "3", "-m", "idle"}, Expect: dnsSilent()},
	{Name: "dns-timeout/use-vc", Differs: "glibc over TCP (options use-vc): a listener on 127.0.0.153:53 accepts and never answers, closing after 1 s; glibc reads with no timeout and connects again once after the reset: 2 reads a lookup",
		Mode: Cmd, Argv: []string{"resolver", "-n", "2", "-m", "tcp-blackhole", "-o", "use-vc"}, Expect: dnsWarns("4 DNS queries over TCP", "127.0.0.153", "use-vc", "svc-0-0.sysray.test (2 A)")},
	{Name: "dns-timeout/search-ndots", Differs: "search corp.test svc.test with ndots:5: each name is tried with the first search domain, then as is; 2 waits a lookup",
		Mode: Cmd, Argv: []string{"resolver", "-n", "2", "-S", "corp.test svc.test", "-o", "ndots:5"}, Expect: dnsWarns("4 DNS queries", "Search list corp.test svc.test, ndots:5", ".sysray.test")},
	{Name: "dns-timeout/tcp-answer", Differs: "benign: glibc over TCP (use-vc), a responder that answers each query after 300 ms",
		Mode: Cmd, Argv: []string{"resolver", "-n", "4", "-m", "tcp-answer", "-o", "use-vc", "-s", "300"}, Expect: dnsSilent()},
	// musl's resolver (the same program built with musl-gcc, static): a
	// socket bound to port 0, each query sent with sendto naming the
	// server, A and AAAA one after the other, then its own poll rounds.
	{Name: "dns-timeout/musl", Differs: "musl's resolver (static musl build), one process, 4 getaddrinfo(AF_INET) lookups: sendto on an unconnected socket, one 1 s poll each",
		Mode: Cmd, Argv: []string{"resolver-musl", "-n", "4"}, Expect: dnsWarns("127.0.0.153", "4 DNS queries", "sendto")},
	{Name: "dns-timeout/musl-4-procs", Differs: "musl's resolver, 4 processes, AF_UNSPEC: A and AAAA with two sendto calls, one wait",
		Mode: Cmd, Argv: []string{"resolver-musl", "-p", "4", "-n", "2", "-c", "unspec"}, Expect: dnsWarns("4 processes", "8 DNS queries", "sendto")},
	// Go's own resolver (CGO_ENABLED=0): A and AAAA on two connected
	// non-blocking sockets in parallel goroutines, written with write,
	// read at once (EAGAIN), waited for in the runtime's netpoller
	// (epoll_pwait on any thread), closed at the deadline.
	{Name: "dns-timeout/go", Differs: "Go's pure-Go resolver, one process, 3 LookupHost: A and AAAA each on its own non-blocking socket, the wait in the netpoller, not a poll of the socket",
		Mode: Cmd, Argv: []string{"resolver", "-x", "goresolve", "-n", "3", "-c", "unspec"}, Expect: dnsWarns("127.0.0.153", "6 DNS queries", "netpoller")},
	{Name: "dns-timeout/go-pid", Differs: "Go's resolver looking names up before sysray starts (its connects unseen); -p for 3 s",
		Mode: PID, Argv: []string{"resolver", "-x", "goresolve", "-n", "0", "-d", "8", "-c", "unspec"},
		Lead: time.Second, For: 3 * time.Second, Expect: dnsWarns("127.0.0.153", "netpoller")},
	{Name: "dns-timeout/go-container", Differs: "Go's resolver in a cgroup of its own (cgrun), 2 processes, A only (LookupIP ip4), attempts:2",
		Mode: Cmd, Argv: []string{"cgrun", "-p", "64", "--", "resolver", "-x", "goresolve", "-p", "2", "-n", "2", "-a", "2"}, Expect: dnsWarns("2 processes", "8 DNS queries", "netpoller")},
	// In a real container (containerd and runc, a busybox root without
	// glibc): the static builds; privileged, as the workload makes its
	// own network and mount namespaces inside the container's.
	{Name: "dns-timeout/musl-containerd", Differs: "musl's resolver in a containerd container, looking names up before sysray starts, one a second; traced by --container for 4 s",
		Mode: InContainer, Container: &Container{Privileged: true}, Argv: []string{"resolver-musl", "-n", "0", "-d", "30"},
		Lead: time.Second, For: 4 * time.Second, Expect: dnsWarns("127.0.0.153", "DNS queries", "sendto")},
	{Name: "dns-timeout/go-containerd", Differs: "Go's resolver in a containerd container, A and AAAA, begun before sysray starts; -p on the container's first process for 4 s",
		Mode: PID, Container: &Container{Privileged: true}, Argv: []string{"resolver-musl", "-x", "{bin}/goresolve", "-n", "0", "-d", "30", "-c", "unspec"},
		Lead: time.Second, For: 4 * time.Second, Expect: dnsWarns("127.0.0.153", "netpoller")},
	{Name: "dns-timeout/go-answered", Differs: "benign: Go's resolver, a responder that answers at once, 100 lookups",
		Mode: Cmd, Argv: []string{"resolver", "-x", "goresolve", "-n", "100", "-m", "answer", "-c", "unspec"}, Expect: dnsSilent()},
	{Name: "dns-timeout/go-slow-answer", Differs: "benign: Go's resolver, a responder that answers after 300 ms, 5 lookups",
		Mode: Cmd, Argv: []string{"resolver", "-x", "goresolve", "-n", "5", "-m", "answer", "-s", "300", "-c", "unspec"}, Expect: dnsSilent()},
	{Name: "dns-timeout/go-answered-each-second", Differs: "benign: Go's resolver, answered at once, one lookup a second: the next lookup's timer ends a whole second after each answered query",
		Mode: Cmd, Argv: []string{"resolver", "-x", "goresolve", "-n", "4", "-m", "answer", "-i", "1000", "-c", "unspec"}, Expect: dnsSilent()},
	{Name: "dns-timeout/go-tcp", Differs: "Go's resolver over TCP (options use-vc): a non-blocking connect, the query written after its length, read at once (EAGAIN), closed when the listener gives up after 1 s; A and AAAA",
		Mode: Cmd, Argv: []string{"resolver", "-x", "goresolve", "-n", "2", "-m", "tcp-blackhole", "-o", "use-vc", "-c", "unspec"},
		Expect: dnsWarns("127.0.0.153", "over TCP", "netpoller", "svc-0-0.sysray.test (1 A")},
	{Name: "dns-timeout/go-tcp-answer", Differs: "benign: Go's resolver over TCP (use-vc), a responder that answers each query after 300 ms",
		Mode: Cmd, Argv: []string{"resolver", "-x", "goresolve", "-n", "4", "-m", "tcp-answer", "-o", "use-vc", "-s", "300", "-c", "unspec"}, Expect: dnsSilent()},
	{Name: "dns-timeout/musl-answered", Differs: "benign: musl's resolver, a responder that answers after 300 ms, 5 lookups",
		Mode: Cmd, Argv: []string{"resolver-musl", "-n", "5", "-m", "answer", "-s", "300", "-c", "unspec"}, Expect: dnsSilent()},
}

func dnsWarns(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.DNSTimeout}, Severity: doctor.Warning, Words: words}
}

func dnsSilent() Expect {
	return Expect{IDs: []doctor.ID{doctor.DNSTimeout}, Silent: true}
}
