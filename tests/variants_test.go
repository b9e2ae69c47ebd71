package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/scenarios/variants"
)

// Every variant in scenarios/variants runs live under the doctor (through
// `sysray demo --variants NAME`) and must produce the finding it states.
// The check is the variant's own, on the report read back from JSON, so a
// variant cannot pass on the runner's word alone.
func TestVariants(t *testing.T) {
	requireBPF(t)
	for _, v := range variants.All {
		t.Run(v.Name, func(t *testing.T) {
			if v.Long && os.Getenv("SYSRAY_LONG_VARIANTS") != "1" {
				t.Skip("long variant; set SYSRAY_LONG_VARIANTS=1")
			}
			cmd := exec.Command(sysray, "demo", "--variants", v.Name, "--json", "--scenarios", "../scenarios")
			out, err := cmd.Output()
			var res map[string]struct {
				Pass   bool           `json:"pass"`
				Report *doctor.Report `json:"report"`
			}
			if jerr := json.Unmarshal(out, &res); jerr != nil {
				t.Fatalf("%v; %v\n%s", err, jerr, out)
			}
			r, ok := res[v.Name]
			if !ok || r.Report == nil {
				t.Fatalf("no report for %s: %v\n%s", v.Name, err, out)
			}
			f, cerr := v.Check(r.Report)
			if cerr != nil {
				// What the detector did say, for a failure seen once in CI.
				for _, g := range r.Report.Findings {
					if slices.Contains(v.Expect.IDs, g.ID) {
						ev, _ := json.Marshal(g.Evidence)
						t.Logf("%s %s: %s\n  evidence: %s", g.Severity, g.ID, g.Summary, ev)
					}
				}
				t.Fatal(cerr)
			}
			if f.Summary == "" || f.Fix == "" || len(f.Evidence) == 0 {
				t.Errorf("finding without summary, fix or evidence: %+v", f)
			}
			if !r.Pass || err != nil {
				t.Errorf("the runner disagrees: pass=%v err=%v", r.Pass, err)
			}
		})
	}
}
