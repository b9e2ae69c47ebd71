package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/units"
)

// diffDoc is the part of sysray diff --json the tests read (docs/diff.md).
type diffDoc struct {
	A, B struct {
		Kind       string `json:"kind"`
		DurationNS *int64 `json:"duration_ns"`
	}
	By   string    `json:"by"`
	Rows []diffRow `json:"rows"`
	New  []struct {
		Row     string `json:"row"`
		Syscall string `json:"syscall"`
		B       uint64 `json:"b"`
	} `json:"new"`
	Vanished  []json.RawMessage `json:"vanished"`
	NewErrnos []struct {
		Row     string `json:"row"`
		Syscall string `json:"syscall"`
		Errno   string `json:"errno"`
		B       uint64 `json:"b"`
	} `json:"new_errnos"`
	VanishedErrnos []json.RawMessage `json:"vanished_errnos"`
}

type diffSide struct {
	Calls    uint64            `json:"calls"`
	Errors   uint64            `json:"errors"`
	TotalNS  uint64            `json:"total_ns"`
	RatePerS *float64          `json:"rate_per_s"`
	Errnos   map[string]uint64 `json:"errnos"`
}

type diffRow struct {
	Name   string    `json:"name"`
	Status string    `json:"status"`
	A      *diffSide `json:"a"`
	B      *diffSide `json:"b"`
	Delta  struct {
		Calls   int64 `json:"calls"`
		Errors  int64 `json:"errors"`
		TotalNS int64 `json:"total_ns"`
	} `json:"delta"`
	Errnos []struct {
		Errno  string `json:"errno"`
		A      uint64 `json:"a"`
		B      uint64 `json:"b"`
		Delta  int64  `json:"delta"`
		Status string `json:"status"`
	} `json:"errnos"`
	Syscalls []diffRow `json:"syscalls"`
}

func runDiff(t *testing.T, args ...string) diffDoc {
	t.Helper()
	r := runOut(t, append([]string{"diff", "--json"}, args...)...)
	if r.code != 0 {
		t.Fatalf("sysray diff %v: exit %d: %s", args, r.code, r.stderr)
	}
	var d diffDoc
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("bad diff JSON: %v\n%s", err, r.stdout)
	}
	return d
}

const (
	diffWrites  = 25 // writes in both runs; B fsyncs after each
	diffMissing = 3  // failing opens, in B only
)

// fsyncerRuns are the two commands: B adds one fsync per write and
// diffMissing opens of a missing path.
func fsyncerRuns(t *testing.T) (a, b []string) {
	dir := t.TempDir()
	a = []string{prog("fsyncer"), filepath.Join(dir, "a"), strconv.Itoa(diffWrites), "0", "0"}
	b = []string{prog("fsyncer"), filepath.Join(dir, "b"), strconv.Itoa(diffWrites), "1", strconv.Itoa(diffMissing)}
	return a, b
}

