package doctor

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
	hostfacts "github.com/sysray/sysray/internal/host"
	"golang.org/x/net/dns/dnsmessage"
)

const (
	dnsNrPoll     = 7
	dnsNrClose    = 3
	dnsNrSocket   = 41
	dnsNrConnect  = 42
	dnsNrSendto   = 44
	dnsNrRecvfrom = 45
	dnsNrBind     = 49
	dnsNrSendmmsg = 307
)

func sockaddr4(ip [4]byte, port uint16) []byte {
	return []byte{2, 0, byte(port >> 8), byte(port), ip[0], ip[1], ip[2], ip[3], 0, 0, 0, 0, 0, 0, 0, 0}
}

var nameServer = [4]byte{10, 0, 0, 53}

// dnsRun is one thread's calls, each ending 5 µs before the next begins.
type dnsRun struct {
	evs []event.Event
	t   uint64
	tid uint32
}

func (r *dnsRun) add(e event.Event) *event.Event {
	e.Time = r.t
	r.evs = append(r.evs, e)
	r.t += e.Syscall.Latency + 5000
	return &r.evs[len(r.evs)-1]
}

// lookup is glibc's: a UDP socket on fd 4 connected to the server, a poll
// for POLLOUT, the A and AAAA queries in one sendmmsg, a poll for the
// answer that returns ret after wait, a read of the answer when there is
// one, the close. seen says which of the fast calls crossed over.
func (r *dnsRun) lookup(wait uint64, ret int64, readRet int64, seen bool) {
	if seen {
		r.add(sys(r.tid, 0, dnsNrSocket, 4, 3000, 2, 0x80802, 0))
		c := r.add(sys(r.tid, 0, dnsNrConnect, 0, 4000, 4, 0x7ffc1000, 16))
		c.Syscall.Data[1] = sockaddr4(nameServer, 53)
		r.add(sys(r.tid, 0, dnsNrPoll, 1, 1000, 0x7ffc2000, 1, 0))
		r.add(sys(r.tid, 0, dnsNrSendmmsg, 2, 9000, 4, 0x7ffc3000, 2, 0x4000))
	}
	r.add(sys(r.tid, 0, dnsNrPoll, ret, wait, 0x7ffc2000, 1, 1000))
	if ret > 0 {
		r.add(sys(r.tid, 0, dnsNrRecvfrom, readRet, 3000, 4, 0x7ffc4000, 2048, 0, 0x7ffc5000, 0x7ffc6000))
	}
	if seen {
		r.add(sys(r.tid, 0, dnsNrClose, 0, 1000, 4))
	}
}

