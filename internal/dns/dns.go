// Package dns reads the question of a DNS query from the first bytes of
// its message, as the kernel copies them from a send to port 53, and the
// header and question of an answer read from a resolver's socket. The
// bytes come from any process and may be cut anywhere, so nothing here
// trusts them: bad input yields ok == false, never a panic.
package dns

import (
	"encoding/binary"
	"strconv"
	"strings"
)

// Question is the first question of a query.
type Question struct {
	ID   uint16
	Name string // dotted, without the root's trailing dot; bytes outside [a-zA-Z0-9-_] escaped as \DDD
	Type uint16 // 0 when the bytes ended before it
	// Cut: the bytes ended inside the name or before its type (the
	// kernel copies the first 128 bytes of a message); Name holds the
	// labels read whole.
	Cut bool
}

const headerLen = 12

// Parse reads the first question of a DNS query message (RFC 1035 4.1).
// ok is false for bytes that are not a query: a response (QR set), no
// question, a compression pointer or a label type a query's name does not
// use, or a name longer than 255 bytes.
func Parse(b []byte) (q Question, ok bool) {
	if len(b) < headerLen || binary.BigEndian.Uint16(b[2:])&0x8000 != 0 { // QR: a response
		return q, false
	}
	return question(b)
}

// Answer is what a response's header and first question say.
type Answer struct {
	Question
	Rcode uint8 // RFC 1035 4.1.1: 0 no error, 2 server failure, 3 no such name
	// Records is ANCOUNT: 0 with no error is "no data", the name exists
	// without a record of the type (RFC 2308).
	Records uint16
}

// ParseAnswer reads the header and first question of a DNS response, as
// the kernel copies its first bytes from a read of a resolver's socket.
// ok is false for bytes that are not a response to a query with one.
func ParseAnswer(b []byte) (a Answer, ok bool) {
	if len(b) < headerLen || binary.BigEndian.Uint16(b[2:])&0x8000 == 0 {
		return a, false
	}
	q, ok := question(b)
	if !ok {
		return a, false
	}
	flags := binary.BigEndian.Uint16(b[2:])
	return Answer{Question: q, Rcode: uint8(flags & 0xf), Records: binary.BigEndian.Uint16(b[6:])}, true
}

var rcodeNames = map[uint8]string{0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}

// RcodeName is a response code's mnemonic (RFC 1035, 6895), RCODEn for others.
func RcodeName(r uint8) string {
	if n, ok := rcodeNames[r]; ok {
		return n
	}
	return "RCODE" + strconv.Itoa(int(r))
}

// String is "NAME TYPE RCODE", with NODATA for no error and no record.
func (a Answer) String() string {
	rc := RcodeName(a.Rcode)
	if a.Rcode == 0 && a.Records == 0 {
		rc = "NODATA"
	}
	return a.Question.String() + " " + rc
}

// question reads a message's ID and first question, query or response.
func question(b []byte) (q Question, ok bool) {
	q.ID = binary.BigEndian.Uint16(b)
	flags := binary.BigEndian.Uint16(b[2:])
	if flags>>11&0xf > 2 { // opcodes beyond QUERY, IQUERY, STATUS
		return q, false
	}
	if binary.BigEndian.Uint16(b[4:]) == 0 {
		return q, false
	}
	var name strings.Builder
	p, total := headerLen, 0
	for {
		if p >= len(b) {
			q.Name, q.Cut = name.String(), true
			return q, true
		}
		l := int(b[p])
		p++
		if l == 0 {
			break
		}
		if l > 63 { // 0xc0: a pointer; 0x40, 0x80: reserved label types
			return q, false
		}
		if total += l + 1; total > 255 {
			return q, false
		}
		if p+l > len(b) {
			q.Name, q.Cut = name.String(), true
			return q, true
		}
		if name.Len() > 0 {
			name.WriteByte('.')
		}
		for _, c := range b[p : p+l] {
			if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
				name.WriteByte(c)
			} else {
				name.WriteString(`\` + pad3(c))
			}
		}
		p += l
	}
	q.Name = name.String()
	if q.Name == "" {
		q.Name = "."
	}
	if p+2 > len(b) {
		q.Cut = true
		return q, true
	}
	q.Type = binary.BigEndian.Uint16(b[p:])
	return q, true
}

// ParseFramed reads the first question of a query sent over TCP, where
// the message follows its two-byte length (RFC 1035 4.2.2), from the
// first bytes b of a write of n bytes: Go's resolver writes length and
// message at once. The length must be the rest of the write's, so a UDP
// message is never taken for a framed one.
func ParseFramed(b []byte, n uint64) (q Question, ok bool) {
	if len(b) < 2+headerLen || uint64(binary.BigEndian.Uint16(b))+2 != n {
		return q, false
	}
	return Parse(b[2:])
}

func pad3(c byte) string {
	s := strconv.Itoa(int(c))
	return strings.Repeat("0", 3-len(s)) + s
}

var typeNames = map[uint16]string{
	1: "A", 2: "NS", 5: "CNAME", 6: "SOA", 12: "PTR", 15: "MX", 16: "TXT", 28: "AAAA",
	33: "SRV", 35: "NAPTR", 43: "DS", 48: "DNSKEY", 64: "SVCB", 65: "HTTPS", 255: "ANY",
}

// TypeName is a query type's mnemonic ("A", "AAAA"), TYPEn for others
// (RFC 3597), "?" for a type the bytes did not reach (0).
func TypeName(t uint16) string {
	if t == 0 {
		return "?"
	}
	if n, ok := typeNames[t]; ok {
		return n
	}
	return "TYPE" + strconv.Itoa(int(t))
}

// String is "NAME TYPE", with "..." after a name the bytes cut.
func (q Question) String() string {
	if q.Cut && q.Type == 0 {
		return q.Name + "..."
	}
	return q.Name + " " + TypeName(q.Type)
}
