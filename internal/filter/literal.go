package filter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sysray/sysray/internal/event"
)

// numLit is an integer literal. Fields are uint64 or int64 and literals may
// be negative or above MaxInt64, so keeping the sign apart lets cmpNum
// compare by mathematical value instead of by whichever Go type wraps.
type numLit struct {
	neg bool   // u holds the two's complement bits of a negative value
	u   uint64 // the value when !neg
}

func (l numLit) i64() int64 { return int64(l.u) }

// cmpNum compares a field value with a literal: -1, 0 or +1.
func cmpNum(v uint64, signed bool, l numLit) int {
	if signed {
		sv := int64(v)
		if !l.neg && l.u > 1<<63-1 {
			return -1
		}
		return cmp3(sv, l.i64())
	}
	if l.neg {
		return 1
	}
	return cmp3(v, l.u)
}

func cmp3[T int64 | uint64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

var errNotNumber = errors.New("not a number")

// parseInt reads C-style integers (0x hex, leading-0 octal, a sign) because
// that is how strace prints modes and flags that users paste back.
func parseInt(s string) (numLit, error) {
	if strings.HasPrefix(s, "-") {
		i, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			return numLit{}, numErr(s, err)
		}
		return numLit{neg: i < 0, u: uint64(i)}, nil
	}
	u, err := strconv.ParseUint(strings.TrimPrefix(s, "+"), 0, 64)
	if err != nil {
		return numLit{}, numErr(s, err)
	}
	return numLit{u: u}, nil
}

func numErr(s string, err error) error {
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("number %s out of range", s)
	}
	return errNotNumber
}

// plainLit is the literal conversion of fields that only take numbers.
func plainLit(s string) (numLit, error) {
	l, err := parseInt(s)
	if err == errNotNumber {
		return l, fmt.Errorf("expected a number, got %q", s)
	}
	return l, err
}

// durationLit reads latencies; a bare number is nanoseconds, like the field.
func durationLit(s string) (numLit, error) {
	if l, err := parseInt(s); err != errNotNumber {
		return l, err
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return numLit{}, fmt.Errorf("expected a duration such as 100ms, 250us, 1.5s or a number of ns, got %q", s)
	}
	return numLit{neg: d < 0, u: uint64(d)}, nil
}

// errnoLit lets users write the error name they see in the trace; syscalls
// return errors negated, so ENOENT is -2.
func errnoLit(s string) (numLit, error) {
	if l, err := parseInt(s); err != errNotNumber {
		return l, err
	}
	n, ok := event.ErrnoByName(s)
	if !ok {
		n, ok = event.ErrnoByName(strings.ToUpper(s))
	}
	if !ok || n <= 0 {
		return numLit{}, fmt.Errorf("expected a number or an errno name such as ENOENT, got %q", s)
	}
	return numLit{neg: true, u: uint64(-int64(n))}, nil
}

// signalLit takes SIGSEGV, SEGV, segv or 11.
func signalLit(s string) (numLit, error) {
	if l, err := parseInt(s); err != errNotNumber {
		return l, err
	}
	up := strings.ToUpper(s)
	for _, name := range []string{s, up, "SIG" + up} {
		if n, ok := event.SignalByName(name); ok {
			return numLit{neg: n < 0, u: uint64(int64(n))}, nil
		}
	}
	return numLit{}, fmt.Errorf("expected a number or a signal name such as SIGSEGV, got %q", s)
}

func boolLit(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("expected true or false, got %q", s)
}