func TestDNSTimeout(t *testing.T) {
	const second = 1_000_000_000
	always := func(int) bool { return true }
	tests := []struct {
		name     string
		lookups  int
		wait     uint64
		ret      int64 // the answer poll's
		readRet  int64
		seen     func(i int) bool
		before   func(r *dnsRun) // calls before the lookups
		waits    uint64          // timed-out waits the finding counts; 0: no finding
		severity Severity
	}{
		{name: "black hole", lookups: 5, wait: second, seen: always, waits: 5, severity: Warning},
		// Live, a lookup's connect and send cross over only as a sample:
		// the waits before the first one seen count once it is.
		{name: "sampled", lookups: 5, wait: second, seen: func(i int) bool { return i == 3 }, waits: 5, severity: Warning},
		// musl's wait is the timeout over the attempts: 5 × 150 ms is
		// under one whole glibc timeout.
		{name: "short waits", lookups: 5, wait: 150 * ms, seen: always, waits: 5, severity: Info},
		{name: "answered", lookups: 50, wait: 2 * ms, ret: 1, readRet: 45, seen: always},
		{name: "slow but answered", lookups: 5, wait: 300 * ms, ret: 1, readRet: 45, seen: always},
		{name: "nxdomain storm", lookups: 500, wait: 100_000, ret: 1, readRet: 37, seen: always},
		{name: "refused", lookups: 50, wait: 50_000, ret: 1, readRet: -111, seen: always},
		// A poll that timed out sooner than any resolver's wait.
		{name: "under the bar", lookups: 5, wait: 50 * ms, seen: always},
		// No socket call of the thread ever seen: nothing names a server.
		{name: "never seen", lookups: 5, wait: second, seen: func(int) bool { return false }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &dnsRun{t: 1e9, tid: 7}
			for i := 0; i < tc.lookups; i++ {
				r.lookup(tc.wait, tc.ret, tc.readRet, tc.seen(i))
			}
			f := byID(findings(r.evs), DNSTimeout)
			if tc.waits == 0 {
				if f != nil {
					t.Fatalf("finding on %s: %s", tc.name, f.Title)
				}
				return
			}
			if f == nil {
				t.Fatal("no dns-timeout")
			}
			if f.Severity != tc.severity {
				t.Errorf("severity %s, want %s", f.Severity, tc.severity)
			}
			if n := f.Evidence["timed_out_waits"]; n != tc.waits {
				t.Errorf("timed_out_waits %v, want %d", n, tc.waits)
			}
			if w := f.Evidence["waited_ns"]; w != tc.waits*tc.wait {
				t.Errorf("waited_ns %v, want %d", w, tc.waits*tc.wait)
			}
			if f.Evidence["server"] != "10.0.0.53" || f.Key != "dns-timeout:10.0.0.53" {
				t.Errorf("server %v key %q, want 10.0.0.53", f.Evidence["server"], f.Key)
			}
			if !strings.Contains(f.Title, "10.0.0.53") || !strings.Contains(f.Summary, "sendmmsg") {
				t.Errorf("title %q / summary %q lack the server or the query call", f.Title, f.Summary)
			}
		})
	}
}

// A heartbeat listener: one answered lookup, then a UDP socket bound to
// another port, polled with a 1 s timeout that nothing ends.
func TestDNSTimeoutHeartbeat(t *testing.T) {
	r := &dnsRun{t: 1e9, tid: 7}
	r.lookup(2*ms, 1, 45, true)
	r.add(sys(7, 0, dnsNrSocket, 4, 3000, 2, 2, 0))
	b := r.add(sys(7, 0, dnsNrBind, 0, 3000, 4, 0x7ffc1000, 16))
	b.Syscall.Data[1] = sockaddr4([4]byte{127, 0, 0, 1}, 7777)
	for range 5 {
		r.add(sys(7, 0, dnsNrPoll, 0, 1_000_000_000, 0x7ffc2000, 1, 1000))
	}
	if f := byID(findings(r.evs), DNSTimeout); f != nil {
		t.Fatalf("a heartbeat's timeouts taken for the resolver's: %s", f.Title)
	}
}

// A thread that looked a name up and then connected elsewhere: its later
// timed-out polls are not the resolver's.
func TestDNSTimeoutThenElsewhere(t *testing.T) {
	r := &dnsRun{t: 1e9, tid: 7}
	r.lookup(1_000_000_000, 0, 0, true)
	c := r.add(sys(7, 0, dnsNrConnect, 0, 4000, 5, 0x7ffc1000, 16))
	c.Syscall.Data[1] = sockaddr4([4]byte{10, 0, 0, 80}, 8080)
	for range 5 {
		r.add(sys(7, 0, dnsNrPoll, 0, 1_000_000_000, 0x7ffc2000, 1, 1000))
	}
	f := byID(findings(r.evs), DNSTimeout)
	if f == nil || f.Evidence["timed_out_waits"] != uint64(1) {
		t.Fatalf("want the lookup's one timed-out wait only; got %+v", f)
	}
}

// musl's resolver sends on an unconnected socket, sendto naming the server.
func TestDNSTimeoutSendto(t *testing.T) {
	r := &dnsRun{t: 1e9, tid: 9}
	for range 3 {
		s := r.add(sys(9, 0, dnsNrSendto, 37, 9000, 3, 0x7ffc3000, 37, 0, 0x7ffc1000, 16))
		s.Syscall.Data[4] = sockaddr4(nameServer, 53)
		r.add(sys(9, 0, dnsNrPoll, 0, 2_500_000_000, 0x7ffc2000, 2, 2500))
	}
	f := byID(findings(r.evs), DNSTimeout)
	if f == nil || f.Evidence["timed_out_waits"] != uint64(3) || f.Severity != Warning {
		t.Fatalf("want 3 timed-out waits, a warning; got %+v", f)
	}
	if !strings.Contains(f.Summary, "sendto") {
		t.Errorf("summary lacks the query call: %s", f.Summary)
	}
}

