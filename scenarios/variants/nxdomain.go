package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

// The search list every expanding variant uses, and the ndots that makes
// the resolver try it before a name of two dots as written.
var nxSearch = []string{"-m", "search", "-S", "corp.test svc.test", "-o", "ndots:5", "-N", "api.sysray.test", "-c", "unspec"}

func nxArgs(head []string, tail ...string) []string {
	return append(append(append([]string{}, head...), nxSearch...), tail...)
}

var nxdomainVariants = []Variant{
	// dns-nxdomain: lookups answered "no such name". The resolver program
	// makes its own network and mount namespaces; its responder answers
	// names in sysray.test and "no such name" to any other, so a name
	// with a search domain after it fails. These change what the
	// mechanism does not care about: the resolver (glibc, musl, Go), UDP
	// or TCP, processes, how sysray is pointed at the program, whether
	// the lookups began before sysray, a cgroup; and the cousins that
	// must stay under a warning: a name written with a trailing dot, an
	// ndots the names reach, a short name found at its first search
	// domain, a one-off lookup, names that fail once each.
	{Name: "dns-nxdomain/glibc", Differs: "glibc, getaddrinfo(AF_UNSPEC) of api.sysray.test 20 times under search corp.test svc.test, ndots:5: A and AAAA at each search domain, then as written",
		Mode: Cmd, Argv: nxArgs([]string{"resolver", "-n", "20"}), Expect: nxWarns("api.sysray.test", "20 lookups", "corp.test svc.test")},
	{Name: "dns-nxdomain/musl", Differs: "musl's resolver (static), the same lookups: sendto on an unconnected socket, recvfrom",
		Mode: Cmd, Argv: nxArgs([]string{"resolver-musl", "-n", "20"}), Expect: nxWarns("api.sysray.test", "20 lookups")},
	{Name: "dns-nxdomain/go", Differs: "Go's own resolver (CGO_ENABLED=0): A and AAAA in two goroutines, each on a connected socket of its own, write and read",
		Mode: Cmd, Argv: nxArgs([]string{"resolver", "-x", "goresolve", "-n", "20"}), Expect: nxWarns("api.sysray.test", "20 lookups")},
	{Name: "dns-nxdomain/tcp", Differs: "glibc over TCP (options use-vc): the query after its length with writev, the answer read after its length",
		Mode: Cmd, Argv: []string{"resolver", "-n", "10", "-m", "tcp-search", "-S", "corp.test svc.test", "-o", "use-vc ndots:5", "-N", "api.sysray.test", "-c", "unspec"},
		Expect: nxWarns("api.sysray.test", "10 lookups")},
	{Name: "dns-nxdomain/4-procs", Differs: "4 processes, 10 lookups each",
		Mode: Cmd, Argv: nxArgs([]string{"resolver", "-p", "4", "-n", "10"}), Expect: nxWarns("4 processes", "40 lookups")},
	{Name: "dns-nxdomain/container", Differs: "in a cgroup of its own (cgrun, as a container runtime)",
		Mode: Cmd, Argv: nxArgs([]string{"cgrun", "-p", "64", "--", "resolver", "-n", "10"}), Expect: nxWarns("api.sysray.test", "10 lookups")},
	{Name: "dns-nxdomain/pid", Differs: "a service looking the name up every 100 ms before sysray starts; -p for 3 s: its resolv.conf read live",
		Mode: PID, Argv: nxArgs([]string{"resolver", "-n", "0", "-d", "30", "-i", "100"}),
		Lead: time.Second, For: 3 * time.Second, Expect: nxWarns("api.sysray.test", "Search list corp.test svc.test, ndots:5")},
	{Name: "dns-nxdomain/host", Differs: "2 processes of Go's resolver, every 100 ms, begun before sysray; the whole host for 3 s",
		Mode: Host, Argv: nxArgs([]string{"resolver", "-x", "goresolve", "-p", "2", "-n", "0", "-d", "30", "-i", "100"}),
		Lead: time.Second, For: 3 * time.Second, Expect: nxWarns("api.sysray.test", "2 processes")},
	// In a real container (containerd and runc, a busybox root without
	// glibc): the static musl build, privileged, as the workload makes
	// its own namespaces inside the container's. Its resolv.conf is read
	// through the container's root, where the program bind-mounted it.
	{Name: "dns-nxdomain/musl-containerd", Differs: "musl's resolver in a containerd container, looking the name up every 100 ms before sysray starts; traced by --container for 4 s",
		Mode: InContainer, Container: &Container{Privileged: true}, Argv: nxArgs([]string{"resolver-musl", "-n", "0", "-d", "30", "-i", "100"}),
		Lead: time.Second, For: 4 * time.Second, Expect: nxWarns("api.sysray.test", "Search list corp.test svc.test, ndots:5")},
	{Name: "dns-nxdomain/missing-name", Differs: "a name that does not exist, looked up 20 times (a configuration naming a host that is gone): every name tried is answered \"no such name\"",
		Mode: Cmd, Argv: []string{"resolver", "-n", "20", "-m", "nxdomain", "-N", "gone.sysray.test", "-c", "unspec"}, Expect: nxWarns("gone.sysray.test", "20 failed lookups")},
	{Name: "dns-nxdomain/trailing-dot", Differs: "benign: the same lookups with the name written fully qualified (api.sysray.test.): the search list is skipped",
		Mode: Cmd, Argv: []string{"resolver", "-n", "20", "-m", "search", "-S", "corp.test svc.test", "-o", "ndots:5", "-N", "api.sysray.test.", "-c", "unspec"}, Expect: nxSilent()},
	{Name: "dns-nxdomain/ndots-reached", Differs: "benign: the same search list with ndots:2, which the name's two dots reach: asked for as written first, and found",
		Mode: Cmd, Argv: []string{"resolver", "-n", "20", "-m", "search", "-S", "corp.test svc.test", "-o", "ndots:2", "-N", "api.sysray.test", "-c", "unspec"}, Expect: nxSilent()},
	{Name: "dns-nxdomain/short-name", Differs: "benign: a short name (api) found at the first search domain (search sysray.test corp.test): the search list doing its job",
		Mode: Cmd, Argv: []string{"resolver", "-n", "20", "-m", "search", "-S", "sysray.test corp.test", "-N", "api", "-c", "unspec"}, Expect: nxSilent()},
	{Name: "dns-nxdomain/once", Differs: "benign: one lookup expanded through the search list (a program resolving its configuration at start)",
		Mode: Cmd, Argv: nxArgs([]string{"resolver", "-n", "1"}), Expect: nxBelow()},
	{Name: "dns-nxdomain/distinct-names", Differs: "benign: 200 names, each looked up once and answered \"no such name\" (a crawler, a check of candidate names)",
		Mode: Cmd, Argv: []string{"resolver", "-n", "200", "-m", "nxdomain", "-c", "unspec"}, Expect: nxBelow()},
	{Name: "dns-nxdomain/answered", Differs: "benign: every name answered at once, 200 lookups",
		Mode: Cmd, Argv: []string{"resolver", "-n", "200", "-m", "answer"}, Expect: nxSilent()},
}

func nxWarns(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.DNSNXDomain}, Severity: doctor.Warning, Words: words}
}

func nxSilent() Expect {
	return Expect{IDs: []doctor.ID{doctor.DNSNXDomain}, Silent: true}
}

func nxBelow() Expect {
	return Expect{IDs: []doctor.ID{doctor.DNSNXDomain}, Below: doctor.Warning}
}
