package strace

import (
	"errors"
	"strconv"
	"strings"
)

// LineKind says what a line of strace output holds.
type LineKind uint8

const (
	LineCall       LineKind = iota + 1 // name(args) = ret: a whole call
	LineUnfinished                     // name(args <unfinished ...>: a call another thread's line cut
	LineResumed                        // <... name resumed>rest) = ret: its second half
	LineSignal                         // --- SIGxxx {siginfo} ---
	LineExited                         // +++ exited with N +++
	LineKilled                         // +++ killed by SIGxxx [(core dumped)] +++
	LineOther                          // a line strace writes that carries no event (stops, superseded by execve)
)

// Line is one parsed line. Times are Unix ns (from -ttt) or ns since
// midnight (from -t/-tt); HasTime is false when strace printed none.
type Line struct {
	Kind    LineKind
	TID     uint32 // 0 when the line has no pid column (strace without -f)
	Time    uint64
	HasTime bool

	Name string // syscall name, or signal name for LineSignal/LineKilled
	Args string // the argument text as printed (for LineResumed, what follows "resumed>")

	// The return, for LineCall and LineResumed.
	RetText  string // as printed, after "= "
	Ret      int64  // -errno for failures
	NoReturn bool   // "= ?": the call did not return (exit, exit_group, a thread killed inside it)
	Latency  uint64 // from -T's <seconds>
	HasLat   bool

	Status int  // LineExited: the exit code
	Core   bool // LineKilled: core dumped
}

// errNotStrace marks a line that does not have strace's shape at all.
var errNotStrace = errors.New("not a line of strace output")

// Parse reads one line of strace output (without its newline).
func Parse(s string) (Line, error) {
	var l Line
	s = strings.TrimRight(s, "\r")
	rest := strings.TrimLeft(s, " ") // -r pads its seconds
	if strings.HasPrefix(rest, "> ") {
		// A frame of strace -k's user stack, under the call it belongs
		// to: not kept (docs/import.md).
		l.Kind = LineOther
		return l, nil
	}
	// The pid column: "[pid  123] " when strace writes to a terminal or
	// stderr, "123  " in a -o file with -f.
	if r, ok := strings.CutPrefix(rest, "[pid"); ok {
		end := strings.IndexByte(r, ']')
		if end < 0 {
			return l, errNotStrace
		}
		n, err := strconv.ParseUint(strings.TrimSpace(r[:end]), 10, 32)
		if err != nil {
			return l, errNotStrace
		}
		l.TID = uint32(n)
		rest = strings.TrimLeft(r[end+1:], " ")
	} else if i := digits(rest); i > 0 && i < len(rest) && rest[i] == ' ' {
		n, err := strconv.ParseUint(rest[:i], 10, 32)
		if err != nil {
			return l, errNotStrace
		}
		l.TID = uint32(n)
		rest = strings.TrimLeft(rest[i:], " ")
	}
	// The timestamp: seconds.micro (-ttt, or -r's relative seconds) or
	// HH:MM:SS[.micro] (-t, -tt).
	if i := strings.IndexByte(rest, ' '); i > 0 && rest[0] >= '0' && rest[0] <= '9' {
		if t, ok := parseTime(rest[:i]); ok {
			l.Time, l.HasTime = t, true
			rest = strings.TrimLeft(rest[i:], " ")
		}
	}
	switch {
	case strings.HasPrefix(rest, "+++ "):
		return parseExit(l, rest)
	case strings.HasPrefix(rest, "--- "):
		return parseSignal(l, rest)
	case strings.HasPrefix(rest, "<... "):
		return parseResumed(l, rest)
	}
	return parseCall(l, rest)
}