// From a capture, the recorder's resolv.conf counts only when it lists the
// server the process queried.
func TestDNSTimeoutCaptureResolvConf(t *testing.T) {
	for _, tc := range []struct {
		conf string
		want string
	}{
		{"nameserver 10.0.0.53; options timeout:1 attempts:3", "timeout:1 attempts:3"},
		{"nameserver 192.0.2.1; options timeout:1 attempts:3", "are not in the capture"},
	} {
		r := &dnsRun{t: 1e9, tid: 7}
		for range 6 {
			r.lookup(1_000_000_000, 0, 0, true)
		}
		h := host
		h.Meta = map[string]string{"resolv.conf": tc.conf}
		d := New(h, nil)
		for i := range r.evs {
			d.Observe(&r.evs[i])
		}
		f := byID(d.Report().Findings, DNSTimeout)
		if f == nil || !strings.Contains(f.Summary, tc.want) {
			t.Errorf("with %q: want %q in the summary; got %+v", tc.conf, tc.want, f)
		}
		if f != nil && strings.Contains(tc.want, "attempts:3") && f.Evidence["lookups_failed_at_most"] != uint64(2) {
			t.Errorf("lookups_failed_at_most %v, want 6 waits over 3 attempts: 2", f.Evidence["lookups_failed_at_most"])
		}
	}
}

// An idle loop's timed-out polls before any socket call is seen, then a
// lookup: answered, they are dropped; unanswered, only the polls alike the
// resolver's (one descriptor, its timeout) count with it.
func TestDNSTimeoutPendingNeedsALikeWait(t *testing.T) {
	for _, tc := range []struct {
		name   string
		nfds   uint64
		tmo    uint64
		answer bool
		want   uint64 // timed-out waits; 0: no finding
	}{
		{"answered lookup", 1, 1000, true, 0},
		{"other timeout", 1, 5000, false, 1},
		{"other descriptors", 2, 1000, false, 1},
		{"alike", 1, 1000, false, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &dnsRun{t: 1e9, tid: 7}
			for range 3 {
				r.add(sys(7, 0, dnsNrPoll, 0, tc.tmo*ms, 0x7ffc2000, tc.nfds, tc.tmo))
			}
			if tc.answer {
				r.lookup(2*ms, 1, 45, true)
			} else {
				r.lookup(1_000_000_000, 0, 0, true)
			}
			f := byID(findings(r.evs), DNSTimeout)
			if tc.want == 0 {
				if f != nil {
					t.Fatalf("idle polls taken for the resolver's: %s", f.Title)
				}
				return
			}
			if f == nil || f.Evidence["timed_out_waits"] != tc.want {
				t.Fatalf("want %d timed-out waits; got %+v", tc.want, f)
			}
		})
	}
}

// Live, waits held before any socket call was seen count when the thread
// then queries a name server, if they asked poll for the wait the
// process's resolv.conf sets; others stay held. The process here is the
// test's own, whose resolv.conf is the host's.
func TestDNSTimeoutPendingByResolvConf(t *testing.T) {
	conf := parseResolvConf(hostfacts.ResolvConf("/etc/resolv.conf"))
	if len(conf.nameservers) == 0 {
		t.Skip("no /etc/resolv.conf to read")
	}
	pid := uint32(os.Getpid())
	want := uint64(conf.timeout * 1000)
	var evs []event.Event
	at := uint64(1e9)
	for _, tmo := range []uint64{want, want, want + 1} {
		e := sys(pid, at, dnsNrPoll, 0, tmo*ms, 0x7ffc2000, 1, tmo)
		evs = append(evs, e)
		at += tmo*ms + 5000
	}
	c := sys(pid, at, dnsNrConnect, 0, 4000, 4, 0x7ffc1000, 16)
	c.Syscall.Data[1] = sockaddr4(nameServer, 53)
	evs = append(evs, c)
	h := host
	h.Live = true
	d := New(h, nil)
	for i := range evs {
		d.Observe(&evs[i])
	}
	f := byID(d.Report().Findings, DNSTimeout)
	if f == nil || f.Evidence["timed_out_waits"] != uint64(2) {
		t.Fatalf("want the 2 polls for %d ms counted, not the one for %d; got %+v", want, want+1, f)
	}
}

