package filter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/event"
)

// maxDepth bounds nesting so that a hostile expression cannot make Parse or
// Match recurse without limit.
const maxDepth = 100

type parser struct {
	lx    lexer
	tok   token // the next token, not yet consumed
	prev  token // the last token consumed, to say what a value was expected after
	depth int
}

// Parse compiles a filter expression. Its errors are *SyntaxError.
func Parse(expr string) (*Filter, error) {
	p := &parser{lx: lexer{src: expr}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tEOF {
		return nil, p.errAt(p.tok.pos, "empty expression")
	}
	root, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		msg := "expected and, or or the end of the expression"
		if p.tok.kind == tRParen {
			msg = `")" without a matching "("`
		}
		return nil, p.errAt(p.tok.pos, "unexpected %s: %s", describe(p.tok), msg)
	}
	return &Filter{root: root}, nil
}

func (p *parser) advance() error {
	t, err := p.lx.next()
	if err != nil {
		return err
	}
	p.prev, p.tok = p.tok, t
	return nil
}

func (p *parser) errAt(off int, format string, args ...any) error {
	return p.lx.errAt(off, format, args...)
}

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of expression"
	case tString:
		return "string " + strconv.Quote(t.text)
	}
	return strconv.Quote(t.text)
}

// got adds what was found instead, unless it is the end, which the column
// already shows.
func got(t token) string {
	if t.kind == tEOF {
		return ""
	}
	return ", got " + describe(t)
}

func (p *parser) isWord(w string) bool {
	return p.tok.kind == tWord && strings.EqualFold(p.tok.text, w)
}

func (p *parser) or() (node, error) {
	return p.chain(tOr, "or", (*parser).and, func(k []node) node { return &orNode{k} })
}

func (p *parser) and() (node, error) {
	return p.chain(tAnd, "and", (*parser).unary, func(k []node) node { return &andNode{k} })
}

// chain parses operands joined by one boolean operator into a single n-ary
// node, iterating rather than recursing so long chains cost no stack.
func (p *parser) chain(sym tokKind, word string, operand func(*parser) (node, error), mk func([]node) node) (node, error) {
	first, err := operand(p)
	if err != nil {
		return nil, err
	}
	kids := []node{first}
	for p.tok.kind == sym || p.isWord(word) {
		if err := p.advance(); err != nil {
			return nil, err
		}
		n, err := operand(p)
		if err != nil {
			return nil, err
		}
		kids = append(kids, n)
	}
	if len(kids) == 1 {
		return first, nil
	}
	return mk(kids), nil
}

func (p *parser) enter() error {
	if p.depth++; p.depth > maxDepth {
		return p.errAt(p.tok.pos, "expression nested more than %d deep", maxDepth)
	}
	return nil
}