// checkFsyncerDiff holds a diff of the two runs to what changed, exactly,
// and each side's counts to strace's for the same command.
func checkFsyncerDiff(t *testing.T, d diffDoc, wantA, wantB counts) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range d.Rows {
		seen[r.Name] = true
		var ga, gb [2]uint64
		if r.A != nil {
			ga = [2]uint64{r.A.Calls, r.A.Errors}
		}
		if r.B != nil {
			gb = [2]uint64{r.B.Calls, r.B.Errors}
		}
		if ga != wantA[r.Name] || gb != wantB[r.Name] {
			t.Errorf("%s: A %v B %v (calls, errors); strace says A %v B %v", r.Name, ga, gb, wantA[r.Name], wantB[r.Name])
		}
		switch r.Name {
		case "fsync":
			if r.Status != "new" || r.A != nil || r.Delta.Calls != diffWrites || r.Delta.Errors != 0 {
				t.Errorf("fsync: %s, Δ calls %d, want new with +%d (one per write)", r.Status, r.Delta.Calls, diffWrites)
			}
		case "openat":
			if r.Status != "changed" || r.Delta.Calls != diffMissing || r.Delta.Errors != diffMissing {
				t.Errorf("openat: %s, Δ calls %d, Δ errors %d, want changed, +%d, +%d", r.Status, r.Delta.Calls, r.Delta.Errors, diffMissing, diffMissing)
			}
			if len(r.Errnos) != 1 || r.Errnos[0].Errno != "ENOENT" || r.Errnos[0].Status != "new" ||
				r.Errnos[0].A != 0 || r.Errnos[0].B != diffMissing || r.Errnos[0].Delta != diffMissing {
				t.Errorf("openat errnos %+v, want ENOENT new with %d", r.Errnos, diffMissing)
			}
		default:
			// Nothing else changed in the program: nothing else may show.
			if r.Status != "same" || r.Delta.Calls != 0 || r.Delta.Errors != 0 {
				t.Errorf("%s: %s, Δ calls %d, Δ errors %d; the program made the same calls", r.Name, r.Status, r.Delta.Calls, r.Delta.Errors)
			}
			for _, e := range r.Errnos {
				if e.Status != "same" {
					t.Errorf("%s: errno %s %s", r.Name, e.Errno, e.Status)
				}
			}
		}
	}
	for name := range wantB {
		if !seen[name] {
			t.Errorf("no row for %s, which strace saw", name)
		}
	}
	if len(d.New) != 1 || d.New[0].Row != "fsync" || d.New[0].B != diffWrites {
		t.Errorf("new: %+v, want fsync alone with %d calls", d.New, diffWrites)
	}
	if len(d.NewErrnos) != 1 || d.NewErrnos[0].Row != "openat" || d.NewErrnos[0].Errno != "ENOENT" || d.NewErrnos[0].B != diffMissing {
		t.Errorf("new errnos: %+v, want openat ENOENT alone with %d", d.NewErrnos, diffMissing)
	}
	if len(d.Vanished) != 0 || len(d.VanishedErrnos) != 0 {
		t.Errorf("vanished %s, vanished errnos %s: nothing went", d.Vanished, d.VanishedErrnos)
	}
	// The time at stake orders the rows: fsync's is all new.
	for i := 1; i < len(d.Rows); i++ {
		if abs64(d.Rows[i].Delta.TotalNS) > abs64(d.Rows[i-1].Delta.TotalNS) {
			t.Errorf("%s (Δ %d ns) after %s (Δ %d ns)", d.Rows[i].Name, d.Rows[i].Delta.TotalNS, d.Rows[i-1].Name, d.Rows[i-1].Delta.TotalNS)
		}
	}
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// Two captures of a program, the second with an fsync after each write and
// failing opens: the diff shows exactly that, and nothing else.
func TestDiffCaptures(t *testing.T) {
	requireBPF(t)
	cmdA, cmdB := fsyncerRuns(t)
	wantA, wantB := straceCounts(t, cmdA...), straceCounts(t, cmdB...)
	dir := t.TempDir()
	capA, capB := filepath.Join(dir, "a.sysray"), filepath.Join(dir, "b.sysray")
	for _, x := range []struct {
		file string
		cmd  []string
	}{{capA, cmdA}, {capB, cmdB}} {
		if r := run(t, append([]string{"record", "-w", x.file, "--"}, x.cmd...)...); r.code != 0 {
			t.Fatalf("record: exit %d: %s", r.code, r.stderr)
		}
	}
	d := runDiff(t, capA, capB)
	if d.A.Kind != "capture" || d.B.Kind != "capture" || d.By != "syscall" || d.A.DurationNS == nil || *d.A.DurationNS <= 0 {
		t.Errorf("inputs %+v %+v by %s", d.A, d.B, d.By)
	}
	checkFsyncerDiff(t, d, wantA, wantB)
	for _, r := range d.Rows {
		// Rates are per second of each capture.
		if r.Name == "write" {
			want := float64(diffWrites) / (float64(*d.B.DurationNS) / 1e9)
			if r.B.RatePerS == nil || *r.B.RatePerS < want*0.999 || *r.B.RatePerS > want*1.001 {
				t.Errorf("write's rate in B %v, want %d calls over %d ns", r.B.RatePerS, diffWrites, *d.B.DurationNS)
			}
		}
	}

	// The text table says the same.
	txt := runOut(t, "diff", capA, capB)
	for _, want := range []string{"fsync (new)", "openat  [ENOENT +3 new]", "new: fsync (25 calls)", "new errnos: openat ENOENT (3)", "vanished: none"} {
		if !strings.Contains(txt.stdout, want) {
			t.Errorf("no %q in\n%s", want, txt.stdout)
		}
	}

	// By process: the one program, with the same changes among its syscalls.
	p := runDiff(t, "--by", "process", capA, capB)
	if len(p.Rows) != 1 || p.Rows[0].Name != "fsyncer" || p.Rows[0].Delta.Calls != diffWrites+diffMissing {
		t.Fatalf("by process: %+v", p.Rows)
	}
	p.Rows, p.New[0].Row, p.NewErrnos[0].Row = p.Rows[0].Syscalls, p.New[0].Syscall, p.NewErrnos[0].Syscall
	checkFsyncerDiff(t, p, wantA, wantB)

	// By container: these runs are the host's, with the same syscalls.
	c := runDiff(t, "--by", "container", capA, capB)
	if len(c.Rows) != 1 || c.Rows[0].Name != "host" {
		t.Fatalf("by container: %+v", c.Rows)
	}
	c.Rows, c.New[0].Row, c.NewErrnos[0].Row = c.Rows[0].Syscalls, c.New[0].Syscall, c.NewErrnos[0].Syscall
	checkFsyncerDiff(t, c, wantA, wantB)

	// A capture has no stacks unless recorded with them.
	if r := run(t, "diff", "--flame", filepath.Join(dir, "f.svg"), capA, capB); r.code == 0 || !strings.Contains(r.stderr, "no stacks") {
		t.Errorf("--flame without stacks: exit %d, %s", r.code, r.stderr)
	}
}

