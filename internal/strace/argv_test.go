package strace

import (
	"slices"
	"testing"
)

// strace's marks of a cut argv (-s, -v off) become the capture's.
func TestStringListCut(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		cut  bool
	}{
		{`["ls", "-l"]`, []string{"ls", "-l"}, false},
		{`["sh", "-c", "echo aaaa"...]`, []string{"sh", "-c", "echo aaaa"}, true},
		{`["cc", "-O2", ...]`, []string{"cc", "-O2"}, true},
		{`[]`, []string{}, false},
	} {
		got, cut, ok := stringList(c.in)
		if !ok || cut != c.cut || !slices.Equal(got, c.want) {
			t.Errorf("stringList(%s) = %q, cut %v, ok %v", c.in, got, cut, ok)
		}
	}
}
