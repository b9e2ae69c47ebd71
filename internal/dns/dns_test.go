package dns

import (
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// query builds the bytes a stub resolver sends, with Go's own encoder.
func query(t testing.TB, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 0x1234, RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		t.Fatal(err)
	}
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	// glibc adds an EDNS0 OPT record when asked (options edns0)
	if err := b.StartAdditionals(); err != nil {
		t.Fatal(err)
	}
	var rh dnsmessage.ResourceHeader
	if err := rh.SetEDNS0(1232, dnsmessage.RCodeSuccess, false); err != nil {
		t.Fatal(err)
	}
	if err := b.OPTResource(rh, dnsmessage.OPTResource{}); err != nil {
		t.Fatal(err)
	}
	m, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name string
		typ  dnsmessage.Type
		want string
	}{
		{"svc-0-1.sysray.test.", dnsmessage.TypeA, "svc-0-1.sysray.test A"},
		{"api.default.svc.cluster.local.", dnsmessage.TypeAAAA, "api.default.svc.cluster.local AAAA"},
		{"_http._tcp.example.org.", dnsmessage.TypeSRV, "_http._tcp.example.org SRV"},
		{"x.", dnsmessage.Type(99), "x TYPE99"},
		{".", dnsmessage.TypeNS, ". NS"},
	} {
		b := query(t, c.name, c.typ)
		q, ok := Parse(b)
		if !ok || q.String() != c.want || q.ID != 0x1234 || q.Cut {
			t.Errorf("%s: %+v %v, want %q", c.name, q, ok, c.want)
		}
	}
}

// The kernel copies the first 128 bytes: a long name comes cut, with the
// labels read whole.
func TestParseCut(t *testing.T) {
	long := "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.example.com."
	b := query(t, long, dnsmessage.TypeA)[:128]
	q, ok := Parse(b)
	if !ok || !q.Cut || q.Name != long[:63] || q.String() != long[:63]+"..." {
		t.Errorf("cut: %+v %v", q, ok)
	}
	// cut between the name and its type
	b = query(t, "a.b.", dnsmessage.TypeA)
	q, ok = Parse(b[:12+5+1])
	if !ok || !q.Cut || q.Name != "a.b" || q.Type != 0 {
		t.Errorf("cut before type: %+v %v", q, ok)
	}
}

func TestParseRejects(t *testing.T) {
	good := query(t, "a.example.", dnsmessage.TypeA)
	resp := append([]byte(nil), good...)
	resp[2] |= 0x80
	noQ := append([]byte(nil), good...)
	noQ[4], noQ[5] = 0, 0
	ptr := append([]byte(nil), good[:12]...)
	ptr = append(ptr, 0xc0, 0x0c)
	weird := append([]byte(nil), good...)
	weird[12] = 0x41
	for name, b := range map[string][]byte{"short": good[:11], "response": resp, "no question": noQ, "pointer": ptr, "label type": weird} {
		if q, ok := Parse(b); ok {
			t.Errorf("%s: parsed as %+v", name, q)
		}
	}
	// escapes: a dot or a space inside a label
	b := append([]byte(nil), good[:12]...)
	b = append(b, 3, 'a', '.', ' ', 0, 0, 1)
	if q, ok := Parse(b); !ok || q.Name != `a\046\032` || q.Type != 1 {
		t.Errorf("escapes: %+v %v", q, ok)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(query(f, "svc-0-1.sysray.test.", dnsmessage.TypeA))
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 63})
	f.Fuzz(func(t *testing.T, b []byte) {
		q, ok := Parse(b)
		if !ok {
			return
		}
		if len(q.Name) > 255*4 {
			t.Fatalf("name of %d bytes", len(q.Name))
		}
		_ = q.String()
	})
}

// A query written over TCP follows its two-byte length; the length must
// be the rest of the write, so a UDP message whose ID happens to look
// like a length is never shifted.
func TestParseFramed(t *testing.T) {
	m := query(t, "db.example.org.", dnsmessage.TypeAAAA)
	framed := append([]byte{byte(len(m) >> 8), byte(len(m))}, m...)
	if q, ok := ParseFramed(framed, uint64(len(framed))); !ok || q.Name != "db.example.org" || q.Type != uint16(dnsmessage.TypeAAAA) {
		t.Errorf("framed: %+v %v", q, ok)
	}
	// Cut to the kernel's first bytes, the write's length still says.
	if q, ok := ParseFramed(framed[:20], uint64(len(framed))); !ok || !q.Cut {
		t.Errorf("cut framed: %+v %v", q, ok)
	}
	for name, c := range map[string]struct {
		b []byte
		n uint64
	}{
		"length not the write's": {framed, uint64(len(framed) + 1)},
		"unframed":               {m, uint64(len(m))},
		"too short":              {framed[:13], uint64(len(framed))},
	} {
		if q, ok := ParseFramed(c.b, c.n); ok {
			t.Errorf("%s: read %+v", name, q)
		}
	}
}