// Two sysray stat --json outputs of the same pair of runs diff alike (no
// rates: stat does not say how long it counted).
func TestDiffStatJSON(t *testing.T) {
	requireBPF(t)
	cmdA, cmdB := fsyncerRuns(t)
	wantA, wantB := straceCounts(t, cmdA...), straceCounts(t, cmdB...)
	dir := t.TempDir()
	jA, jB := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	for _, x := range []struct {
		file string
		cmd  []string
	}{{jA, cmdA}, {jB, cmdB}} {
		if r := run(t, append([]string{"stat", "--json", "-o", x.file, "--"}, x.cmd...)...); r.code != 0 {
			t.Fatalf("stat: exit %d: %s", r.code, r.stderr)
		}
	}
	d := runDiff(t, jA, jB)
	if d.A.Kind != "stat" || d.B.Kind != "stat" || d.A.DurationNS != nil {
		t.Errorf("inputs %+v %+v", d.A, d.B)
	}
	checkFsyncerDiff(t, d, wantA, wantB)

	// A capture against a stat document: the capture is counted as stat does.
	capA := filepath.Join(dir, "a.sysray")
	if r := run(t, append([]string{"record", "-w", capA, "--"}, cmdA...)...); r.code != 0 {
		t.Fatalf("record: exit %d: %s", r.code, r.stderr)
	}
	checkFsyncerDiff(t, runDiff(t, capA, jB), wantA, wantB)

	// A document counted by process cannot be regrouped by syscall.
	jP := filepath.Join(dir, "p.json")
	if r := run(t, append([]string{"stat", "--by", "process", "--json", "-o", jP, "--"}, cmdB...)...); r.code != 0 {
		t.Fatalf("stat: exit %d: %s", r.code, r.stderr)
	}
	if r := run(t, "diff", jA, jP); r.code == 0 || !strings.Contains(r.stderr, "by syscall but") {
		t.Errorf("a by-syscall and a by-process document: exit %d, %s", r.code, r.stderr)
	}
}

// Stacks of every call that slept: the differential flame graph has the
// new fsync frames, weighing what B's fsyncs spent asleep (off CPU) or
// running (on CPU), to the nanosecond as the capture has them.
func TestDiffFlame(t *testing.T) {
	requireBPF(t)
	cmdA, cmdB := fsyncerRuns(t)
	dir := t.TempDir()
	capA, capB := filepath.Join(dir, "a.sysray"), filepath.Join(dir, "b.sysray")
	for _, x := range []struct {
		file string
		cmd  []string
	}{{capA, cmdA}, {capB, cmdB}} {
		if r := run(t, append([]string{"record", "--stacks", "--slow", "1ns", "-w", x.file, "--"}, x.cmd...)...); r.code != 0 {
			t.Fatalf("record: exit %d: %s", r.code, r.stderr)
		}
	}
	// What B's fsyncs that carry stacks (those that slept) spent asleep and awake.
	var asleep, awake uint64
	for _, e := range parseJSON(t, runOut(t, "read", "--json", capB).stdout) {
		if e.Kind != "syscall" || e.Syscall.Name != "fsync" || len(e.Syscall.Sleeps) == 0 {
			continue
		}
		var s uint64
		for _, sl := range e.Syscall.Sleeps {
			s += sl.DurationNS
		}
		asleep += s
		awake += e.Syscall.LatencyNS - min(s, e.Syscall.LatencyNS)
	}
	if asleep == 0 {
		t.Fatalf("no fsync in B slept: %s is not on a disk-backed file system", dir)
	}
	for _, c := range []struct {
		flag string
		want uint64
	}{{"--off-cpu", asleep}, {"", awake}} {
		svg := filepath.Join(dir, "g"+c.flag+".svg")
		args := []string{"diff", "--flame", svg, "-o", filepath.Join(dir, "txt"), capA, capB}
		if c.flag != "" {
			args = append(args, c.flag)
		}
		if r := run(t, args...); r.code != 0 {
			t.Fatalf("diff %v: exit %d: %s", args, r.code, r.stderr)
		}
		b, err := os.ReadFile(svg)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("<title>fsync [kernel]: A 0ns, B %s, +%s (new)</title>", units.Duration(c.want), units.Duration(c.want))
		if got := strings.Count(string(b), want); got != 1 {
			t.Errorf("%s: %d frames %q in the graph", c.flag, got, want)
		}
		if !strings.Contains(string(b), "<title>fsyncer: A ") {
			t.Errorf("%s: no fsyncer root", c.flag)
		}
		if st, _ := os.Stat(svg); st.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want 0600", svg, st.Mode().Perm())
		}
	}
}

