package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// resolverTruth reads what the resolver scenario printed: how many
// lookups it made and the milliseconds each took.
func resolverTruth(t *testing.T, out string) (lookups int, totalMS float64) {
	t.Helper()
	m := regexp.MustCompile(`RESULT procs=\d+ lookups=(\d+) failed=(\d+) total_ms=([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no RESULT line from the scenario:\n%s", out)
	}
	lookups, _ = strconv.Atoi(m[1])
	if m[2] != m[1] {
		t.Fatalf("%s of %s lookups failed; against a silent server all must", m[2], m[1])
	}
	totalMS, _ = strconv.ParseFloat(m[3], 64)
	return lookups, totalMS
}

// checkResolver compares the finding with the scenario's own account:
// with `timeout:1 attempts:1` and one A query a lookup, each lookup is one
// timed-out wait, and the waits are the lookups' time but for the few
// calls around each wait (under 5 ms a lookup here).
func checkResolver(t *testing.T, rep doctorReport, lookups int, totalMS float64) {
	t.Helper()
	var f *finding
	for i := range rep.Findings {
		if rep.Findings[i].ID == "dns-timeout" {
			f = &rep.Findings[i]
		}
	}
	if f == nil {
		t.Fatalf("no dns-timeout:\n%s", titles(rep))
	}
	if f.Severity != "warning" {
		t.Errorf("severity %s, want warning", f.Severity)
	}
	has(t, *f, "server", "timed_out_waits", "waited_ns", "median_wait_ns", "wait_calls")
	if f.Evidence["server"] != "127.0.0.153" {
		t.Errorf("server %v, want the scenario's 127.0.0.153", f.Evidence["server"])
	}
	if n, _ := f.Evidence["timed_out_waits"].(float64); int(n) != lookups {
		t.Errorf("%v timed-out waits, want the scenario's %d lookups", f.Evidence["timed_out_waits"], lookups)
	}
	waited, _ := f.Evidence["waited_ns"].(float64)
	if d := totalMS - waited/1e6; d < 0 || d > 5*float64(lookups) {
		t.Errorf("waits %.1f ms against the lookups' %.1f ms: want at most 5 ms a lookup less", waited/1e6, totalMS)
	}
}

// The resolver demo: 4 lookups against a name server that never answers,
// each waiting out `timeout:1`; live, and again from a capture.
func TestStoryResolver(t *testing.T) {
	requireBPF(t)
	bin := scenarioBin(t, "resolver")
	dir := t.TempDir()
	out := filepath.Join(dir, "report.json")
	r := run(t, "doctor", "--json", "-o", out, "--", bin, "-n", "4")
	lookups, totalMS := resolverTruth(t, r.stdout)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep doctorReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	checkResolver(t, rep, lookups, totalMS)
	for _, f := range rep.Findings {
		if f.ID == "dns-timeout" {
			rc, _ := f.Evidence["resolv_conf"].(map[string]any)
			if rc["options"] != "timeout:1 attempts:1" {
				t.Errorf("resolv_conf %v, want the process's own (its mount namespace's) timeout:1 attempts:1", f.Evidence["resolv_conf"])
			}
		}
	}

	capture := filepath.Join(dir, "resolver.sysray")
	r = run(t, "record", "--stacks", "-w", capture, "--", bin, "-n", "3", "-c", "unspec")
	lookups, totalMS = resolverTruth(t, r.stdout)
	r = run(t, "doctor", "--json", "-r", capture)
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor -r: %v\n%s", err, r.stdout)
	}
	checkResolver(t, rep, lookups, totalMS)
}

// The resolver's benign cousins warn of nothing, from any detector: a
// server that answers (at once, slowly, with NXDOMAIN) and a listener
// whose poll times out by design on a UDP port that is not DNS.
func TestBenignResolvers(t *testing.T) {
	requireBPF(t)
	bin := scenarioBin(t, "resolver")
	for name, args := range map[string][]string{
		"answered":    {"-n", "200", "-m", "answer"},
		"slow-answer": {"-n", "4", "-m", "answer", "-s", "300"},
		"nxdomain":    {"-n", "200", "-m", "nxdomain", "-c", "unspec"},
		"heartbeat":   {"-n", "3", "-m", "listen"},
		"idle":        {"-n", "3", "-m", "idle"},
	} {
		t.Run(name, func(t *testing.T) {
			r := doctorCmd(t, 0, append([]string{bin}, args...)...)
			for _, f := range r.Findings {
				if f.Severity != "info" {
					t.Errorf("%s %s on a benign resolver: %s", f.Severity, f.ID, f.Title)
				}
			}
		})
	}
}
