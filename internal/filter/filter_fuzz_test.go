package filter

import (
	"errors"
	"testing"
	"unicode/utf8"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"evt.type = openat",
		"evt.type in (openat, open) and evt.res = ENOENT",
		"evt.type = accept4 and evt.latency > 100ms",
		"evt.failed and proc.name = nginx",
		"fd.name startswith /etc",
		"not (evt.kind = syscall or evt.latency <= 1.5ms) || !evt.failed",
		"evt.arg.flags contains O_CREAT && evt.arg.dirfd = -100",
		`proc.cmdline icontains "a \"b\"\x41" or container.id = host`,
		"sig = SIGSEGV or fault.addr >= 0x1000",
		"evt.latency >= 250us and not evt.latency > 2s",
		"evt.type = ",
		"(evt.type = openat",
		"'",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		flt, err := Parse(expr)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %T, want *SyntaxError", err)
			}
			if se.Col < 1 || se.Col > utf8.RuneCountInString(expr)+1 {
				t.Fatalf("column %d outside %q", se.Col, expr)
			}
			_ = se.Error()
			return
		}
		s := flt.String()
		again, err := Parse(s)
		if err != nil {
			t.Fatalf("%q prints as %q, which does not parse: %v", expr, s, err)
		}
		if again.String() != s {
			t.Fatalf("%q prints as %q, then as %q", expr, s, again.String())
		}
		for i := range samples {
			e := &samples[i].ev
			if flt.Match(e, env) != again.Match(e, env) {
				t.Fatalf("%q and its re-parse %q disagree on %s", expr, s, samples[i].name)
			}
			checkHints(t, flt, e, env)
		}
		flt.Match(&samples[0].ev, nil)
	})
}