// A daemon that looks a name up (answered) and then idles in poll on a
// pipe with a timeout: no socket call in between, and no query before its
// waits. They are not the resolver's.
func TestDNSTimeoutIdleLoopAfterLookup(t *testing.T) {
	r := &dnsRun{t: 1e9, tid: 7}
	r.lookup(2*ms, 1, 45, true)
	for range 5 {
		r.add(sys(7, 0, dnsNrPoll, 0, 2_000_000_000, 0x7ffc2000, 1, 2000))
	}
	if f := byID(findings(r.evs), DNSTimeout); f != nil {
		t.Fatalf("an idle loop's timeouts taken for the resolver's: %s", f.Title)
	}
	// Its timed-out lookups still count, and only they.
	r = &dnsRun{t: 1e9, tid: 7}
	for range 2 {
		r.lookup(1_000_000_000, 0, 0, true)
		for range 3 {
			r.add(sys(7, 0, dnsNrPoll, 0, 2_000_000_000, 0x7ffc2000, 1, 2000))
		}
	}
	f := byID(findings(r.evs), DNSTimeout)
	if f == nil || f.Evidence["timed_out_waits"] != uint64(2) {
		t.Fatalf("want the 2 lookups' waits only; got %+v", f)
	}
}

// Live, after an answered lookup, a poll with resolv.conf's very timeout
// and no query seen before it is not taken for the resolver's.
func TestDNSTimeoutConfWaitNotAfterAnAnswer(t *testing.T) {
	conf := parseResolvConf(hostfacts.ResolvConf("/etc/resolv.conf"))
	if len(conf.nameservers) == 0 {
		t.Skip("no /etc/resolv.conf to read")
	}
	pid := uint32(os.Getpid())
	tmo := uint64(conf.timeout * 1000)
	r := &dnsRun{t: 1e9, tid: pid}
	r.lookup(2*ms, 1, 45, true)
	for range 3 {
		r.add(sys(pid, 0, dnsNrPoll, 0, tmo*ms, 0x7ffc2000, 1, tmo))
	}
	h := host
	h.Live = true
	d := New(h, nil)
	for i := range r.evs {
		d.Observe(&r.evs[i])
	}
	if f := byID(d.Report().Findings, DNSTimeout); f != nil {
		t.Fatalf("an idle poll after an answer taken for the resolver's: %s", f.Title)
	}
}

