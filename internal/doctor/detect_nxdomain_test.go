package doctor

import (
	"slices"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
	hostfacts "github.com/sysray/sysray/internal/host"
	"golang.org/x/net/dns/dnsmessage"
)

const (
	nxNrRead   = 0
	nxNrSendto = 44
	nxNrRecv   = 45
)

// nxMsg is a DNS message for name and type: a query, or an answer with
// rcode and records records (the header's count; the records themselves
// lie past the bytes the kernel copies).
func nxMsg(t *testing.T, id uint16, name string, typ dnsmessage.Type, answer bool, rcode dnsmessage.RCode, records int) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, Response: answer, RCode: rcode, RecursionDesired: true})
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		t.Fatal(err)
	}
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name + "."), Type: typ, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	msg, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	msg[6], msg[7] = byte(records>>8), byte(records)
	return msg
}

// nxRun is one process's lookups: each candidate's A and AAAA queries
// sent with sendto and their answers read with recvfrom, 50 µs apart.
type nxRun struct {
	t   *testing.T
	evs []event.Event
	now uint64
	id  uint16
	pid uint32
}

func (r *nxRun) ask(name string, rcode dnsmessage.RCode, recordA, recordAAAA int) {
	for _, q := range []struct {
		typ     dnsmessage.Type
		records int
	}{{dnsmessage.TypeA, recordA}, {dnsmessage.TypeAAAA, recordAAAA}} {
		r.id++
		s := sys(r.pid, r.now, nxNrSendto, 40, 2000, 3, 0x7ffc1000, 40, 0, 0x7ffc2000, 16)
		s.Syscall.Data[1] = nxMsg(r.t, r.id, name, q.typ, false, 0, 0)
		r.evs = append(r.evs, s)
		r.now += 50_000
		rc := rcode
		if rc == dnsmessage.RCodeSuccess && q.records == 0 && name == "" {
			rc = dnsmessage.RCodeNameError
		}
		a := sys(r.pid, r.now, nxNrRecv, 40, 2000, 3, 0x7ffc3000, 512, 0, 0, 0)
		a.Syscall.Data[1] = nxMsg(r.t, r.id, name, q.typ, true, rc, q.records)
		r.evs = append(r.evs, a)
		r.now += 50_000
	}
}

// lookup asks each search candidate (no such name), then the name as
// written (an A record, no AAAA), as glibc does under ndots above the
// name's dots.
func (r *nxRun) lookup(name string, domains ...string) {
	for _, d := range domains {
		r.ask(name+"."+d, dnsmessage.RCodeNameError, 0, 0)
	}
	r.ask(name, dnsmessage.RCodeSuccess, 1, 0)
}

