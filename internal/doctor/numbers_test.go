package doctor

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
)

func TestNumbersNotInEvidence(t *testing.T) {
	for _, c := range []struct {
		summary string
		ev      map[string]any
		bad     int
	}{
		{"12 slow openat took 12.00ms at most", map[string]any{"count": 12}, 0},
		{"12 slow openat took 12.00ms", map[string]any{"count": 12, "max_ns": uint64(12e6)}, 0},
		{"12 slow openat took 12.00ms", map[string]any{"count": 12, "max_ns": uint64(13e6)}, 1},
		{"fell back to access 256 time(s)", map[string]any{"fallbacks": 5000}, 1},
		{"fell back to access 5,000 time(s)", map[string]any{"fallbacks": 5000}, 0},
		{"at least 256 time(s)", map[string]any{}, 0},
		{"46% of its time", map[string]any{"share": 0.4612}, 0},
		{"46% of its time", map[string]any{"share": 0.47}, 1},
		{"a 1.5 MiB read", map[string]any{"bytes": 1.5 * (1 << 20)}, 0},
		{"prog[42] (./prog -n 7) called clone3(0x7ff, 88) = 43 on x86_64", map[string]any{}, 0},
		{"the limit, 65530 (vm.max_map_count)", map[string]any{"example": "limit 65530"}, 0},
		{"since Linux 6.18 a throttled task stops in user space; glibc 2.25 stopped caching", map[string]any{}, 0},
		{"may use 0.10 CPU", map[string]any{"quota_us": 10000, "period_us": 100000}, 1},
		{"may use 0.10 CPU", map[string]any{"cpus": 0.1}, 0},
	} {
		f := &Finding{ID: "test", Summary: c.summary, Evidence: c.ev, Procs: []ProcRef{{PID: 42}}}
		if got := NumbersNotInEvidence(f); len(got) != c.bad {
			t.Errorf("%q with %v: %d unmatched, want %d: %v", c.summary, c.ev, len(got), c.bad, got)
		}
	}
}

// Every finding the unit tests make through findings() is checked too,
// once they have all run (TestMain).
var (
	seenMu   sync.Mutex
	seenBad  = map[string]bool{}
	seenList []string
	seenIDs  = map[ID]int{}
)

// checked checks a report's findings and hands it on.
func checked(r *Report) *Report {
	checkNumbers(r.Findings)
	return r
}

func checkNumbers(fs []Finding) {
	seenMu.Lock()
	defer seenMu.Unlock()
	for i := range fs {
		seenIDs[fs[i].ID]++
		for _, b := range NumbersNotInEvidence(&fs[i]) {
			if !seenBad[b] {
				seenBad[b] = true
				seenList = append(seenList, b)
			}
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testing.Verbose() {
		var ids []string
		for id, n := range seenIDs {
			ids = append(ids, fmt.Sprintf("%s %d", id, n))
		}
		sort.Strings(ids)
		fmt.Fprintf(os.Stderr, "numbers checked in unit-test findings of: %s\n", strings.Join(ids, ", "))
	}
	if len(seenList) > 0 {
		sort.Strings(seenList)
		fmt.Fprintf(os.Stderr, "numbers in unit-test findings that are neither evidence nor bounds (%d):\n", len(seenList))
		for _, b := range seenList {
			fmt.Fprintln(os.Stderr, "  "+b)
		}
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
