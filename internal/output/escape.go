package output

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Escape makes a string that sysray does not control safe to print on a
// terminal: a process's name, a container's, a symbol's. The kernel lets a
// program give itself any name, and a name holding ESC or BEL would rewrite
// the terminal's title or colours when printed raw. Bytes that are not
// printable UTF-8 are written as Go escapes (\x1b, \a, \u202e), as paths
// and arguments already are inside their quotes, and a backslash is doubled
// so that the escaped form reads back to one name only.
func Escape(s string) string {
	if plain(s, false) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])>>4, 16))
			b.WriteString(strconv.FormatUint(uint64(s[i])&15, 16))
		case r == '\\':
			b.WriteString(`\\`)
		case strconv.IsPrint(r):
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(r) // '\x1b', '\a', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

// EscapeLines is Escape for text of several lines, such as a report: its
// newlines stay, and everything else that is not printable is escaped.
func EscapeLines(s string) string {
	if plain(s, true) {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Escape(l)
	}
	return strings.Join(lines, "\n")
}

// plain reports whether s is printable ASCII without a backslash (newlines
// allowed when lines is set), which is printed as it is: the common case,
// checked without allocating.
func plain(s string, lines bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\n' && lines {
			continue
		}
		if c < 0x20 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}
