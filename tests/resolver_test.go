package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/dns"
	"github.com/sysray/sysray/internal/event"
)

// resolverTruth reads what the resolver scenario printed: how many
// lookups it made and the milliseconds each took.
func resolverTruth(t *testing.T, out string) (lookups int, totalMS float64) {
	t.Helper()
	m := regexp.MustCompile(`RESULT procs=\d+ lookups=(\d+) failed=(\d+) total_ms=([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no RESULT line from the scenario:\n%s", out)
	}
	lookups, _ = strconv.Atoi(m[1])
	if m[2] != m[1] {
		t.Fatalf("%s of %s lookups failed; against a silent server all must", m[2], m[1])
	}
	totalMS, _ = strconv.ParseFloat(m[3], 64)
	return lookups, totalMS
}

// resolverNames reads the names the scenario looked up, from its
// "lookup PID I NAME: ..." lines.
func resolverNames(out string) map[string]bool {
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^lookup \d+ \d+ (\S+): `).FindAllStringSubmatch(out, -1) {
		names[m[1]] = true
	}
	return names
}

// checkNames compares the finding's names with the ones the scenario
// looked up: each named one is one of them, asked as an A query (and as
// AAAA with it, when aaaa: getaddrinfo AF_UNSPEC sends both in one
// sendmmsg), and with all the sends seen (all: a recording) every one of
// them is named.
func checkNames(t *testing.T, f *finding, asked map[string]bool, all, aaaa bool) {
	t.Helper()
	list, _ := f.Evidence["names"].([]any)
	if len(list) == 0 {
		t.Fatalf("no names in the finding; the scenario asked %v", asked)
	}
	got := map[string]bool{}
	for _, e := range list {
		m, _ := e.(map[string]any)
		n, _ := m["name"].(string)
		types, _ := m["types"].(map[string]any)
		if !asked[n] || types["A"] != 1.0 || aaaa != (types["AAAA"] == 1.0) {
			t.Errorf("name %v: not one the scenario asked once as A (AAAA too: %v) (%v)", m, aaaa, asked)
		}
		got[n] = true
	}
	if all && len(got) != len(asked) {
		t.Errorf("names %v, want all the scenario asked: %v", got, asked)
	}
}

// checkResolver compares the finding with the scenario's own account:
// with `timeout:1 attempts:1` and one A query a lookup, each lookup is one
// timed-out wait, about the second the resolver asked poll for (the kernel
// never ends a poll's timeout early; glibc asks for what is left of the
// second when it polls, a few ms less at most), and the waits are within the
// lookups' time. How much of a lookup the calls around its wait take
// depends on the host's load, not on the finding: a loaded run spent 6.5
// ms a lookup there.
func checkResolver(t *testing.T, rep doctorReport, lookups int, totalMS float64) {
	t.Helper()
	var f *finding
	for i := range rep.Findings {
		if rep.Findings[i].ID == "dns-timeout" {
			f = &rep.Findings[i]
		}
	}
	if f == nil {
		t.Fatalf("no dns-timeout:\n%s", titles(rep))
	}
	if f.Severity != "warning" {
		t.Errorf("severity %s, want warning", f.Severity)
	}
	has(t, *f, "server", "timed_out_waits", "waited_ns", "median_wait_ns", "wait_calls")
	if f.Evidence["server"] != "127.0.0.153" {
		t.Errorf("server %v, want the scenario's 127.0.0.153", f.Evidence["server"])
	}
	if n, _ := f.Evidence["timed_out_waits"].(float64); int(n) != lookups {
		t.Errorf("%v timed-out waits, want the scenario's %d lookups", f.Evidence["timed_out_waits"], lookups)
	}
	waited, _ := f.Evidence["waited_ns"].(float64)
	if ms := waited / 1e6; ms > totalMS || ms < 990*float64(lookups) {
		t.Errorf("waits %.1f ms against the lookups' %.1f ms: want at least 1 s a lookup, and no more than the lookups took", ms, totalMS)
	}
}