// dnsQuery is the query bytes a stub resolver sends, as Go's encoder
// makes them.
func dnsQuery(t *testing.T, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 0x4242, RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		t.Fatal(err)
	}
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	m, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The finding names the names whose queries timed out, from the payload
// the kernel copied for port 53, and says when the search domains
// multiplied one name into several queries.
func TestDNSTimeoutNames(t *testing.T) {
	const second = 1_000_000_000
	r := &dnsRun{t: 1e9, tid: 7}
	c := r.add(sys(7, 0, dnsNrConnect, 0, 4000, 4, 0x7ffc1000, 16))
	c.Syscall.Data[1] = sockaddr4(nameServer, 53)
	// ndots:5 and two search domains: "api" is tried with each, then as is
	for _, n := range []string{"api.corp.test.", "api.svc.test.", "api."} {
		s := r.add(sys(7, 0, dnsNrSendto, 30, 9000, 4, 0x7ffc3000, 30, 0x4000, 0, 0))
		s.Syscall.Data[1] = dnsQuery(t, n, dnsmessage.TypeA)
		r.add(sys(7, 0, dnsNrPoll, 0, second, 0x7ffc2000, 1, 1000))
	}
	// A and AAAA together: both messages' questions are copied
	s := r.add(sys(7, 0, dnsNrSendmmsg, 2, 9000, 4, 0x7ffc3000, 2, 0x4000))
	s.Syscall.Data[1] = dnsQuery(t, "db.example.org.", dnsmessage.TypeA)
	s.Syscall.Data[2] = dnsQuery(t, "db.example.org.", dnsmessage.TypeAAAA)
	r.add(sys(7, 0, dnsNrPoll, 0, second, 0x7ffc2000, 1, 1000))
	// a query whose payload was not copied: counted, not named
	r.add(sys(7, 0, dnsNrSendmmsg, 2, 9000, 4, 0x7ffc3000, 2, 0x4000))
	r.add(sys(7, 0, dnsNrPoll, 0, second, 0x7ffc2000, 1, 1000))
	// an answered query's name is not listed
	s = r.add(sys(7, 0, dnsNrSendto, 30, 9000, 4, 0x7ffc3000, 30, 0x4000, 0, 0))
	s.Syscall.Data[1] = dnsQuery(t, "ok.example.org.", dnsmessage.TypeA)
	r.add(sys(7, 0, dnsNrPoll, 1, 2*ms, 0x7ffc2000, 1, 1000))

	h := host
	h.Meta = map[string]string{"resolv.conf": "nameserver 10.0.0.53; search corp.test svc.test; options ndots:5 timeout:1 attempts:1"}
	d := New(h, nil)
	for i := range r.evs {
		d.Observe(&r.evs[i])
	}
	f := byID(d.Report().Findings, DNSTimeout)
	if f == nil {
		t.Fatal("no dns-timeout")
	}
	if f.Evidence["timed_out_waits"] != uint64(5) || f.Evidence["named_waits"] != uint64(4) {
		t.Errorf("timed_out_waits %v named_waits %v, want 5 and 4", f.Evidence["timed_out_waits"], f.Evidence["named_waits"])
	}
	names, _ := f.Evidence["names"].([]map[string]any)
	got := map[string]uint64{}
	for _, n := range names {
		got[n["name"].(string)] = n["types"].(map[string]uint64)["A"]
	}
	want := map[string]uint64{"api.corp.test": 1, "api.svc.test": 1, "api": 1, "db.example.org": 1}
	if len(got) != len(want) {
		t.Errorf("names %v, want %v", got, want)
	}
	for _, n := range names {
		if n["name"] == "db.example.org" && (n["types"].(map[string]uint64)["AAAA"] != 1 || n["queries"] != uint64(2)) {
			t.Errorf("db.example.org: %v, want 1 A and 1 AAAA, 2 queries", n)
		}
	}
	for n, c := range want {
		if got[n] != c {
			t.Errorf("name %s: %d A, want %d (names %v)", n, got[n], c, got)
		}
	}
	for _, w := range []string{"db.example.org (1 A, 1 AAAA)", "4 of the 5 waits", "Search-domain expansion multiplied the queries: api, each tried",
		"search corp.test svc.test, ndots:5", "Search list corp.test svc.test, ndots:5"} {
		if !strings.Contains(f.Summary, w) {
			t.Errorf("summary lacks %q: %s", w, f.Summary)
		}
	}
	if strings.Contains(f.Summary, "ok.example.org") {
		t.Errorf("the answered query's name is listed: %s", f.Summary)
	}
	exp, _ := f.Evidence["search_expansion"].(map[string]any)
	if b, _ := exp["base_names"].([]string); len(b) != 1 || b[0] != "api" {
		t.Errorf("search_expansion %v, want base api", f.Evidence["search_expansion"])
	}
}

