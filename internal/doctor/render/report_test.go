package render

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/doctor"
)

func TestTextNear(t *testing.T) {
	r := &doctor.Report{Near: []doctor.Near{
		{ID: "slow-syscall", Subject: "openat in app[7]", Short: "took 4.00ms", Closeness: 0.4},
		{ID: "error-storm", Subject: "stat failing with ENOENT", Short: "12 failures", Closeness: 0.0012},
	}}
	text := func(explain bool) string {
		var b strings.Builder
		if err := Text(&b, r, explain); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	// Silent: what came within a tenth of a rule, not what stayed far.
	got := text(false)
	if !strings.Contains(got, "slow-syscall (40% of the way): openat in app[7]") || strings.Contains(got, "error-storm") {
		t.Errorf("silent report:\n%s", got)
	}
	if got := text(true); !strings.Contains(got, "error-storm (under 1% of the way)") {
		t.Errorf("--explain leaves a near miss out:\n%s", got)
	}
	// Beside a finding, only --explain shows them.
	r.Findings = []doctor.Finding{{ID: "hot-syscall", Severity: doctor.Info, Title: "t"}}
	if got := text(false); strings.Contains(got, "Closest") {
		t.Errorf("near misses beside a finding, unasked:\n%s", got)
	}
}

// Counts the kernel had no room for make the text say its counts are
// lower bounds, as lost events do.
func TestTextUncounted(t *testing.T) {
	var b strings.Builder
	if err := Text(&b, &doctor.Report{Uncounted: 3532}, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "warning: 3532 syscalls went uncounted") || strings.Contains(b.String(), "burst") {
		t.Errorf("no uncounted line, or a want of memory named:\n%s", b.String())
	}
	// Those lost for want of memory are told apart.
	b.Reset()
	if err := Text(&b, &doctor.Report{Uncounted: 3532, UncountedNoMem: 32}, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "3500 because") || !strings.Contains(b.String(), "32 because a burst") {
		t.Errorf("the two causes are not told apart:\n%s", b.String())
	}
	b.Reset()
	if err := Text(&b, &doctor.Report{}, false); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "uncounted") {
		t.Errorf("uncounted line with nothing uncounted:\n%s", b.String())
	}
}

// Findings quote the names processes gave themselves, in prose, evidence
// and near misses: none of it reaches the terminal as a control sequence.
func TestTextEscapesNames(t *testing.T) {
	evil := "\x1b]0;x\a\x1b[31m"
	esc := `\x1b]0;x\a\x1b[31m`
	r := &doctor.Report{
		Findings: []doctor.Finding{{ID: "slow-syscall", Severity: doctor.Warning, Title: evil + "[7] slept",
			Summary: "calls by " + evil + "[7] slept", Evidence: map[string]any{"processes": []string{evil + "[7]"}}, Fix: "look at " + evil}},
		Near: []doctor.Near{{ID: "hot-syscall", Subject: evil + "[7]", Short: "rule", Closeness: 0.5}},
	}
	var b strings.Builder
	if err := Text(&b, r, true); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if i := strings.IndexFunc(out, func(r rune) bool { return r < 0x20 && r != '\n' }); i >= 0 {
		t.Fatalf("raw control byte at %d:\n%q", i, out)
	}
	for _, want := range []string{"  " + esc + "[7] slept\n", "calls by " + esc + "[7] slept", "    " + esc + "[7]\n", "look at " + esc, ": " + esc + "[7]\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

func TestTextForgotten(t *testing.T) {
	var b strings.Builder
	if err := Text(&b, &doctor.Report{Forgotten: 3976}, false); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("warning: 3976 processes that ended were forgotten to bound memory (the doctor keeps the last %d to end)", doctor.MaxEnded); !strings.Contains(b.String(), want) {
		t.Errorf("no %q in:\n%s", want, b.String())
	}
}