// The resolver demo: 4 lookups against a name server that never answers,
// each waiting out `timeout:1`; live, and again from a capture.
func TestStoryResolver(t *testing.T) {
	requireBPF(t)
	bin := scenarioBin(t, "resolver")
	dir := t.TempDir()
	out := filepath.Join(dir, "report.json")
	r := run(t, "doctor", "--json", "-o", out, "--", bin, "-n", "4")
	lookups, totalMS := resolverTruth(t, r.stdout)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep doctorReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	checkResolver(t, rep, lookups, totalMS)
	for _, f := range rep.Findings {
		if f.ID == "dns-timeout" {
			// live, the sends cross over only as a sample: some names
			checkNames(t, &f, resolverNames(r.stdout), false, false)
			rc, _ := f.Evidence["resolv_conf"].(map[string]any)
			if rc["options"] != "timeout:1 attempts:1" {
				t.Errorf("resolv_conf %v, want the process's own (its mount namespace's) timeout:1 attempts:1", f.Evidence["resolv_conf"])
			}
		}
	}

	capture := filepath.Join(dir, "resolver.sysray")
	r = run(t, "record", "--stacks", "-w", capture, "--", bin, "-n", "3", "-c", "unspec")
	lookups, totalMS = resolverTruth(t, r.stdout)
	asked := resolverNames(r.stdout)
	r = run(t, "doctor", "--json", "-r", capture)
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor -r: %v\n%s", err, r.stdout)
	}
	checkResolver(t, rep, lookups, totalMS)
	for _, f := range rep.Findings {
		if f.ID == "dns-timeout" {
			// a recording sees every send: every name
			checkNames(t, &f, asked, true, true)
		}
	}
}

// Go's own resolver (goresolve, CGO_ENABLED=0) against the silent
// server: each LookupIP("ip4") is one A query on a non-blocking socket,
// read at once (EAGAIN) and closed at its deadline with no answer. The
// finding counts one query a lookup and their time against the
// program's own, live and from a recording, which also names every one.
func TestStoryResolverGo(t *testing.T) {
	requireBPF(t)
	bin := scenarioBin(t, "resolver", "goresolve")
	dir := t.TempDir()
	out := filepath.Join(dir, "report.json")
	r := run(t, "doctor", "--json", "-o", out, "--", bin, "-x", "goresolve", "-n", "3")
	// the Go worker's RESULT line comes first, the parent's after it
	lookups, totalMS := resolverTruth(t, r.stdout)
	if lookups != 3 {
		t.Fatalf("%d lookups, want 3:\n%s", lookups, r.stdout)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep doctorReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	checkResolver(t, rep, lookups, totalMS)
	for _, f := range rep.Findings {
		if f.ID == "dns-timeout" && f.Evidence["nonblocking_queries_unanswered"] != float64(lookups) {
			t.Errorf("nonblocking_queries_unanswered %v, want %d", f.Evidence["nonblocking_queries_unanswered"], lookups)
		}
	}

	capture := filepath.Join(dir, "goresolve.sysray")
	r = run(t, "record", "-w", capture, "--", bin, "-x", "goresolve", "-n", "2")
	lookups, totalMS = resolverTruth(t, r.stdout)
	asked := resolverNames(r.stdout)
	r = run(t, "doctor", "--json", "-r", capture)
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor -r: %v\n%s", err, r.stdout)
	}
	checkResolver(t, rep, lookups, totalMS)
	for _, f := range rep.Findings {
		if f.ID == "dns-timeout" {
			// a recording sees every write: every name
			checkNames(t, &f, asked, true, false)
		}
	}
}