func TestDNSNXDomain(t *testing.T) {
	conf := "nameserver 10.0.0.53; search corp.test svc.test; options ndots:5"
	tests := []struct {
		name    string
		conf    string // the capture's resolv.conf; "" none
		run     func(r *nxRun)
		key     string // the finding's; "" none
		sev     Severity
		words   []string
		failed  uint64
		lookups uint64
	}{
		{name: "search list, resolv.conf known", conf: conf, key: "search", sev: Warning, failed: 20, lookups: 5,
			words: []string{"api.sysray.test (5 lookups, 20 failed answers)", "Search list corp.test svc.test, ndots:5", "4.0 wasted queries a lookup"},
			run: func(r *nxRun) {
				for range 5 {
					r.lookup("api.sysray.test", "corp.test", "svc.test")
				}
			}},
		{name: "search list inferred from the answers", key: "search", sev: Warning, failed: 20, lookups: 5,
			words: []string{"the answers show the search domains corp.test svc.test"},
			run: func(r *nxRun) {
				for range 5 {
					r.lookup("api.sysray.test", "corp.test", "svc.test")
				}
			}},
		{name: "the longest search domain wins", conf: "search svc.cluster.local cluster.local; options ndots:5", key: "search", sev: Warning, failed: 12, lookups: 3,
			words: []string{"api.sysray.test (3 lookups"},
			run: func(r *nxRun) {
				for range 3 {
					r.lookup("api.sysray.test", "svc.cluster.local", "cluster.local")
				}
			}},
		{name: "one lookup is info", conf: conf, key: "search", sev: Info, failed: 4, lookups: 1,
			run: func(r *nxRun) { r.lookup("api.sysray.test", "corp.test", "svc.test") }},
		{name: "two lookups are info", conf: conf, key: "search", sev: Info, failed: 8, lookups: 2,
			run: func(r *nxRun) {
				r.lookup("api.sysray.test", "corp.test", "svc.test")
				r.lookup("api.sysray.test", "corp.test", "svc.test")
			}},
		{name: "a name that does not exist, asked 3 times", conf: conf, key: "missing", sev: Warning, failed: 18, lookups: 3,
			words: []string{"3 lookups of 1 name failed", "gone.sysray.test"},
			run: func(r *nxRun) {
				for range 3 {
					for _, n := range []string{"gone.sysray.test.corp.test", "gone.sysray.test.svc.test", "gone.sysray.test"} {
						r.ask(n, dnsmessage.RCodeNameError, 0, 0)
					}
				}
			}},
		{name: "distinct names failing once each are info", key: "missing", sev: Info, failed: 100, lookups: 50,
			run: func(r *nxRun) {
				for i := range 50 {
					r.ask("svc-"+string(rune('a'+i%26))+string(rune('a'+i/26))+".sysray.test", dnsmessage.RCodeNameError, 0, 0)
				}
			}},
		{name: "fully qualified: no failed answer", conf: conf,
			run: func(r *nxRun) {
				for range 5 {
					r.lookup("api.sysray.test")
				}
			}},
		{name: "a short name found at its first search domain", conf: "search sysray.test corp.test",
			run: func(r *nxRun) {
				for range 5 {
					r.ask("api.sysray.test", dnsmessage.RCodeSuccess, 1, 0)
				}
			}},
		{name: "a server failure is not no such name", conf: conf,
			run: func(r *nxRun) {
				for range 5 {
					r.ask("api.sysray.test.corp.test", dnsmessage.RCodeServerFailure, 0, 0)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := host
			if tt.conf != "" {
				h.Meta = map[string]string{hostfacts.MetaResolvConf: tt.conf}
			}
			r := &nxRun{t: t, pid: 7, now: 1_000_000}
			tt.run(r)
			d := New(h, nil)
			for i := range r.evs {
				d.Observe(&r.evs[i])
			}
			var got *Finding
			for _, f := range checked(d.Report()).Findings {
				if f.ID == DNSNXDomain {
					if got != nil {
						t.Fatalf("two findings: %s and %s", got.Key, f.Key)
					}
					got = &f
				}
			}
			if tt.key == "" {
				if got != nil {
					t.Fatalf("finding %s: %s", got.Key, got.Summary)
				}
				return
			}
			if got == nil {
				t.Fatalf("no finding, want %s", tt.key)
			}
			if got.Key != string(DNSNXDomain)+":"+tt.key || got.Severity != tt.sev {
				t.Errorf("finding %s %v, want %s %v: %s", got.Key, got.Severity, tt.key, tt.sev, got.Summary)
			}
			if n := got.Evidence["failed_answers"]; n != tt.failed {
				t.Errorf("failed_answers %v, want %d", n, tt.failed)
			}
			if lookups := got.Evidence["lookups"]; lookups != tt.lookups {
				t.Errorf("lookups %v, want %d", lookups, tt.lookups)
			}
			for _, w := range tt.words {
				if !strings.Contains(got.Summary, w) {
					t.Errorf("summary lacks %q: %s", w, got.Summary)
				}
			}
			// Each failed answer's query was seen sent 50 µs before.
			if rt := got.Evidence["failed_round_trip_ns"]; rt != uint64(50_000) {
				t.Errorf("failed_round_trip_ns %v, want 50000", rt)
			}
			if !slices.Contains(got.Syscalls, "recvfrom") {
				t.Errorf("syscalls %v lack recvfrom", got.Syscalls)
			}
		})
	}
}

// An answer the kernel cut, a query read back, and bytes that are not
// DNS are no answers.
func TestDNSNXDomainBadBytes(t *testing.T) {
	full := nxMsg(t, 1, "api.sysray.test.corp.test", dnsmessage.TypeA, true, dnsmessage.RCodeNameError, 0)
	var evs []event.Event
	for i, b := range [][]byte{full[:20], nxMsg(t, 1, "api.corp.test", dnsmessage.TypeA, false, 0, 0), []byte("HTTP/1.1 200 OK\r\n\r\n"), nil, full[:11]} {
		for range 5 {
			e := sys(7, uint64(i)*1000, nxNrRead, int64(len(b)), 1000, 3, 0x7ffc3000, 512)
			e.Syscall.Data[1] = b
			evs = append(evs, e)
		}
	}
	if f := byID(findings(evs), DNSNXDomain); f != nil {
		t.Fatalf("finding from no answer: %s", f.Summary)
	}
}