// glibc over TCP (options use-vc): connect, writev, then a read with no
// timeout of its own. A read that waited and got no answer (the server
// reset or closed the connection) is a wait on the server; one that got
// the answer late is a slow server, not a silent one.
func TestDNSTimeoutTCPRead(t *testing.T) {
	const second = 1_000_000_000
	const nrRead, nrWritev = 0, 20
	r := &dnsRun{t: 1e9, tid: 7}
	lookup := func(ret int64, wait uint64, name string) {
		r.add(sys(7, 0, dnsNrSocket, 4, 3000, 2, 0x80001, 0))
		c := r.add(sys(7, 0, dnsNrConnect, 0, 40000, 4, 0x7ffc1000, 16))
		c.Syscall.Data[1] = sockaddr4(nameServer, 53)
		w := r.add(sys(7, 0, nrWritev, 39, 9000, 4, 0x7ffc3000, 4))
		// the kernel copied each query without its length (CAP_DNS_IOV)
		w.Syscall.Data[1] = dnsQuery(t, name, dnsmessage.TypeA)
		w.Syscall.Data[2] = dnsQuery(t, name, dnsmessage.TypeAAAA)
		r.add(sys(7, 0, nrRead, ret, wait, 4, 0x7ffc4000, 2))
		r.add(sys(7, 0, dnsNrClose, 0, 1000, 4))
	}
	lookup(-104, second, "reset.example.") // ECONNRESET
	lookup(0, 2*second, "eof.example.")    // EOF
	lookup(2, 300*ms, "late.example.")     // answered late
	f := byID(findings(r.evs), DNSTimeout)
	if f == nil {
		t.Fatal("no dns-timeout")
	}
	if f.Evidence["tcp_reads_unanswered"] != uint64(2) || f.Evidence["tcp_read_waited_ns"] != uint64(3*second) ||
		f.Evidence["timed_out_waits"] != uint64(2) || f.Evidence["protocol"] != "TCP" || f.Evidence["answered_waits_seen"] != uint64(1) {
		t.Errorf("evidence %v", f.Evidence)
	}
	if !strings.Contains(f.Title, "over TCP") || !strings.Contains(f.Summary, "writev") || f.Severity != Warning {
		t.Errorf("%s: %s / %s", f.Severity, f.Title, f.Summary)
	}
	// The unanswered reads' queries are named, A and AAAA; the answered one's not.
	for _, w := range []string{"reset.example (1 A, 1 AAAA)", "eof.example (1 A, 1 AAAA)"} {
		if !strings.Contains(f.Summary, w) {
			t.Errorf("summary lacks %q: %s", w, f.Summary)
		}
	}
	if strings.Contains(f.Summary, "late.example") {
		t.Errorf("the answered query is named: %s", f.Summary)
	}
	// The same reads on a socket connected elsewhere are not DNS.
	r = &dnsRun{t: 1e9, tid: 7}
	r.add(sys(7, 0, dnsNrSocket, 4, 3000, 2, 0x80001, 0))
	c := r.add(sys(7, 0, dnsNrConnect, 0, 40000, 4, 0x7ffc1000, 16))
	c.Syscall.Data[1] = sockaddr4(nameServer, 8053)
	r.add(sys(7, 0, nrRead, 0, 2*second, 4, 0x7ffc4000, 2))
	if f := byID(findings(r.evs), DNSTimeout); f != nil {
		t.Errorf("a read on port 8053: %s", f.Title)
	}
}

// goLookup is Go's pure-Go resolver: A and AAAA each on a socket of its
// own (fds 6 and 9, on two threads) connected to the server, written,
// read at once (EAGAIN), then either answered after wait (a read that
// gets the answer, then the close) or closed at the deadline with no
// answer read. The wait itself is the runtime's (epoll_pwait on
// another thread), which says nothing of the socket.
func goLookup(r *dnsRun, wait uint64, answered, connectSeen bool) {
	const nrWrite, nrRead, nrEpollPwait = 1, 0, 281
	start := r.t
	for i, fd := range []uint64{6, 9} {
		tid := uint32(20 + i)
		r.t = start + uint64(i)*20_000
		if connectSeen {
			c := r.add(sys(tid, 0, dnsNrConnect, 0, 4000, fd, 0x7ffc1000, 16))
			c.Syscall.Data[1] = sockaddr4(nameServer, 53)
			r.add(sys(tid, 0, nrWrite, 48, 6000, fd, 0x7ffc3000, 48))
		}
		r.add(sys(tid, 0, nrRead, -11, 2000, fd, 0x7ffc4000, 1232))
	}
	readAt := r.t
	r.t = readAt + 1000
	r.add(sys(22, 0, nrEpollPwait, 0, wait-2000, 7, 0x7ffc5000, 128, wait/1_000_000))
	for i, fd := range []uint64{6, 9} {
		tid := uint32(20 + i)
		if answered {
			r.add(sys(tid, 0, nrRead, 48, 2000, fd, 0x7ffc4000, 1232))
		}
		r.add(sys(tid, 0, dnsNrClose, 0, 1000, fd))
	}
	for i := range r.evs {
		r.evs[i].PID = 20
	}
}

