package tests

import (
	"encoding/json"
	"strings"
	"testing"
)

// argv the kernel copy cut at 512 bytes is marked cut, in text (a trailing
// ...) and JSON (argv_truncated); bytes that are not UTF-8 are escaped in
// JSON as in text, and marked.
func TestExecArgvMarks(t *testing.T) {
	requireBPF(t)
	long := strings.Repeat("x", 600)
	bad := "a\xffb\\c"
	r := run(t, "trace", "--json", "-e", "exit_group", "--", "/bin/true", "short", bad, long)
	exec := execJSON(t, r.stdout)
	if exec == nil {
		t.Fatalf("no exec event: %s", r.stderr)
	}
	var x struct {
		Argv      []string `json:"argv"`
		Truncated bool     `json:"argv_truncated"`
		Escaped   bool     `json:"argv_escaped"`
	}
	if err := json.Unmarshal(exec.Exec, &x); err != nil {
		t.Fatal(err)
	}
	// "/bin/true\0short\0a\xffb\\c\0" is 22 bytes: 490 x's fit.
	wantArgv := []string{"/bin/true", "short", `a\xffb\\c`, strings.Repeat("x", 512-22)}
	if !x.Truncated || !x.Escaped || strings.Join(x.Argv, "|") != strings.Join(wantArgv, "|") {
		t.Errorf("exec JSON %s", exec.Exec)
	}
	wantText := `argv=["/bin/true", "short", "a\xffb\\c", "` + strings.Repeat("x", 512-22) + `"...]`
	if !strings.HasSuffix(exec.Text, wantText) {
		t.Errorf("exec text %q, want it to end %q", exec.Text, wantText)
	}
	// A whole, plain argv carries neither mark.
	r = run(t, "trace", "--json", "-e", "exit_group", "--", "/bin/true", "plain")
	exec = execJSON(t, r.stdout)
	if exec == nil {
		t.Fatalf("no exec event: %s", r.stderr)
	}
	if s := string(exec.Exec); strings.Contains(s, "argv_truncated") || strings.Contains(s, "argv_escaped") || !strings.Contains(s, `"argv":["/bin/true","plain"]`) {
		t.Errorf("plain exec JSON %s", s)
	}
	if !strings.HasSuffix(exec.Text, `argv=["/bin/true", "plain"]`) {
		t.Errorf("plain exec text %q", exec.Text)
	}
}

type execLine struct {
	Kind string          `json:"kind"`
	Text string          `json:"text"`
	Exec json.RawMessage `json:"exec"`
}

// execJSON returns the first exec event of trace --json output.
func execJSON(t *testing.T, out string) *execLine {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		var x execLine
		if json.Unmarshal([]byte(line), &x) == nil && x.Kind == "exec" {
			return &x
		}
	}
	return nil
}
