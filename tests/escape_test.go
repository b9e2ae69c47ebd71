package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rawControl returns the first control byte of out other than a newline or,
// when tabs is set, a tab; -1 when there is none.
func rawControl(out string, tabs bool) int {
	for i := 0; i < len(out); i++ {
		c := out[i]
		if c == '\n' || (tabs && c == '\t') {
			continue
		}
		if c < 0x20 || c == 0x7f || c == 0x9b {
			return i
		}
	}
	return -1
}

// A program's name is the first 15 bytes of its file's name, which may hold
// any byte but '/': one named with ESC ] 0 ; … BEL (set the terminal's
// title) and ESC [ 31 m (turn it red) must reach the terminal escaped, in
// every text output that names processes.
func TestCommEscaped(t *testing.T) {
	requireBPF(t)
	name := "\x1b]0;ab\a\x1b[31m" // 13 bytes: all of it is the comm
	esc := `\x1b]0;ab\a\x1b[31m`
	bin := filepath.Join(t.TempDir(), name)
	b, err := os.ReadFile(prog("exit7"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	check := func(what, out string, tabs bool, want string) {
		t.Helper()
		if i := rawControl(out, tabs); i >= 0 {
			t.Errorf("%s: raw control byte %#x at %d:\n%q", what, out[i], i, out)
		}
		if want != "" && !strings.Contains(out, want) {
			t.Errorf("%s: no %q in:\n%s", what, want, out)
		}
	}
	r := runOut(t, "trace", "--", bin)
	if r.code != 7 {
		t.Errorf("trace: exit %d, want the command's 7: %s", r.code, r.stderr)
	}
	// The process column, and the exec event's quoted file name.
	check("trace", r.stdout, false, " "+esc+"(")
	check("trace", r.stdout, false, `exec filename="`+bin[:len(bin)-len(name)]+esc+`"`)

	r = runOut(t, "stat", "--by", "process", "--", bin)
	check("stat --by process", r.stdout, false, esc+"[")

	r = runOut(t, "doctor", "--explain", "--", bin)
	check("doctor --explain", r.stdout, false, "")
	check("stderr", r.stderr, true, "")
}
