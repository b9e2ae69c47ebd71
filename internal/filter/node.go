package filter

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sysray/sysray/internal/event"
)

type op uint8

const (
	opBare op = iota // a bool field standing alone
	opEq
	opNe
	opLt
	opLe
	opGt
	opGe
	opContains
	opIContains
	opStartsWith
	opEndsWith
	opIn
	opExists
)

var opNames = [...]string{
	opEq: "=", opNe: "!=", opLt: "<", opLe: "<=", opGt: ">", opGe: ">=",
	opContains: "contains", opIContains: "icontains", opStartsWith: "startswith", opEndsWith: "endswith",
	opIn: "in", opExists: "exists",
}

func (o op) String() string { return opNames[o] }

func (o op) ordering() bool { return o >= opLt && o <= opGe }
func (o op) textual() bool  { return o >= opContains && o <= opEndsWith }

// node is a compiled expression. Each comparison is its own type so that
// Match only switches on what the expression needs.
type node interface {
	match(e *event.Event, env Env) bool
	format(b *strings.Builder)
}

type value struct {
	text string
	pos  int
}

// pred is what every comparison keeps from the source: enough to print it.
type pred struct {
	field string
	op    op
	vals  []value
}

func (p *pred) format(b *strings.Builder) {
	b.WriteString(p.field)
	switch p.op {
	case opBare:
	case opExists:
		b.WriteString(" exists")
	case opIn:
		b.WriteString(" in (")
		for i, v := range p.vals {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quote(v.text))
		}
		b.WriteByte(')')
	default:
		b.WriteByte(' ')
		b.WriteString(p.op.String())
		b.WriteByte(' ')
		b.WriteString(quote(p.vals[0].text))
	}
}

type andNode struct{ kids []node }

func (n *andNode) match(e *event.Event, env Env) bool {
	for _, k := range n.kids {
		if !k.match(e, env) {
			return false
		}
	}
	return true
}

func (n *andNode) format(b *strings.Builder) {
	for i, k := range n.kids {
		if i > 0 {
			b.WriteString(" and ")
		}
		if _, ok := k.(*orNode); ok {
			b.WriteByte('(')
			k.format(b)
			b.WriteByte(')')
		} else {
			k.format(b)
		}
	}
}

type orNode struct{ kids []node }

func (n *orNode) match(e *event.Event, env Env) bool {
	for _, k := range n.kids {
		if k.match(e, env) {
			return true
		}
	}
	return false
}

func (n *orNode) format(b *strings.Builder) {
	for i, k := range n.kids {
		if i > 0 {
			b.WriteString(" or ")
		}
		k.format(b)
	}
}

type notNode struct{ kid node }

func (n *notNode) match(e *event.Event, env Env) bool { return !n.kid.match(e, env) }

func (n *notNode) format(b *strings.Builder) {
	b.WriteString("not ")
	switch n.kid.(type) {
	case *andNode, *orNode:
		b.WriteByte('(')
		n.kid.format(b)
		b.WriteByte(')')
	default:
		n.kid.format(b)
	}
}

type textNode struct {
	pred
	get  func(*event.Event, Env) (string, bool)
	lits []string // normalized; lowered for icontains
}

func (n *textNode) match(e *event.Event, env Env) bool {
	s, ok := n.get(e, env)
	if !ok {
		return false
	}
	switch n.op {
	case opEq, opIn:
		return slices.Contains(n.lits, s)
	case opNe:
		return s != n.lits[0]
	case opContains:
		return strings.Contains(s, n.lits[0])
	case opIContains:
		return containsFold(s, n.lits[0])
	case opStartsWith:
		return strings.HasPrefix(s, n.lits[0])
	case opEndsWith:
		return strings.HasSuffix(s, n.lits[0])
	}
	return false
}

// containsFold is strings.Contains ignoring case, without the allocation of
// lowering s in the usual all-ASCII case. lower is already lower case.
func containsFold(s, lower string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return strings.Contains(strings.ToLower(s), lower)
		}
	}
	for i := 0; i < len(lower); i++ {
		if lower[i] >= utf8.RuneSelf {
			return strings.Contains(strings.ToLower(s), lower)
		}
	}
	n := len(lower)
outer:
	for i := 0; i+n <= len(s); i++ {
		for j := 0; j < n; j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != lower[j] {
				continue outer
			}
		}
		return true
	}
	return false
}

type numNode struct {
	pred
	get    func(*event.Event, Env) (uint64, bool)
	signed bool
	lits   []numLit
}

func (n *numNode) match(e *event.Event, env Env) bool {
	v, ok := n.get(e, env)
	if !ok {
		return false
	}
	return n.compare(v, n.signed)
}

func (n *numNode) compare(v uint64, signed bool) bool {
	switch n.op {
	case opEq, opIn:
		for _, l := range n.lits {
			if cmpNum(v, signed, l) == 0 {
				return true
			}
		}
		return false
	case opNe:
		return cmpNum(v, signed, n.lits[0]) != 0
	case opLt:
		return cmpNum(v, signed, n.lits[0]) < 0
	case opLe:
		return cmpNum(v, signed, n.lits[0]) <= 0
	case opGt:
		return cmpNum(v, signed, n.lits[0]) > 0
	case opGe:
		return cmpNum(v, signed, n.lits[0]) >= 0
	}
	return false
}

type flagNode struct {
	pred
	get  func(*event.Event, Env) (bool, bool)
	want bool
}

func (n *flagNode) match(e *event.Event, env Env) bool {
	v, ok := n.get(e, env)
	return ok && v == n.want
}

type existsNode struct {
	pred
	has func(*event.Event, Env) bool
}

func (n *existsNode) match(e *event.Event, env Env) bool { return n.has(e, env) }