func TestDNSTimeoutGo(t *testing.T) {
	const second = 1_000_000_000
	for _, tc := range []struct {
		name        string
		wait        uint64
		answered    bool
		connectSeen func(i int) bool
		queries     uint64 // 0: no finding
	}{
		{name: "silent server", wait: second, connectSeen: func(int) bool { return true }, queries: 8},
		// Live, the connect is a sample, and /proc names the peer of a
		// descriptor whose connect was not seen; from a capture with
		// no connect seen nothing names a server.
		{name: "connect never seen", wait: second, connectSeen: func(int) bool { return false }},
		{name: "answered", wait: 2 * ms, answered: true, connectSeen: func(int) bool { return true }},
		{name: "slow but answered", wait: 300 * ms, answered: true, connectSeen: func(int) bool { return true }},
		// A server that answers after exactly the resolver's timeout:
		// the answer was read, so nothing timed out.
		{name: "answered at a second", wait: second, answered: true, connectSeen: func(int) bool { return true }},
		// Closed with no answer read, but sooner than any resolver's wait.
		{name: "under the bar", wait: 50 * ms, connectSeen: func(int) bool { return true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &dnsRun{t: 1e9}
			for i := range 4 {
				goLookup(r, tc.wait, tc.answered, tc.connectSeen(i))
				r.t += 10_000
			}
			f := byID(findings(r.evs), DNSTimeout)
			if tc.queries == 0 {
				if f != nil {
					t.Fatalf("finding on %s: %s", tc.name, f.Title)
				}
				return
			}
			if f == nil {
				t.Fatal("no dns-timeout")
			}
			if f.Evidence["timed_out_waits"] != tc.queries || f.Evidence["nonblocking_queries_unanswered"] != tc.queries {
				t.Errorf("timed_out_waits %v nonblocking %v, want %d", f.Evidence["timed_out_waits"], f.Evidence["nonblocking_queries_unanswered"], tc.queries)
			}
			// A and AAAA waited side by side: each lookup's time once,
			// from the first read to the last close.
			w, _ := f.Evidence["waited_ns"].(uint64)
			if w < 4*tc.wait || w > 4*(tc.wait+50_000) {
				t.Errorf("waited_ns %d, want 4 × about %d", w, tc.wait)
			}
			if f.Severity != Warning || f.Evidence["server"] != "10.0.0.53" || !strings.Contains(f.Summary, "netpoller") {
				t.Errorf("severity %s server %v summary %q", f.Severity, f.Evidence["server"], f.Summary)
			}
		})
	}
}

