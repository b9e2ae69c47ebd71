package strace

import (
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/event"
)

func errnoByName(s string) (int, bool) { return event.ErrnoByName(s) }

// closeParen returns the index in s of the parenthesis that closes one
// opened before s (depth 1), skipping strings, comments and nested
// brackets; -1 if s ends first (a line cut short).
func closeParen(s string, from int) int {
	depth := 1
	for i := from; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			j := skipString(s, i)
			if j < 0 {
				return -1
			}
			i = j
		case '/':
			if strings.HasPrefix(s[i:], "/*") {
				j := strings.Index(s[i+2:], "*/")
				if j < 0 {
					return -1
				}
				i += j + 3
			}
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
			if depth == 0 {
				if c != ')' {
					return -1
				}
				return i
			}
		}
	}
	return -1
}

// skipString returns the index of the quote that closes the string opening
// at s[i], or -1.
func skipString(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return -1
}

// splitArgs cuts an argument list at its top-level commas.
func splitArgs(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			if j := skipString(s, i); j >= 0 {
				i = j
			} else {
				i = len(s)
			}
		case '/':
			if strings.HasPrefix(s[i:], "/*") {
				if j := strings.Index(s[i+2:], "*/"); j >= 0 {
					i += j + 3
				} else {
					i = len(s)
				}
			}
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if last := strings.TrimSpace(s[start:]); last != "" || len(out) > 0 {
		out = append(out, last)
	}
	return out
}

// stripComments removes -X verbose's "/* O_CLOEXEC */" and execve's
// "/* 35 vars */".
func stripComments(s string) string {
	for {
		i := strings.Index(s, "/*")
		if i < 0 {
			return strings.TrimSpace(s)
		}
		j := strings.Index(s[i:], "*/")
		if j < 0 {
			return strings.TrimSpace(s[:i])
		}
		s = s[:i] + s[i+j+2:]
	}
}

// stripAnnotation removes -y/-yy's "<path>" after a descriptor:
// "3</etc/passwd>", "AT_FDCWD</tmp>", "4<TCP:[1.2.3.4:5->6.7.8.9:10]>".
func stripAnnotation(s string) string {
	i := strings.IndexByte(s, '<')
	if i <= 0 || !strings.HasSuffix(s, ">") {
		return s
	}
	return s[:i]
}

// parseInt reads a number as strace prints one: decimal, 0x hex, 0 octal
// (modes), negative.
func parseInt(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	neg := false
	if s[0] == '-' {
		neg, s = true, s[1:]
	}
	u, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		return -int64(u), true
	}
	return int64(u), true
}

// unquote reads a C string as strace prints it ("a\tb\x01\0") and says
// whether strace cut it at -s ("..." after the quote). ok is false when s is
// not a string.
func unquote(s string) (b []byte, trunc, ok bool) {
	if len(s) < 2 || s[0] != '"' {
		return nil, false, false
	}
	end := skipString(s, 0)
	if end < 0 {
		return nil, false, false
	}
	tail := s[end+1:]
	switch tail {
	case "":
	case "...":
		trunc = true
	default:
		return nil, false, false
	}
	b = make([]byte, 0, end)
	for i := 1; i < end; i++ {
		c := s[i]
		if c != '\\' || i+1 >= end {
			b = append(b, c)
			continue
		}
		i++
		switch c = s[i]; c {
		case 'n':
			b = append(b, '\n')
		case 't':
			b = append(b, '\t')
		case 'r':
			b = append(b, '\r')
		case 'v':
			b = append(b, '\v')
		case 'f':
			b = append(b, '\f')
		case 'a':
			b = append(b, '\a')
		case 'b':
			b = append(b, '\b')
		case 'x':
			n, j := 0, i+1
			for ; j < end && j < i+3 && isHex(s[j]); j++ {
				n = n*16 + hexVal(s[j])
			}
			b = append(b, byte(n))
			i = j - 1
		default:
			if c >= '0' && c <= '7' {
				n, j := 0, i
				for ; j < end && j < i+3 && s[j] >= '0' && s[j] <= '7'; j++ {
					n = n*8 + int(s[j]-'0')
				}
				b = append(b, byte(n))
				i = j - 1
			} else {
				b = append(b, c) // \\ \" \'
			}
		}
	}
	return b, trunc, true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func hexVal(c byte) int {
	switch {
	case c >= 'a':
		return int(c-'a') + 10
	case c >= 'A':
		return int(c-'A') + 10
	}
	return int(c - '0')
}

// stringList reads execve's argv, ["ls", "-l"], possibly cut by strace
// (["a", ...] or a last string with "..."), which cut reports. ok is false
// for anything else (an address, NULL).
func stringList(s string) (out []string, cut, ok bool) {
	s = stripComments(s)
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return nil, false, false
	}
	for _, a := range splitArgs(s[1 : len(s)-1]) {
		if a == "..." {
			cut = true
			break
		}
		b, trunc, ok := unquote(a)
		if !ok {
			return nil, false, false
		}
		cut = cut || trunc
		out = append(out, string(b))
	}
	if out == nil {
		out = []string{}
	}
	return out, cut, true
}

// named splits "flags=CLONE_VM|SIGCHLD" into its name and value; name is ""
// when the argument is not named.
func named(s string) (name, value string) {
	i := strings.IndexByte(s, '=')
	if i <= 0 || !isIdent(s[:i]) {
		return "", s
	}
	return s[:i], s[i+1:]
}

// structField finds "name=value" at the top level of a structure printed
// as {a=1, name=value, ...}.
func structField(s, name string) (string, bool) {
	s = strings.TrimSpace(s)
	if len(s) < 2 || s[0] != '{' {
		return "", false
	}
	body := s[1:]
	if i := strings.LastIndexByte(body, '}'); i >= 0 {
		body = body[:i]
	}
	for _, f := range splitArgs(body) {
		if n, v := named(f); n == name {
			return v, true
		}
	}
	return "", false
}
