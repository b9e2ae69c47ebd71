package strace

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/sysray/sysray/internal/event"
)

// Names strace prints for flags and enums are mapped back to numbers with
// sysray's own tables, read through the formatter: every value a table
// names is formatted once and each name learnt from the value that printed
// it. So a name means here exactly what it means when sysray prints it, and
// no second copy of the tables can drift from the first.

type tableKey struct {
	arch event.Arch
	kind event.ArgKind
}

var (
	tablesMu sync.Mutex
	tables   = map[tableKey]map[string]uint64{}
)

// nameTable returns name → value for argument i of syscall nr.
func nameTable(a event.Arch, nr uint32, i int) map[string]uint64 {
	spec := event.Lookup(a, nr)
	if spec == nil || i >= len(spec.Args) {
		return nil
	}
	k := tableKey{a, spec.Args[i].Kind}
	tablesMu.Lock()
	defer tablesMu.Unlock()
	if t, ok := tables[k]; ok {
		return t
	}
	t := learn(func(v uint64) string {
		s := event.Syscall{Nr: nr}
		s.Args[i] = v
		_, text, _ := event.ArgValue(a, &s, "arg"+strconv.Itoa(i))
		return text
	})
	tables[k] = t
	return t
}

// learn builds a name table from a formatter: small values (enums, the low
// byte of clone's flags, access modes), every single bit and every pair of
// bits (names of several bits, like O_SYNC). A name is learnt from a value
// whose every other name is already known.
func learn(format func(uint64) string) map[string]uint64 {
	t := map[string]uint64{}
	try := func(v uint64) {
		toks := strings.Split(format(v), "|")
		var unknown string
		known := uint64(0)
		for _, tok := range toks {
			if _, isNum := parseInt(tok); isNum || tok == "" || strings.ContainsAny(tok, "<\"(") {
				if n, ok := parseInt(tok); ok {
					known |= uint64(n)
				}
				continue
			}
			if val, ok := t[tok]; ok {
				known |= val
				continue
			}
			if unknown != "" {
				return // two new names in one value: wait for a simpler one
			}
			unknown = tok
		}
		if unknown != "" {
			t[unknown] = v &^ known
		}
	}
	for v := uint64(0); v <= 1100; v++ {
		try(v)
	}
	// Negative ints: AT_FDCWD.
	for v := int64(-1); v >= -200; v-- {
		try(uint64(v))
	}
	for b := range 64 {
		try(1 << b)
	}
	for b := range 64 {
		for c := b + 1; c < 64; c++ {
			try(1<<b | 1<<c)
		}
	}
	return t
}

// value reads one argument's number: a number, a name from the table, or
// names and numbers joined by '|'. ok is false when any part is neither
// (a structure, an array, a name the tables lack).
func value(text string, t map[string]uint64) (uint64, bool) {
	switch text {
	case "NULL":
		return 0, true
	case "":
		return 0, false
	}
	if n, ok := parseInt(text); ok {
		return uint64(n), true
	}
	if text[0] == '{' || text[0] == '[' || text[0] == '"' || text[0] == '~' {
		return 0, false
	}
	var v uint64
	for _, tok := range strings.Split(text, "|") {
		if n, ok := parseInt(tok); ok {
			v |= uint64(n)
			continue
		}
		// MAP_HUGETLB's size: "21<<MAP_HUGE_SHIFT".
		if a, b, ok := strings.Cut(tok, "<<"); ok {
			n, ok1 := parseInt(a)
			s, ok2 := t[b]
			if b == "MAP_HUGE_SHIFT" {
				s, ok2 = mapHugeShift, true // a shift, which no table value prints alone
			}
			if !ok1 || !ok2 {
				return 0, false
			}
			v |= uint64(n) << s
			continue
		}
		n, ok := t[tok]
		if !ok {
			return 0, false
		}
		v |= n
	}
	return v, true
}

// mapHugeShift is where MAP_HUGETLB's page size (log2) sits in mmap's flags.
const mapHugeShift = 26

// decoded is what the arguments of one call gave.
type decoded struct {
	args      [6]uint64
	data      [6][]byte
	trunc     [6]bool
	undecoded int // arguments strace printed as something not mapped back (structures, unknown names)
}

