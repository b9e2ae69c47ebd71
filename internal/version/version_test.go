package version

import (
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	in := Info{Version: "v1.2.3", Revision: "abc123", Time: "2026-11-28T12:00:00Z", Modified: true, Go: "go1.26"}
	got := in.String()
	for _, w := range []string{"sysray v1.2.3", "revision abc123", "modified", "2026-11-28T12:00:00Z", "go1.26"} {
		if !strings.Contains(got, w) {
			t.Errorf("%q lacks %q", got, w)
		}
	}
	if got := (Info{Version: "devel", Go: "go1.26"}).String(); strings.Contains(got, "revision") {
		t.Errorf("no revision known, yet %q", got)
	}
}