func (p *parser) unary() (node, error) {
	if p.tok.kind != tBang && !p.isWord("not") {
		return p.primary()
	}
	if err := p.enter(); err != nil {
		return nil, err
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	kid, err := p.unary()
	if err != nil {
		return nil, err
	}
	p.depth--
	return &notNode{kid}, nil
}

func (p *parser) primary() (node, error) {
	switch t := p.tok; {
	case t.kind == tLParen:
		if err := p.enter(); err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			return nil, p.errAt(p.tok.pos, `expected ")" to close "(" at column %d%s`, column(p.lx.src, t.pos), got(p.tok))
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		p.depth--
		return n, nil
	case t.kind == tWord && !isBoolKeyword(t.text):
		return p.predicate()
	case p.prev.text != "":
		return nil, p.errAt(t.pos, `expected a field, "(" or "not" after %q%s`, p.prev.text, got(t))
	}
	return nil, p.errAt(p.tok.pos, `expected a field, "(" or "not"%s`, got(p.tok))
}

func (p *parser) lookup(t token) (*field, error) {
	if name, ok := strings.CutPrefix(t.text, argPrefix); ok {
		if name == "" {
			return nil, p.errAt(t.pos+len(argPrefix), "expected a syscall argument name after %q", argPrefix)
		}
		if !knownArg(name) {
			return nil, p.errAt(t.pos+len(argPrefix), "no syscall has an argument named %q", name)
		}
		return &field{arg: name}, nil
	}
	if f := fields[t.text]; f != nil {
		return f, nil
	}
	return nil, p.errAt(t.pos, "unknown field %q; fields are %s", t.text, fieldNames())
}

var wordOps = map[string]op{
	"contains": opContains, "icontains": opIContains, "startswith": opStartsWith,
	"endswith": opEndsWith, "in": opIn, "exists": opExists,
}

var cmpOps = map[string]op{"=": opEq, "==": opEq, "!=": opNe, "<": opLt, "<=": opLe, ">": opGt, ">=": opGe}

func (p *parser) predicate() (node, error) {
	ft := p.tok
	f, err := p.lookup(ft)
	if err != nil {
		return nil, err
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	ot := p.tok
	var o op
	var ok bool
	switch ot.kind {
	case tCmp:
		o, ok = cmpOps[ot.text]
	case tWord:
		o, ok = wordOps[strings.ToLower(ot.text)]
	}
	if !ok {
		if f.flag != nil {
			return compile(p, f, pred{field: ft.text, op: opBare}, ot)
		}
		return nil, p.errAt(ot.pos, "expected an operator after %s%s", ft.text, got(ot))
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	pr := pred{field: ft.text, op: o}
	switch o {
	case opExists:
	case opIn:
		if p.tok.kind != tLParen {
			return nil, p.errAt(p.tok.pos, `expected "(" after "in"%s`, got(p.tok))
		}
		open := p.tok
		for {
			if err := p.advance(); err != nil {
				return nil, err
			}
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			pr.vals = append(pr.vals, v)
			if p.tok.kind == tRParen {
				break
			}
			if p.tok.kind != tComma {
				return nil, p.errAt(p.tok.pos, `expected "," or ")" to close "(" at column %d%s`, column(p.lx.src, open.pos), got(p.tok))
			}
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	default:
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		pr.vals = []value{v}
	}
	return compile(p, f, pr, ot)
}

// value consumes one literal.
func (p *parser) value() (value, error) {
	t := p.tok
	if t.kind != tString && (t.kind != tWord || isBoolKeyword(t.text)) {
		return value{}, p.errAt(t.pos, "expected value after %q%s", p.prev.text, got(t))
	}
	if err := p.advance(); err != nil {
		return value{}, err
	}
	return value{text: t.text, pos: t.pos}, nil
}

// compile type-checks a comparison and builds its node, resolving literals
// now so that Match never has to. ot is the operator token, or the token
// after a bare bool field.
func compile(p *parser, f *field, pr pred, ot token) (node, error) {
	bad := func(i int, err error) error {
		var ve *valueError
		if errors.As(err, &ve) {
			i, err = ve.i, ve
		}
		return p.errAt(pr.vals[i].pos, "%s: %v", pr.field, err)
	}
	wrongOp := func(wants string) error {
		return p.errAt(ot.pos, "operator %q needs %s, and %s is %s", ot.text, wants, pr.field, f.typeName())
	}
	if pr.op == opExists {
		return &existsNode{pred: pr, has: f.presence()}, nil
	}
	switch {
	case f.arg != "":
		n := &argNode{pred: pr, arg: f.arg}
		for i, v := range pr.vals {
			l := argLit{text: v.text}
			if !pr.op.textual() {
				num, err := parseInt(v.text)
				if err != nil && (err != errNotNumber || pr.op.ordering()) {
					if err == errNotNumber {
						err = fmt.Errorf("expected a number, got %q", v.text)
					}
					return nil, bad(i, err)
				}
				if err == nil {
					l = newArgNum(num)
				}
			}
			if pr.op == opIContains {
				l.text = strings.ToLower(l.text)
			}
			n.lits = append(n.lits, l)
		}
		return n, nil

	case f.flag != nil:
		want := true
		switch pr.op {
		case opBare:
		case opEq, opNe:
			b, err := boolLit(pr.vals[0].text)
			if err != nil {
				return nil, bad(0, err)
			}
			want = b == (pr.op == opEq)
		default:
			return nil, wrongOp("a number or text")
		}
		return &flagNode{pred: pr, get: f.flag, want: want}, nil

	case f.num != nil:
		if pr.op.textual() {
			return nil, wrongOp("text")
		}
		conv := f.lit
		if conv == nil {
			conv = plainLit
		}
		n := &numNode{pred: pr, get: f.num, signed: f.signed}
		for i, v := range pr.vals {
			l, err := conv(v.text)
			if err != nil {
				return nil, bad(i, err)
			}
			n.lits = append(n.lits, l)
		}
		return n, nil
	}

	if pr.op.ordering() {
		return nil, wrongOp("a number")
	}
	if f.set != nil && (pr.op == opEq || pr.op == opNe || pr.op == opIn) {
		n, err := f.set(pr, pr.op == opNe)
		if err != nil {
			return nil, bad(0, err)
		}
		return n, nil
	}
	n := &textNode{pred: pr, get: f.text}
	for _, v := range pr.vals {
		s := v.text
		if f.norm != nil {
			s = f.norm(s)
		}
		if pr.op == opIContains {
			s = strings.ToLower(s)
		}
		n.lits = append(n.lits, s)
	}
	return n, nil
}

// presence reports whether an event has the field at all.
func (f *field) presence() func(*event.Event, Env) bool {
	switch {
	case f.arg != "":
		name := f.arg
		return func(e *event.Event, env Env) bool {
			if e.Kind != event.KindSyscall {
				return false
			}
			_, _, ok := event.ArgValue(env.Arch(), &e.Syscall, name)
			return ok
		}
	case f.num != nil:
		return func(e *event.Event, env Env) bool { _, ok := f.num(e, env); return ok }
	case f.flag != nil:
		return func(e *event.Event, env Env) bool { _, ok := f.flag(e, env); return ok }
	}
	return func(e *event.Event, env Env) bool { _, ok := f.text(e, env); return ok }
}