func digits(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// parseTime reads "1795457949.265612" or "12:34:56.123456" into ns.
func parseTime(s string) (uint64, bool) {
	if strings.Count(s, ":") == 2 {
		parts := strings.SplitN(s, ":", 3)
		h, err1 := strconv.ParseUint(parts[0], 10, 8)
		m, err2 := strconv.ParseUint(parts[1], 10, 8)
		sec, ok := parseSeconds(parts[2])
		if err1 != nil || err2 != nil || !ok || h > 23 || m > 59 {
			return 0, false
		}
		return (h*3600+m*60)*1e9 + sec, true
	}
	return parseSeconds(s)
}

// parseSeconds reads "S[.fraction]" into ns without going through a float,
// which would lose the microseconds of a Unix time.
func parseSeconds(s string) (uint64, bool) {
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || digits(whole) != len(whole) || digits(frac) != len(frac) || len(frac) > 9 {
		return 0, false
	}
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || w > 1<<33 {
		return 0, false
	}
	ns := w * 1e9
	if frac != "" {
		f, _ := strconv.ParseUint(frac, 10, 64)
		for i := len(frac); i < 9; i++ {
			f *= 10
		}
		ns += f
	}
	return ns, true
}

func parseExit(l Line, rest string) (Line, error) {
	body, ok := strings.CutSuffix(strings.TrimPrefix(rest, "+++ "), " +++")
	if !ok {
		return l, errNotStrace
	}
	if v, ok := strings.CutPrefix(body, "exited with "); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return l, errNotStrace
		}
		l.Kind, l.Status = LineExited, n
		return l, nil
	}
	if v, ok := strings.CutPrefix(body, "killed by "); ok {
		v, l.Core = strings.CutSuffix(v, " (core dumped)")
		l.Kind, l.Name = LineKilled, v
		return l, nil
	}
	if body == "superseded by execve" {
		l.Kind = LineOther
		return l, nil
	}
	return l, errNotStrace
}

func parseSignal(l Line, rest string) (Line, error) {
	body, ok := strings.CutSuffix(strings.TrimPrefix(rest, "--- "), " ---")
	if !ok {
		return l, errNotStrace
	}
	if strings.HasPrefix(body, "stopped by ") {
		l.Kind = LineOther
		return l, nil
	}
	name, info, _ := strings.Cut(body, " ")
	if !strings.HasPrefix(name, "SIG") {
		return l, errNotStrace
	}
	l.Kind, l.Name, l.Args = LineSignal, name, info
	return l, nil
}

func parseResumed(l Line, rest string) (Line, error) {
	r := strings.TrimPrefix(rest, "<... ")
	name, after, ok := strings.Cut(r, " resumed>")
	if !ok || !isIdent(name) {
		return l, errNotStrace
	}
	l.Kind, l.Name = LineResumed, name
	// The rest of the arguments up to the call's closing parenthesis.
	end := closeParen(after, 0)
	if end < 0 {
		return l, errNotStrace
	}
	l.Args = after[:end]
	return parseReturn(l, after[end+1:])
}

func parseCall(l Line, rest string) (Line, error) {
	open := strings.IndexByte(rest, '(')
	if open <= 0 || !isIdent(rest[:open]) {
		return l, errNotStrace
	}
	l.Name = rest[:open]
	body := rest[open+1:]
	if a, ok := strings.CutSuffix(body, " <unfinished ...>"); ok {
		l.Kind, l.Args = LineUnfinished, strings.TrimRight(a, " ")
		return l, nil
	}
	end := closeParen(body, 0)
	if end < 0 {
		return l, errNotStrace
	}
	l.Kind, l.Args = LineCall, body[:end]
	return parseReturn(l, body[end+1:])
}

// parseReturn reads " = ret [errno (text)] [<latency>]".
func parseReturn(l Line, s string) (Line, error) {
	s = strings.TrimLeft(s, " ")
	v, ok := strings.CutPrefix(s, "= ")
	if !ok {
		return l, errNotStrace
	}
	if i := strings.LastIndex(v, " <"); i >= 0 && strings.HasSuffix(v, ">") {
		if ns, ok := parseSeconds(v[i+2 : len(v)-1]); ok {
			l.Latency, l.HasLat = ns, true
			v = v[:i]
		}
	}
	l.RetText = v
	tok, tail, _ := strings.Cut(v, " ")
	if tok == "?" {
		l.NoReturn = true
		// "= ? ERESTARTSYS (To be restarted ...)": the kernel restarts it.
		if n, ok := errnoOf(tail); ok {
			l.NoReturn, l.Ret = false, -int64(n)
		}
		return l, nil
	}
	// -yy's path may hold spaces, so cut at its start, not at its end.
	if i := strings.IndexByte(tok, '<'); i > 0 {
		tok = tok[:i]
	}
	n, ok := parseInt(tok)
	if !ok {
		return l, errNotStrace
	}
	l.Ret = n
	if n == -1 {
		if e, ok := errnoOf(tail); ok {
			l.Ret = -int64(e)
		}
	}
	return l, nil
}

// errnoOf reads "ENOENT (No such file ...)" or -X raw's "(errno 2)".
func errnoOf(s string) (int, bool) {
	if v, ok := strings.CutPrefix(s, "(errno "); ok {
		n, err := strconv.Atoi(strings.TrimSuffix(v, ")"))
		return n, err == nil && n > 0
	}
	name, _, _ := strings.Cut(s, " ")
	if !strings.HasPrefix(name, "E") {
		return 0, false
	}
	return errnoByName(name)
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
