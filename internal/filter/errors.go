package filter

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// SyntaxError reports an expression that cannot be parsed, and where.
type SyntaxError struct {
	Expr string
	Col  int // 1-based, counted in runes; len+1 means "at the end"
	Msg  string
}

// Error is one line a log can hold, then the expression and a caret under
// the offending column for a terminal.
func (e *SyntaxError) Error() string {
	shown := printable(e.Expr)
	col := e.Col
	if col < 1 {
		col = 1
	}
	return fmt.Sprintf("filter: column %d: %s: %s\n%s\n%s^", e.Col, e.Msg, shown, shown, strings.Repeat(" ", col-1))
}

// printable keeps one display column per rune of expr, so that the caret,
// which is placed by rune count, stays under the right character, and so that
// a newline in the expression cannot break the first line of the message.
func printable(expr string) string {
	var b strings.Builder
	for _, r := range expr {
		switch {
		case r == utf8.RuneError:
			b.WriteRune(utf8.RuneError)
		case r < 0x20 || r == 0x7f:
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// column turns a byte offset into the 1-based rune column of SyntaxError.
func column(expr string, off int) int {
	if off > len(expr) {
		off = len(expr)
	}
	return utf8.RuneCountInString(expr[:off]) + 1
}
