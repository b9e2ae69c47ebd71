package tests

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/session"
)

// sysray --version and sysray version say the same line: the version, and
// the git revision that `go version -m` finds in the binary when it has
// one; a capture's header carries it.
func TestVersion(t *testing.T) {
	a, err := exec.Command(sysray, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command(sysray, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(a))
	if line != strings.TrimSpace(string(b)) || !strings.HasPrefix(line, "sysray ") {
		t.Fatalf("--version %q, version %q: want one line starting sysray", a, b)
	}
	m, _ := exec.Command("go", "version", "-m", sysray).Output()
	for _, l := range strings.Split(string(m), "\n") {
		if rev, ok := strings.CutPrefix(strings.TrimSpace(l), "build\tvcs.revision="); ok && !strings.Contains(line, rev) {
			t.Errorf("%q lacks the binary's revision %s", line, rev)
		}
	}
	requireBPF(t)
	path := filepath.Join(t.TempDir(), "v.sysray")
	if out, err := exec.Command(sysray, "record", "-w", path, "--", "true").CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	r, err := capture.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.Header().Meta[session.MetaVersion]; got != line {
		t.Errorf("the header's %s is %q, want %q", session.MetaVersion, got, line)
	}
}
