package tests

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A reader maps a 96 MiB file and reads it pass after pass under a 32 MiB
// memory cgroup: the doctor names the file, the limit and the re-reading.
func TestStoryThrash(t *testing.T) {
	requireBPF(t)
	f := top(t, demo(t, "thrash"), "page-cache-thrash", "warning")
	has(t, f, "file", "mapping_bytes", "limit_bytes", "refaulted_pages", "fault_sleep_ns", "time_lost_ns", "major_faults", "cgroup")
	if p, _ := f.Evidence["file"].(string); !strings.HasPrefix(p, "/var/tmp/sysray-thrash-") {
		t.Errorf("file %q, want the reader's /var/tmp/sysray-thrash-PID", p)
	}
	if n, _ := f.Evidence["mapping_bytes"].(float64); n != 96<<20 {
		t.Errorf("mapping of %v bytes, want 96 MiB", f.Evidence["mapping_bytes"])
	}
	if n, _ := f.Evidence["limit_bytes"].(float64); n != 32<<20 {
		t.Errorf("limit of %v bytes, want 32 MiB", f.Evidence["limit_bytes"])
	}
	// 8 passes of 96 MiB under 32 MiB: each pass after the first reads at
	// least the 64 MiB the limit cannot hold again (16,384 pages); the
	// counter is read every 200 ms or so, so the first and last reads may
	// miss a pass's worth at each end.
	if n, _ := f.Evidence["refaulted_pages"].(float64); n < 5*16384 {
		t.Errorf("%v pages refaulted, want at least 5 passes' worth (%d)", f.Evidence["refaulted_pages"], 5*16384)
	}
}

// The same file read() pass after pass instead of mapped: no faults, the
// time is in the read calls, and the finding says so, with the kernel's
// exact count of them.
func TestStoryThrashRead(t *testing.T) {
	requireBPF(t)
	f := top(t, demo(t, "thrashread"), "page-cache-thrash", "warning")
	has(t, f, "file", "file_bytes", "limit_bytes", "refaulted_pages", "read_time_ns", "read_wait_ns", "read_calls", "time_lost_ns", "cgroup")
	if p, _ := f.Evidence["file"].(string); !strings.HasPrefix(p, "/var/tmp/sysray-thrash-") {
		t.Errorf("file %q, want the reader's /var/tmp/sysray-thrash-PID", p)
	}
	if n, _ := f.Evidence["file_bytes"].(float64); n != 96<<20 {
		t.Errorf("file of %v bytes, want 96 MiB", f.Evidence["file_bytes"])
	}
	if n, _ := f.Evidence["limit_bytes"].(float64); n != 32<<20 {
		t.Errorf("limit of %v bytes, want 32 MiB", f.Evidence["limit_bytes"])
	}
	if !strings.Contains(f.Title, "in read") {
		t.Errorf("title %q, want the read calls named", f.Title)
	}
	// Whole passes of 768 calls of 128 KiB.
	if n, _ := f.Evidence["read_calls"].(float64); n < 768 || int(n)%768 != 0 {
		t.Errorf("read_calls %v, want whole passes of 768", f.Evidence["read_calls"])
	}
}

var majfltLine = regexp.MustCompile(`thrash\[\d+\]: passes=(\d+) majflt=(\d+) minflt=(\d+)`)

