package doctor_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/sysray/sysray/internal/checkup"
	"github.com/sysray/sysray/internal/doctor"
)

var update = flag.Bool("update", false, "write testdata/golden.json from the doctor's reports")

// goldenCaptures are the captures of real programs the repository holds:
// the doctor's own test captures and the golden corpus
// (testdata/golden/README.md). The capture package's v1.sysray is left out:
// its events are noise made to exercise the format (pid 0 under several
// names), on which the doctor's order among equal processes is map order.
func goldenCaptures(t *testing.T) []string {
	var all []string
	for _, pat := range []string{"testdata/*.sysray", "testdata/golden/*.sysray"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, m...)
	}
	sort.Strings(all)
	return all
}

// TestGolden runs `sysray doctor -r --json` over every capture and compares
// the reports, findings and near misses whole, with testdata/golden.json:
// a change to the doctor that is meant to keep its conclusions must keep
// this file as it is. One that changes them regenerates it (go test
// -run TestGolden -update) and the diff shows what changed.
func TestGolden(t *testing.T) {
	got := map[string]*doctor.Report{}
	for _, path := range goldenCaptures(t) {
		rep, err := checkup.Capture(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		canonical(t, rep)
		got[filepath.ToSlash(path)] = rep
	}
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	const golden = "testdata/golden.json"
	if *update {
		if err := os.WriteFile(golden, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		_ = os.WriteFile(golden+".got", b, 0o644)
		t.Errorf("the doctor's reports differ from %s (got written to %s.got; diff them; -update if the change is meant)", golden, golden)
	}
}

// canonical orders a report's findings and near misses by their text
// where the doctor leaves ties (equal severity and score) in map order,
// so the comparison is of what was found, not of that order.
func canonical(t *testing.T, rep *doctor.Report) {
	text := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	sort.SliceStable(rep.Findings, func(i, j int) bool {
		a, b := rep.Findings[i], rep.Findings[j]
		if a.Severity != b.Severity {
			return a.Severity > b.Severity
		}
		return text(a) < text(b)
	})
	sort.SliceStable(rep.Near, func(i, j int) bool { return text(rep.Near[i]) < text(rep.Near[j]) })
}

// TestFindingNumbersAreEvidence: every number a finding's title or summary
// states, over every capture, is one of its evidence fields (as the text
// formats it) or the text says it is a bound.
func TestFindingNumbersAreEvidence(t *testing.T) {
	for _, path := range goldenCaptures(t) {
		rep, err := checkup.Capture(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for i := range rep.Findings {
			for _, b := range doctor.NumbersNotInEvidence(&rep.Findings[i]) {
				t.Errorf("%s: %s", filepath.Base(path), b)
			}
		}
	}
}
