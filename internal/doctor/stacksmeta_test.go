package doctor

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// A capture's header says whether stacks were recorded (docs/capture-format.md):
// without them a slow call's cause is unknown, and the finding says why;
// with them at the doctor's threshold, a slow call with no sleep record ran.
func TestSlowCauseFromHeader(t *testing.T) {
	const nrGetrandom = 318
	call := sys(8, 1e9, nrGetrandom, 32<<20, 150e6, 0, 32<<20, 0)
	withMeta := func(m map[string]string) *Finding {
		h := host
		h.Meta = m
		return byID(auditReport(h, []event.Event{call}), "slow-syscall")
	}
	for _, c := range []struct {
		name    string
		meta    map[string]string
		unknown bool
		says    string
	}{
		{"recorded without --stacks", map[string]string{"absent": "stacks"}, true, "Stacks were not recorded"},
		{"recorded with --stacks", map[string]string{"absent": "", "stacks_slow": "10000000"}, false, "running in the kernel"},
		// Calls of 10 ms to 100 ms carried no sleeps: this one's 150 ms
		// would have, so it ran; but the header cannot vouch below 100 ms.
		{"with --stacks --slow 100ms", map[string]string{"absent": "", "stacks_slow": "100000000"}, true, "recorded without --stacks, or with them"},
		{"an older capture", nil, true, "recorded without --stacks, or with them"},
	} {
		f := withMeta(c.meta)
		if f == nil {
			t.Errorf("%s: no slow-syscall finding", c.name)
			continue
		}
		if strings.Contains(f.Title, "cause unknown") != c.unknown || !strings.Contains(f.Title+" "+f.Summary, c.says) {
			t.Errorf("%s: %q / %q, want unknown=%v saying %q", c.name, f.Title, f.Summary, c.unknown, c.says)
		}
		if c.unknown && c.meta != nil && c.meta["absent"] == "stacks" && strings.Contains(f.Summary, "or with them") {
			t.Errorf("%s: still hedges: %q", c.name, f.Summary)
		}
	}
}