// Ground truth: the reader's own getrusage count of major faults against
// the doctor's. In random order after MADV_RANDOM every page is a major
// fault of its own (2 passes of 24,576 pages: 49,152). The kernel's
// per-thread counter is read at each window's end, from the thread's first
// sleep in a fault on: only a major fault before that sleep could be
// missed, and the first fault of the first pass is the one that sleeps.
func TestThrashMajorFaultsGroundTruth(t *testing.T) {
	requireBPF(t)
	bin := scenario(t, "thrash")
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"one thread", []string{bin, "-r", "-n", "2"}},
		{"4 threads", []string{bin, "-r", "-n", "1", "-t", "4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir() + "/report.json"
			r := run(t, append([]string{"doctor", "--json", "-o", out, "--"}, tc.argv...)...)
			m := majfltLine.FindStringSubmatch(r.stdout + r.stderr)
			if m == nil {
				t.Fatalf("the reader printed no counts:\n%s\n%s", r.stdout, r.stderr)
			}
			want, _ := strconv.ParseUint(m[2], 10, 64)
			rep := readReport(t, out)
			var got float64 = -1
			for _, f := range rep.Findings {
				if f.ID == "page-cache-thrash" {
					got, _ = f.Evidence["major_faults"].(float64)
				}
			}
			if got < 0 {
				t.Fatalf("no page-cache-thrash finding:\n%s", titles(rep))
			}
			if want < 24576 {
				t.Fatalf("the reader took %d major faults, want one a page (24,576 a pass)", want)
			}
			if uint64(got) > want || uint64(got)+2 < want {
				t.Errorf("sysray counted %v major faults, the reader %d", got, want)
			}
		})
	}
}

func readReport(t *testing.T, path string) doctorReport {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep doctorReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("bad report: %v\n%s", err, b)
	}
	return rep
}

var readsLine = regexp.MustCompile(`thrash\[\d+\]: passes=(\d+) majflt=\d+ minflt=\d+ reads=(\d+)`)

// Ground truth for the read path: the reader counts its own read calls;
// the doctor's read_calls is the kernel's exact count of them, and the
// refaults cover the passes after the first (each re-reads at least the
// 64 MiB the 32 MiB limit cannot hold: 16,384 pages). The reader makes its
// cgroup after sysray starts, so they count from zero: the doctor's first
// look, at the first read slow enough to be an event, may come seconds in
// (CI saw 35 passes' worth counted in 67 when it counted from there). 4 s of passes: the
// reader's first seconds write the file, and a few passes after them are
// not a quarter of its time.
func TestThrashReadGroundTruth(t *testing.T) {
	requireBPF(t)
	bin := scenario(t, "thrash")
	for _, how := range []string{"read", "pread", "readv"} {
		t.Run(how, func(t *testing.T) {
			out := t.TempDir() + "/report.json"
			r := run(t, "doctor", "--json", "-o", out, "--", bin, "-m", how, "-d", "4")
			m := readsLine.FindStringSubmatch(r.stdout + r.stderr)
			if m == nil {
				t.Fatalf("the reader printed no counts:\n%s\n%s", r.stdout, r.stderr)
			}
			passes, _ := strconv.ParseUint(m[1], 10, 64)
			want, _ := strconv.ParseUint(m[2], 10, 64)
			if passes < 6 || want != passes*768 {
				t.Fatalf("the reader made %d read calls in %d passes, want at least 6 passes of 768", want, passes)
			}
			f := findingOf(t, readReport(t, out), "page-cache-thrash")
			if f.Severity != "warning" {
				t.Errorf("severity %s, want warning: %s", f.Severity, f.Title)
			}
			if got, _ := f.Evidence["read_calls"].(float64); uint64(got) != want {
				t.Errorf("read_calls %v, the reader made %d", f.Evidence["read_calls"], want)
			}
			if n, _ := f.Evidence["refaulted_pages"].(float64); n < float64(passes-2)*16384 {
				t.Errorf("%v pages refaulted in %d passes, want at least %d passes' worth (%v)", f.Evidence["refaulted_pages"], passes, passes-2, f.Evidence["refaulted_pages_are"])
			}
			if n, _ := f.Evidence["file_bytes"].(float64); n != 96<<20 {
				t.Errorf("file_bytes %v, want 96 MiB", f.Evidence["file_bytes"])
			}
		})
	}
}

func findingOf(t *testing.T, rep doctorReport, id string) finding {
	t.Helper()
	for _, f := range rep.Findings {
		if f.ID == id {
			return f
		}
	}
	t.Fatalf("no %s finding:\n%s", id, titles(rep))
	return finding{}
}
