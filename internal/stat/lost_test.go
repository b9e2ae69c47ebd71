package stat

import (
	"strings"
	"testing"
)

// Each cause is named, with its count when both lost calls.
func TestLostWhy(t *testing.T) {
	for _, c := range []struct {
		l         Lost
		want, not []string
	}{
		{Lost{Full: 5}, []string{"was full", "-p"}, []string{"burst", "5"}},
		{Lost{NoMem: 7}, []string{"burst"}, []string{"was full", "7"}},
		{Lost{Full: 5, NoMem: 7}, []string{"5 because", "was full", "7 because", "burst"}, nil},
	} {
		got := c.l.Why()
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%+v: %q lacks %q", c.l, got, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(got, w) {
				t.Errorf("%+v: %q has %q", c.l, got, w)
			}
		}
		if c.l.Total() != c.l.Full+c.l.NoMem {
			t.Errorf("%+v: total %d", c.l, c.l.Total())
		}
	}
}