// argLit is one literal compared with evt.arg.<name>: arguments are both a
// number and a rendered text, and the literal's form picks which is meant.
type argLit struct {
	isNum  bool
	signed bool
	num    numLit
	text   string
}

func newArgNum(l numLit) argLit {
	// Registers carry no sign, but the arguments users compare numerically
	// are mostly fds and ints (fd < 0, dirfd = -100), so compare as int64
	// unless the literal only fits a uint64.
	return argLit{isNum: true, signed: l.neg || l.u <= 1<<63-1, num: l}
}

type argNode struct {
	pred
	arg  string
	lits []argLit
}

func (n *argNode) match(e *event.Event, env Env) bool {
	if e.Kind != event.KindSyscall {
		return false
	}
	num, text, ok := event.ArgValue(env.Arch(), &e.Syscall, n.arg)
	if !ok {
		return false
	}
	l := n.lits[0]
	switch n.op {
	case opEq, opIn:
		for _, l := range n.lits {
			if l.isNum && cmpNum(num, l.signed, l.num) == 0 || !l.isNum && text == l.text {
				return true
			}
		}
		return false
	case opNe:
		if l.isNum {
			return cmpNum(num, l.signed, l.num) != 0
		}
		return text != l.text
	case opLt:
		return cmpNum(num, l.signed, l.num) < 0
	case opLe:
		return cmpNum(num, l.signed, l.num) <= 0
	case opGt:
		return cmpNum(num, l.signed, l.num) > 0
	case opGe:
		return cmpNum(num, l.signed, l.num) >= 0
	case opContains:
		return strings.Contains(text, l.text)
	case opIContains:
		return containsFold(text, l.text)
	case opStartsWith:
		return strings.HasPrefix(text, l.text)
	case opEndsWith:
		return strings.HasSuffix(text, l.text)
	}
	return false
}

// kindMask is a set of event kinds.
type kindMask uint64

func (m kindMask) has(k event.Kind) bool { return k < 64 && m&(1<<k) != 0 }

type kindNode struct {
	pred
	neg   bool // !=
	kinds kindMask
}

func (n *kindNode) match(e *event.Event, _ Env) bool { return n.kinds.has(e.Kind) != n.neg }

// arches are the syscall tables evt.type names are resolved against at
// Parse time; events from any other Arch fall back to comparing names.
var arches = [...]event.Arch{event.ArchAMD64, event.ArchARM64}

const archSlots = 4 // > the largest Arch in arches

// nrSet is a set of syscall numbers, a bitmap for the small numbers every
// real table uses and a list for anything else.
type nrSet struct {
	bits  []uint64
	extra []uint32
}

const nrBitmapMax = 4096

func (s *nrSet) add(nr uint32) {
	if nr >= nrBitmapMax {
		s.extra = append(s.extra, nr)
		return
	}
	w := int(nr / 64)
	for len(s.bits) <= w {
		s.bits = append(s.bits, 0)
	}
	s.bits[w] |= 1 << (nr % 64)
}

func (s *nrSet) has(nr uint32) bool {
	if w := nr / 64; w < uint32(len(s.bits)) {
		return s.bits[w]&(1<<(nr%64)) != 0
	}
	return len(s.extra) > 0 && slices.Contains(s.extra, nr)
}

// typeNode is evt.type =, != or in: syscall names become numbers per arch,
// the other kinds a mask, so matching is a couple of bit tests.
type typeNode struct {
	pred
	neg      bool // !=
	kinds    kindMask
	nrs      [archSlots]nrSet
	resolved [archSlots]bool
	names    []string
}

func (n *typeNode) match(e *event.Event, env Env) bool {
	if e.Kind != event.KindSyscall {
		return n.kinds.has(e.Kind) != n.neg
	}
	a := env.Arch()
	if int(a) < archSlots && n.resolved[a] {
		return n.nrs[a].has(e.Syscall.Nr) != n.neg
	}
	return slices.Contains(n.names, event.SyscallName(a, e.Syscall.Nr)) != n.neg
}

// valueError is a bad literal; the parser turns it into a SyntaxError that
// points at vals[i].
type valueError struct {
	i   int
	msg string
}

func (e *valueError) Error() string { return e.msg }

func kindList(withSyscall bool) string {
	var names []string
	for k := event.Kind(0); k < 64; k++ {
		if s := k.String(); s != "unknown" && (withSyscall || k != event.KindSyscall) {
			names = append(names, s)
		}
	}
	return strings.Join(names, ", ")
}

func typeSet(p pred, neg bool) (node, error) {
	n := &typeNode{pred: p, neg: neg}
	for _, a := range arches {
		n.resolved[a] = true
	}
	for i, v := range p.vals {
		known := false
		if k, ok := event.KindByName(v.text); ok && k != event.KindSyscall && k < 64 {
			n.kinds |= 1 << k
			known = true
		}
		for _, a := range arches {
			if nr, ok := event.SyscallByName(a, v.text); ok {
				n.nrs[a].add(nr)
				known = true
			}
		}
		if !known {
			msg := fmt.Sprintf("unknown event type %q: not a syscall name nor one of %s", v.text, kindList(false))
			if v.text == "syscall" {
				msg = `evt.type is a syscall's name; use evt.kind = syscall for all syscalls`
			}
			return nil, &valueError{i, msg}
		}
		n.names = append(n.names, v.text)
	}
	return n, nil
}

func kindSet(p pred, neg bool) (node, error) {
	n := &kindNode{pred: p, neg: neg}
	for i, v := range p.vals {
		k, ok := event.KindByName(v.text)
		if !ok || k >= 64 {
			return nil, &valueError{i, fmt.Sprintf("unknown event kind %q: expected one of %s", v.text, kindList(true))}
		}
		n.kinds |= 1 << k
	}
	return n, nil
}