// Bad input: a clear error and a non-zero exit.
func TestDiffBadInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"by":"syscall","rows":[{"name":"read","calls":1}],"drops":0}`), 0o600)
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte("hello, this is not a capture\n"), 0o600)
	other := filepath.Join(dir, "other.json")
	os.WriteFile(other, []byte(`{"name":"something else"}`), 0o600)
	cut := filepath.Join(dir, "cut.sysray")
	os.WriteFile(cut, []byte("SYSRAY\x89\n\x01\x00\x00\x00\x01\x01"), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{filepath.Join(dir, "missing"), good}, "no such file"},
		{[]string{good, text}, "not a sysray capture"},
		{[]string{other, good}, "not `sysray stat --json` output"},
		{[]string{cut, good}, "truncated"},
		{[]string{good}, "accepts 2 arg"},
		{[]string{"--by", "thread", good, good}, "want syscall, process or container"},
		{[]string{"--flame", filepath.Join(dir, "x.svg"), good, good}, "keeps no stacks"},
	} {
		r := run(t, append([]string{"diff"}, c.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "panic") {
			t.Errorf("diff %v: exit %d, stderr %q; want an error saying %q", c.args, r.code, r.stderr, c.want)
		}
	}
	// The same document twice: no change, exit 0.
	if r := run(t, "diff", good, good); r.code != 0 || !strings.Contains(r.stdout, "new: none") {
		t.Errorf("diff of a file with itself: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
}

// Folded stacks (sysray profile -o X.folded) diff as a flame graph only,
// matched by process name across pids.
func TestDiffFolded(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.folded"), filepath.Join(dir, "b.folded")
	os.WriteFile(a, []byte("app[10];main;compute 90\napp[10];main;write_[k] 10\n"), 0o600)
	os.WriteFile(b, []byte("app[22];main;compute 40\napp[22];main;write_[k] 10\napp[22];main;fsync_[k] 50\n"), 0o600)
	svg := filepath.Join(dir, "d.svg")
	if r := run(t, "diff", "--flame", svg, a, b); r.code != 0 {
		t.Fatalf("diff --flame: exit %d: %s", r.code, r.stderr)
	}
	g, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"<title>app: A 100 samples, B 100 samples, no change</title>",
		"<title>compute: A 90 samples, B 40 samples, -50 samples (-55.6%)</title>",
		"<title>fsync [kernel]: A 0 samples, B 50 samples, +50 samples (new)</title>",
	} {
		if !strings.Contains(string(g), want) {
			t.Errorf("no %q in the graph", want)
		}
	}
	if r := run(t, "diff", a, b); r.code == 0 || !strings.Contains(r.stderr, "no syscall counts") {
		t.Errorf("folded without --flame: exit %d, %s", r.code, r.stderr)
	}
	j := filepath.Join(dir, "s.json")
	os.WriteFile(j, []byte(`{"by":"syscall","rows":[],"drops":0}`), 0o600)
	if r := run(t, "diff", "--flame", svg, a, j); r.code == 0 || !strings.Contains(r.stderr, "only be compared with folded") {
		t.Errorf("folded against stat: exit %d, %s", r.code, r.stderr)
	}
}
