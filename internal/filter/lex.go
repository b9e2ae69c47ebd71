package filter

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF    tokKind = iota
	tWord           // field, keyword or unquoted value
	tString         // quoted value, escapes already resolved
	tLParen
	tRParen
	tComma
	tCmp // = == != < <= > >=
	tBang
	tAnd // &&
	tOr  // ||
)

type token struct {
	kind tokKind
	text string
	pos  int // byte offset in the expression
}

type lexer struct {
	src string
	pos int
}

func isSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return false
}

// endsWord decides where an unquoted word stops. A single '&' or '|' stays
// inside the word so that flag sets such as O_WRONLY|O_CREAT need no quotes;
// only the doubled forms are operators.
func endsWord(s string, i int) bool {
	switch c := s[i]; c {
	case ' ', '\t', '\n', '\r', '\v', '\f', '(', ')', ',', '=', '<', '>', '!', '"', '\'':
		return true
	case '&', '|':
		return i+1 < len(s) && s[i+1] == c
	}
	return false
}

func (l *lexer) next() (token, error) {
	for l.pos < len(l.src) && isSpace(l.src[l.pos]) {
		l.pos++
	}
	start := l.pos
	if start >= len(l.src) {
		return token{kind: tEOF, pos: len(l.src)}, nil
	}
	emit := func(k tokKind, n int) (token, error) {
		l.pos += n
		return token{kind: k, text: l.src[start:l.pos], pos: start}, nil
	}
	c := l.src[start]
	var c1 byte
	if start+1 < len(l.src) {
		c1 = l.src[start+1]
	}
	switch c {
	case '(':
		return emit(tLParen, 1)
	case ')':
		return emit(tRParen, 1)
	case ',':
		return emit(tComma, 1)
	case '=', '<', '>':
		if c1 == '=' {
			return emit(tCmp, 2)
		}
		return emit(tCmp, 1)
	case '!':
		if c1 == '=' {
			return emit(tCmp, 2)
		}
		return emit(tBang, 1)
	case '&':
		if c1 == '&' {
			return emit(tAnd, 2)
		}
	case '|':
		if c1 == '|' {
			return emit(tOr, 2)
		}
	case '"', '\'':
		return l.quoted()
	}
	for l.pos < len(l.src) && !endsWord(l.src, l.pos) {
		l.pos++
	}
	return token{kind: tWord, text: l.src[start:l.pos], pos: start}, nil
}

func (l *lexer) errAt(off int, format string, args ...any) error {
	return &SyntaxError{Expr: l.src, Col: column(l.src, off), Msg: fmt.Sprintf(format, args...)}
}

func (l *lexer) quoted() (token, error) {
	start := l.pos
	q := l.src[start]
	l.pos++
	var b strings.Builder
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == q:
			l.pos++
			return token{kind: tString, text: b.String(), pos: start}, nil
		case c != '\\':
			b.WriteByte(c)
			l.pos++
			continue
		}
		if l.pos+1 >= len(l.src) {
			break
		}
		switch e := l.src[l.pos+1]; e {
		case '\\', '"', '\'':
			b.WriteByte(e)
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case 'u', 'U':
			// Go's %q writes these, and callers build expressions with it.
			n := 4
			if e == 'U' {
				n = 8
			}
			r, ok := unhexN(l.src, l.pos+2, n)
			if !ok || !utf8.ValidRune(r) {
				return token{}, l.errAt(l.pos, `\%c needs %d hex digits of a valid code point`, e, n)
			}
			b.WriteRune(r)
			l.pos += n
		case 'x':
			hi, ok1 := unhex(l.src, l.pos+2)
			lo, ok2 := unhex(l.src, l.pos+3)
			if !ok1 || !ok2 {
				return token{}, l.errAt(l.pos, `\x needs two hex digits`)
			}
			b.WriteByte(hi<<4 | lo)
			l.pos += 2
		default:
			r, _ := utf8.DecodeRuneInString(l.src[l.pos+1:])
			return token{}, l.errAt(l.pos, `unknown escape "\%c" (use \\, \", \', \n, \t, \r, \xHH or \uHHHH)`, r)
		}
		l.pos += 2
	}
	return token{}, l.errAt(start, "unterminated string: missing closing %c", q)
}

func unhexN(s string, i, n int) (rune, bool) {
	var r rune
	for j := range n {
		d, ok := unhex(s, i+j)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

func unhex(s string, i int) (byte, bool) {
	if i >= len(s) {
		return 0, false
	}
	switch c := s[i]; {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// quote renders a value so that the lexer reads it back unchanged: bare when
// that is unambiguous, double-quoted with escapes otherwise.
func quote(s string) string {
	if !needsQuote(s) {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		c := s[i]
		switch {
		case c == '\\' || c == '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\r':
			b.WriteString(`\r`)
		case c < 0x20 || c == 0x7f || (r == utf8.RuneError && n == 1):
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	b.WriteByte('"')
	return b.String()
}

func needsQuote(s string) bool {
	if s == "" || isBoolKeyword(s) || !utf8.ValidString(s) {
		return true
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c == '\\' || endsWord(s, i) {
			return true
		}
	}
	return false
}

// isBoolKeyword reports words that cannot be bare values because the parser
// would read them as boolean operators.
func isBoolKeyword(s string) bool {
	return strings.EqualFold(s, "and") || strings.EqualFold(s, "or") || strings.EqualFold(s, "not")
}
