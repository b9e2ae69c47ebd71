package output

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"bash", "bash"},
		{"kworker/0:1", "kworker/0:1"},
		{"\x1b]0;pwned\a\x1b[31m", `\x1b]0;pwned\a\x1b[31m`},
		{"a\nb\tc\rd\x00", `a\nb\tc\rd\x00`},
		{"del\x7f", `del\x7f`},
		{"c1\u009b31m", `c1\u009b31m`},   // 8-bit CSI, as UTF-8
		{"raw\x9b31m", `raw\x9b31m`},     // 8-bit CSI, not UTF-8
		{"rtl\u202eexe", `rtl\u202eexe`}, // reverses what follows
		{`back\x1b`, `back\\x1b`},        // not to be read as ESC
		{"café — ok", "café — ok"},
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	if got, want := EscapeLines("one\x1b[2J\ntwo\n"), "one\\x1b[2J\ntwo\n"; got != want {
		t.Errorf("EscapeLines = %q, want %q", got, want)
	}
}

// A thread's name is its own to choose: the printer must not hand its
// control bytes to the terminal, in the process column nor in the names of
// a fork's child and a sleep's waker.
func TestPrintEscapesComm(t *testing.T) {
	evil := "\x1b]0;x\a\x1b[31m"
	esc := `\x1b]0;x\a\x1b[31m`
	var buf bytes.Buffer
	p := New(&buf, event.ArchAMD64, 0, false)
	p.Print(&event.Event{Kind: event.KindFork, PID: 1, TID: 1, Comm: evil,
		Proc: event.Proc{ChildPID: 2, ChildTID: 2, ChildComm: evil}})
	p.Print(&event.Event{Kind: event.KindSyscall, PID: 1, TID: 1, Comm: "ok",
		Syscall: event.Syscall{Nr: 35, Latency: 2e7, Sleeps: []event.Sleep{{Duration: 2e7, Count: 1, WakerPID: 3, WakerTID: 3, WakerComm: evil,
			Stack: []event.Frame{{Name: "fn" + evil}}}}}})
	p.Flush()
	out := buf.String()
	for i := 0; i < len(out); i++ {
		if c := out[i]; c < 0x20 && c != '\n' {
			t.Fatalf("raw control byte %#x in output:\n%q", c, out)
		}
	}
	for _, want := range []string{" " + esc + "(1:1) fork", "comm=" + esc, "woken by " + esc + "(3:3)", "fn" + esc} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