// straceNames maps the names strace gives clone's arguments to sysray's.
var straceNames = map[string]string{"child_stack": "stack", "child_tidptr": "child_tid", "parent_tidptr": "parent_tid"}

// decodeArgs maps the printed arguments of syscall nr back to registers
// and copied data. ok is true when the call returned successfully, which
// decides whether output addresses (accept's peer) were filled in.
func decodeArgs(a event.Arch, nr uint32, text string, ok bool) decoded {
	var d decoded
	spec := event.Lookup(a, nr)
	if spec == nil {
		return d
	}
	for pos, raw := range splitArgs(text) {
		raw = stripComments(raw)
		i := pos
		if n, v := named(raw); n != "" {
			if alias := straceNames[n]; alias != "" {
				n = alias
			}
			for j, as := range spec.Args {
				if as.Name == n {
					i, raw = j, v
					break
				}
			}
		}
		if i >= len(spec.Args) || i >= 6 {
			continue
		}
		as := spec.Args[i]
		switch as.Kind {
		case event.ArgPath, event.ArgString:
			if b, trunc, isStr := unquote(raw); isStr {
				d.data[i], d.trunc[i] = b, trunc
				continue
			}
		case event.ArgSockaddr, event.ArgSockaddrOut:
			if as.Kind == event.ArgSockaddrOut && !ok {
				continue
			}
			if b := sockaddr(raw); b != nil {
				d.data[i] = b
				continue
			}
		case event.ArgFd, event.ArgDirFd:
			raw = stripAnnotation(raw)
		}
		if v, good := value(raw, nameTable(a, nr, i)); good {
			d.args[i] = v
		} else if raw != "" {
			d.undecoded++
		}
	}
	return d
}

// sockaddr rebuilds the bytes of a socket address from strace's rendering
// of it, for the families sysray itself renders (AF_UNIX, AF_INET,
// AF_INET6); nil for others.
func sockaddr(s string) []byte {
	fam, ok := structField(s, "sa_family")
	if !ok {
		return nil
	}
	field := func(name string) string { v, _ := structField(s, name); return v }
	inside := func(v, open string) string {
		v = strings.TrimPrefix(v, open)
		return strings.TrimSuffix(v, ")")
	}
	switch fam {
	case "AF_UNIX":
		b := binary.LittleEndian.AppendUint16(nil, 1)
		p := field("sun_path")
		if abs, ok := strings.CutPrefix(p, "@"); ok {
			name, _, _ := unquote(abs)
			return append(append(b, 0), name...)
		}
		name, _, _ := unquote(p)
		return append(b, name...)
	case "AF_INET":
		port, err := strconv.ParseUint(inside(field("sin_port"), "htons("), 10, 16)
		ip, err2 := netip.ParseAddr(strings.Trim(inside(field("sin_addr"), "inet_addr("), `"`))
		if err != nil || err2 != nil || !ip.Is4() {
			return nil
		}
		b := binary.LittleEndian.AppendUint16(nil, 2)
		b = binary.BigEndian.AppendUint16(b, uint16(port))
		ip4 := ip.As4()
		b = append(b, ip4[:]...)
		return append(b, make([]byte, 8)...)
	case "AF_INET6":
		port, err := strconv.ParseUint(inside(field("sin6_port"), "htons("), 10, 16)
		flow, _ := strconv.ParseUint(inside(field("sin6_flowinfo"), "htonl("), 10, 32)
		var ip netip.Addr
		var err2 error = strconv.ErrSyntax
		for _, f := range splitArgs(strings.Trim(s, "{}")) {
			if v, ok := strings.CutPrefix(f, "inet_pton(AF_INET6, \""); ok {
				addr, _, _ := strings.Cut(v, "\"")
				ip, err2 = netip.ParseAddr(addr)
			}
		}
		if err != nil || err2 != nil {
			return nil
		}
		b := binary.LittleEndian.AppendUint16(nil, 10)
		b = binary.BigEndian.AppendUint16(b, uint16(port))
		b = binary.BigEndian.AppendUint32(b, uint32(flow))
		ip16 := ip.As16()
		b = append(b, ip16[:]...)
		scope, _ := strconv.ParseUint(field("sin6_scope_id"), 10, 32)
		return binary.LittleEndian.AppendUint32(b, uint32(scope))
	}
	return nil
}
