package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/capture"
)

// record says in its capture's header whether it recorded stacks, so that
// `doctor -r` on slow calls that never slept can tell "stacks were not
// recorded" from "they ran on the CPU": four getrandom calls of 32 MiB,
// each about 0.1 s of kernel CPU without a sleep.
func TestRecordSaysStacks(t *testing.T) {
	requireBPF(t)
	for _, stacks := range []bool{false, true} {
		file := filepath.Join(t.TempDir(), "run.sysray")
		args := []string{"record", "-w", file}
		if stacks {
			args = append(args, "--stacks")
		}
		r := run(t, append(args, "--", prog("slowcpu"), "4")...)
		if r.code != 0 {
			t.Fatalf("record (stacks %v): exit %d: %s", stacks, r.code, r.stderr)
		}
		c, err := capture.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		meta := c.Header().Meta
		c.Close()
		absent, declared := meta["absent"]
		if !declared || (absent == "stacks") == stacks || stacks && meta["stacks_slow"] != "10000000" {
			t.Errorf("stacks %v: header says absent=%q (declared %v), stacks_slow=%q", stacks, absent, declared, meta["stacks_slow"])
		}

		out := filepath.Join(t.TempDir(), "report.json")
		if d := run(t, "doctor", "-r", file, "--json", "-o", out); d.code != 0 {
			t.Fatalf("doctor -r: exit %d: %s", d.code, d.stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var rep doctorReport
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatalf("bad report: %v\n%s", err, b)
		}
		var f *finding
		for i := range rep.Findings {
			if rep.Findings[i].ID == "slow-syscall" && strings.Contains(rep.Findings[i].Title, "getrandom") {
				f = &rep.Findings[i]
			}
		}
		if f == nil {
			t.Fatalf("stacks %v: no slow-syscall finding on getrandom:\n%s", stacks, titles(rep))
		}
		if n, _ := f.Evidence["count"].(float64); n != 4 {
			t.Errorf("stacks %v: %v slow calls, want the 4 getrandom calls", stacks, f.Evidence["count"])
		}
		notRecorded := strings.Contains(f.Summary, "Stacks were not recorded")
		switch {
		case !stacks && (!notRecorded || !strings.Contains(f.Title, "cause unknown") || strings.Contains(f.Summary, "or with them")):
			t.Errorf("without --stacks: %q / %q, want the cause unknown because stacks were not recorded", f.Title, f.Summary)
		case stacks && (notRecorded || !strings.Contains(f.Title, "running in the kernel")):
			t.Errorf("with --stacks: %q / %q, want the calls running in the kernel", f.Title, f.Summary)
		}
	}
}
