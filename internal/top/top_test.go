package top

import (
	"strings"
	"testing"
)

// A process's or container's name is its own to choose; the view draws it
// escaped, and the name drilled into as well.
func TestRenderEscapesNames(t *testing.T) {
	evil, esc := "\x1b]0;x\a[7]", `\x1b]0;x\a[7]`
	var b strings.Builder
	Render(&b, Processes, evil, []Row{{Key: "7", Name: evil, Calls: 1}}, "time", -1, 0)
	out := b.String()
	if strings.ContainsAny(out, "\x1b\a") {
		t.Fatalf("raw control byte in:\n%q", out)
	}
	if !strings.Contains(out, " in "+esc+" — ") || !strings.Contains(out, "  "+esc+" ") {
		t.Errorf("no escaped name in:\n%s", out)
	}
}

func TestCheckSort(t *testing.T) {
	for _, s := range sorts {
		if err := CheckSort(s); err != nil {
			t.Errorf("CheckSort(%q): %v", s, err)
		}
	}
	if err := CheckSort("bogus"); err == nil || err.Error() != "--sort bogus: want time, calls, p99, errors, vsyscalls, faults" {
		t.Errorf("CheckSort(bogus): %v", err)
	}
}
