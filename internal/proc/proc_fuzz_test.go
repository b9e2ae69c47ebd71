package proc

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzParseStat: any /proc/PID/stat gives a process or is refused, and the
// name it gives is what the outermost parentheses hold (a comm may itself
// hold ") ").
func FuzzParseStat(f *testing.F) {
	f.Add([]byte("4242 (a) b) c) S 1 4242 4242 0 -1 4194560 93 0 0 0 0 0 0 0 20 0 1 0 123456 1 2 3\n"))
	f.Add([]byte("1 (systemd) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 9 10 11"))
	f.Add([]byte("1 (x"))
	f.Add([]byte(")("))
	f.Fuzz(func(t *testing.T, stat []byte) {
		var info Info
		if !parseStat(stat, &info) {
			return
		}
		if want := "(" + info.Comm + ")"; !bytes.Contains(stat, []byte(want)) {
			t.Fatalf("comm %q is not in %q", info.Comm, stat)
		}
	})
}

// FuzzSplitNul: a /proc/PID/cmdline splits into its NUL-separated words,
// which join back to it less its trailing NULs.
func FuzzSplitNul(f *testing.F) {
	f.Add([]byte("sleep\x0010\x00"))
	f.Add([]byte("\x00\x00a\x00\x00"))
	f.Add([]byte("a b c"))
	f.Fuzz(func(t *testing.T, b []byte) {
		words := splitNul(b)
		if got, want := strings.Join(words, "\x00"), string(bytes.TrimRight(b, "\x00")); got != want {
			t.Fatalf("%q split into %q", b, words)
		}
	})
}