// Go over TCP (`options use-vc`, or a truncated answer asked again): a
// non-blocking connect (EINPROGRESS, a failure that always crosses over),
// the query written after its two-byte length, a read at once (EAGAIN),
// and at the deadline the close with no answer read.
func TestDNSTimeoutGoTCP(t *testing.T) {
	const second = 1_000_000_000
	const nrWrite, nrRead = 1, 0
	for _, answered := range []bool{false, true} {
		r := &dnsRun{t: 1e9}
		for i := range 3 {
			fd := uint64(6 + i)
			r.add(sys(20, 0, dnsNrSocket, int64(fd), 3000, 2, 0x80801, 0))
			c := r.add(sys(20, 0, dnsNrConnect, -115, 4000, fd, 0x7ffc1000, 16))
			c.Syscall.Data[1] = sockaddr4(nameServer, 53)
			q := dnsQuery(t, "svc"+strconv.Itoa(i)+".example.", dnsmessage.TypeA)
			w := r.add(sys(20, 0, nrWrite, int64(len(q)+2), 6000, fd, 0x7ffc3000, uint64(len(q)+2)))
			w.Syscall.Data[1] = append([]byte{0, byte(len(q))}, q...)
			r.add(sys(20, 0, nrRead, -11, 2000, fd, 0x7ffc4000, 1232))
			r.t += second
			if answered {
				r.add(sys(20, 0, nrRead, 48, 2000, fd, 0x7ffc4000, 1232))
			}
			r.add(sys(20, 0, dnsNrClose, 0, 1000, fd))
		}
		for i := range r.evs {
			r.evs[i].PID = 20
		}
		f := byID(findings(r.evs), DNSTimeout)
		if answered {
			if f != nil {
				t.Errorf("answered over TCP: %s", f.Title)
			}
			continue
		}
		if f == nil {
			t.Fatal("no dns-timeout")
		}
		if f.Evidence["protocol"] != "TCP" || f.Evidence["nonblocking_queries_unanswered"] != uint64(3) || f.Severity != Warning {
			t.Errorf("%s %s: %v", f.Severity, f.Title, f.Evidence)
		}
		for i := range 3 {
			if w := "svc" + strconv.Itoa(i) + ".example (1 A)"; !strings.Contains(f.Summary, w) {
				t.Errorf("summary lacks %q: %s", w, f.Summary)
			}
		}
	}
}

// musl binds its resolver's socket to port 0 before it sends: that bind
// moves the thread nowhere, even when the send before it was not seen.
func TestDNSTimeoutMuslBind(t *testing.T) {
	r := &dnsRun{t: 1e9, tid: 9}
	for i := range 3 {
		r.add(sys(9, 0, dnsNrSocket, 4, 3000, 2, 0x80802, 0))
		b := r.add(sys(9, 0, dnsNrBind, 0, 3000, 4, 0x7ffc1000, 16))
		b.Syscall.Data[1] = sockaddr4([4]byte{}, 0)
		if i == 2 {
			s := r.add(sys(9, 0, dnsNrSendto, 37, 9000, 4, 0x7ffc3000, 37, 0x4000, 0x7ffc1000, 16))
			s.Syscall.Data[4] = sockaddr4(nameServer, 53)
		}
		r.add(sys(9, 0, dnsNrPoll, 0, 1_000_000_000, 0x7ffc2000, 1, 1000))
		r.add(sys(9, 0, dnsNrClose, 0, 1000, 4))
	}
	f := byID(findings(r.evs), DNSTimeout)
	if f == nil || f.Evidence["timed_out_waits"] != uint64(3) {
		t.Fatalf("want 3 timed-out waits (the two before the send seen held, then counted); got %+v", f)
	}
}

// musl sends A and AAAA with two sendto calls before one poll: the wait
// is named by both.
func TestDNSTimeoutSendtoNames(t *testing.T) {
	r := &dnsRun{t: 1e9, tid: 9}
	for _, typ := range []dnsmessage.Type{dnsmessage.TypeA, dnsmessage.TypeAAAA} {
		s := r.add(sys(9, 0, dnsNrSendto, 37, 9000, 3, 0x7ffc3000, 37, 0x4000, 0x7ffc1000, 16))
		s.Syscall.Data[1] = dnsQuery(t, "svc.example.test.", typ)
		s.Syscall.Data[4] = sockaddr4(nameServer, 53)
	}
	r.add(sys(9, 0, dnsNrPoll, 0, 1_000_000_000, 0x7ffc2000, 1, 1000))
	f := byID(findings(r.evs), DNSTimeout)
	if f == nil {
		t.Fatal("no dns-timeout")
	}
	names, _ := f.Evidence["names"].([]map[string]any)
	if len(names) != 1 || names[0]["name"] != "svc.example.test" {
		t.Fatalf("names %v", f.Evidence["names"])
	}
	types, _ := names[0]["types"].(map[string]uint64)
	if types["A"] != 1 || types["AAAA"] != 1 {
		t.Errorf("types %v, want one A and one AAAA", types)
	}
}