// The resolver's benign cousins warn of nothing, from any detector: a
// server that answers (at once, slowly, with NXDOMAIN) and a listener
// whose poll times out by design on a UDP port that is not DNS.
func TestBenignResolvers(t *testing.T) {
	requireBPF(t)
	bin := scenarioBin(t, "resolver")
	for name, args := range map[string][]string{
		"answered":    {"-n", "200", "-m", "answer"},
		"slow-answer": {"-n", "4", "-m", "answer", "-s", "300"},
		"nxdomain":    {"-n", "200", "-m", "nxdomain", "-c", "unspec"},
		"heartbeat":   {"-n", "3", "-m", "listen"},
		"idle":        {"-n", "3", "-m", "idle"},
		"tcp-answer":  {"-n", "4", "-m", "tcp-answer", "-o", "use-vc", "-s", "300"},
	} {
		t.Run(name, func(t *testing.T) {
			r := doctorCmd(t, 0, append([]string{bin}, args...)...)
			for _, f := range r.Findings {
				if f.Severity != "info" {
					t.Errorf("%s %s on a benign resolver: %s", f.Severity, f.ID, f.Title)
				}
			}
		})
	}
}

// glibc over TCP (options use-vc) against a server that accepts and never
// answers: each read waits until the server closes, and the finding's
// reads are the lookups' time.
func TestStoryResolverTCP(t *testing.T) {
	requireBPF(t)
	bin := scenarioBin(t, "resolver")
	out := filepath.Join(t.TempDir(), "report.json")
	r := run(t, "doctor", "--json", "-o", out, "--", bin, "-n", "2", "-m", "tcp-blackhole", "-o", "use-vc")
	_, totalMS := resolverTruth(t, r.stdout)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep doctorReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	var f *finding
	for i := range rep.Findings {
		if rep.Findings[i].ID == "dns-timeout" {
			f = &rep.Findings[i]
		}
	}
	if f == nil {
		t.Fatalf("no dns-timeout:\n%s", titles(rep))
	}
	reads, _ := f.Evidence["tcp_reads_unanswered"].(float64)
	waits, _ := f.Evidence["timed_out_waits"].(float64)
	waited, _ := f.Evidence["tcp_read_waited_ns"].(float64)
	if f.Evidence["protocol"] != "TCP" || reads == 0 || reads != waits || f.Severity != "warning" {
		t.Errorf("%s %s: evidence %v", f.Severity, f.Title, f.Evidence)
	}
	if d := totalMS - waited/1e6; d < 0 || d > 10 {
		t.Errorf("reads waited %.1f ms against the lookups' %.1f ms", waited/1e6, totalMS)
	}
	// The names, from the writev calls that crossed over (live, the
	// process's first and a sample): the scenario's, and no other.
	names, _ := f.Evidence["names"].([]any)
	if len(names) == 0 {
		t.Errorf("no names: %v", f.Evidence)
	}
	for _, n := range names {
		if m, _ := n.(map[string]any); m["name"] != "svc-0-0.sysray.test" && m["name"] != "svc-0-1.sysray.test" {
			t.Errorf("name %v is not one the scenario looked up", n)
		}
	}
}

