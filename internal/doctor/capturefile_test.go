package doctor_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sysray/sysray/internal/checkup"
)

// checkup.Capture, which doctor -r calls, finds what the test helper that reads
// each event by hand finds, finding for finding.
func TestReadCaptureMatchesDiagnose(t *testing.T) {
	names, err := filepath.Glob("testdata/*.sysray")
	if err != nil || len(names) == 0 {
		t.Fatalf("no test captures: %v", err)
	}
	for _, path := range names {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			got, err := checkup.Capture(path)
			if err != nil {
				t.Fatal(err)
			}
			want := diagnose(t, name)
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if string(g) != string(w) {
				t.Errorf("checkup.Capture:\n%s\ndiagnose:\n%s", g, w)
			}
			if len(got.Findings) == 0 {
				t.Errorf("no findings in %s", name)
			}
		})
	}
}

func TestReadCaptureErrors(t *testing.T) {
	if _, err := checkup.Capture(filepath.Join(t.TempDir(), "none.sysray")); err == nil {
		t.Error("diagnosed a file that does not exist")
	}
	junk := filepath.Join(t.TempDir(), "junk.sysray")
	if err := os.WriteFile(junk, []byte("SYSRAY? no"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := checkup.Capture(junk); err == nil {
		t.Error("diagnosed a file that is not a capture")
	}
}