// glibc over TCP writes each query after its 2-byte length, in iovecs of
// their own: the kernel copies the queries without their lengths, for a
// socket connected to port 53 only; a length and a query in one iovec
// give the query. In a network namespace of the test's own, with
// listeners on loopback.
func TestDNSPayloadWritevTCP(t *testing.T) {
	requireBPF(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("no python3")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "writev.py")
	if err := os.WriteFile(script, []byte(`import socket, os, struct
qa = bytes.fromhex("123401000001000000000000") + b"\x06secret\x04test\x00\x00\x01\x00\x01"
qb = bytes.fromhex("123501000001000000000000") + b"\x06secret\x04test\x00\x00\x1c\x00\x01"
ls = []
for port in (9999, 53):
    l = socket.socket(); l.bind(("127.0.0.1", port)); l.listen(4); ls.append(l)
for port in (9999, 53):
    s = socket.create_connection(("127.0.0.1", port))
    os.writev(s.fileno(), [struct.pack(">H", len(qa)), qa, struct.pack(">H", len(qb)), qb])
    os.writev(s.fileno(), [struct.pack(">H", len(qa)) + qa])
    s.close()
`), 0o644); err != nil {
		t.Fatal(err)
	}
	capFile := filepath.Join(dir, "writev.sysray")
	run(t, "record", "-e", "writev", "-w", capFile, "--", "unshare", "-n", "sh", "-c", "ip link set lo up && exec "+py+" "+script)
	c, err := capture.Open(capFile)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got []string
	for {
		var e event.Event
		if err := c.Next(&e); err != nil {
			break
		}
		if e.Kind != event.KindSyscall || event.SyscallName(event.ArchAMD64, e.Syscall.Nr) != "writev" || !strings.HasPrefix(e.Comm, "python") {
			continue
		}
		var qs []string
		for _, b := range e.Syscall.Data[1:3] {
			if b == nil {
				qs = append(qs, "-")
			} else if q, ok := dns.Parse(b); ok {
				qs = append(qs, q.String())
			} else {
				qs = append(qs, fmt.Sprintf("%q", b))
			}
		}
		got = append(got, strings.Join(qs, ","))
	}
	// port 9999: nothing; port 53: A and AAAA, then the one-iovec A
	want := []string{"-,-", "-,-", "secret.test A,secret.test AAAA", "secret.test A,-"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("writev payloads %q, want %q", got, want)
	}
}

// A send's payload is copied only when it goes to port 53, by address or
// by the connected socket's peer; never another port's.
func TestDNSPayloadOnlyPort53(t *testing.T) {
	requireBPF(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "send.py")
	if err := os.WriteFile(script, []byte(`import socket
q = bytes.fromhex("123401000001000000000000") + b"\x06secret\x04test\x00\x00\x01\x00\x01"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(q, ("127.0.0.1", 9999))
s.sendto(q, ("127.0.0.1", 53))
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.connect(("127.0.0.1", 9999)); c.send(q)
d = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); d.connect(("127.0.0.1", 53)); d.send(q)
u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); u.sendto(q, ("::1", 53)); u.sendto(q, ("::1", 5353))
import os
# fresh sockets: the sends above left an ICMP error pending on c and d
w = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); w.connect(("127.0.0.1", 9999)); os.write(w.fileno(), q)
x = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); x.connect(("127.0.0.1", 53)); os.write(x.fileno(), q)
n = os.open("/dev/null", os.O_WRONLY); os.write(n, q)
`), 0o644); err != nil {
		t.Fatal(err)
	}
	capFile := filepath.Join(dir, "send.sysray")
	run(t, "record", "-e", "sendto,write", "-w", capFile, "--", py, script)
	c, err := capture.Open(capFile)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got, gotWrites []bool
	for {
		var e event.Event
		if err := c.Next(&e); err != nil {
			break
		}
		name := event.SyscallName(event.ArchAMD64, e.Syscall.Nr)
		if e.Kind != event.KindSyscall || (name != "sendto" && name != "write") || e.Syscall.Args[2] != 29 {
			continue
		}
		if name == "write" && strings.HasPrefix(e.Comm, "python") {
			gotWrites = append(gotWrites, e.Syscall.Data[1] != nil)
		} else if name == "sendto" {
			got = append(got, e.Syscall.Data[1] != nil)
		}
		if e.Syscall.Data[1] != nil && !strings.Contains(string(e.Syscall.Data[1]), "secret") {
			t.Errorf("payload %q", e.Syscall.Data[1])
		}
	}
	// the order of the script's sends: 9999, 53, connected 9999, connected 53, ::1 53, ::1 5353
	want := []bool{false, true, false, true, true, false}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("payload copied %v, want %v (only port 53)", got, want)
	}
	// writes: on the socket connected to 9999, on the one connected to 53, to /dev/null
	if want := []bool{false, true, false}; fmt.Sprint(gotWrites) != fmt.Sprint(want) {
		t.Errorf("write payload copied %v, want %v (only a socket connected to port 53)", gotWrites, want)
	}
}
