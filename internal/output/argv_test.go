package output

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// A cut command line is marked in both forms, and arguments that are not
// UTF-8 survive JSON: escaped, marked, and unquoted back to their bytes.
func TestExecArgv(t *testing.T) {
	argv := []string{"/bin/x", "caf\xe9", `a\b "q"`, "tail"}
	e := &event.Event{Kind: event.KindExec, PID: 1, TID: 1, Comm: "x",
		Proc: event.Proc{Filename: "/bin/x", Argv: argv, ArgvTruncated: true}}
	text := Body(e, event.ArchAMD64)
	want := `exec filename="/bin/x" argv=["/bin/x", "caf\xe9", "a\\b \"q\"", "tail"...]`
	if text != want {
		t.Errorf("text %s, want %s", text, want)
	}
	r := JSON(e, event.ArchAMD64, 0)
	b, err := json.Marshal(r.Exec)
	if err != nil {
		t.Fatal(err)
	}
	var x ExecJSON
	json.Unmarshal(b, &x)
	if !x.ArgvTruncated || !x.ArgvEscaped || len(x.Argv) != len(argv) {
		t.Fatalf("JSON %s", b)
	}
	for i, s := range x.Argv {
		got, err := strconv.Unquote(`"` + s + `"`)
		if err != nil || got != argv[i] {
			t.Errorf("argv[%d] %q unquotes to %q (%v), want %q", i, s, got, err, argv[i])
		}
	}
	// Whole and UTF-8: as they are, unmarked.
	e.Proc.Argv, e.Proc.ArgvTruncated = []string{"ls", `a\b`, "café"}, false
	b, _ = json.Marshal(JSON(e, event.ArchAMD64, 0).Exec)
	if s := string(b); !strings.Contains(s, `"argv":["ls","a\\b","café"]`) || strings.Contains(s, "argv_") {
		t.Errorf("plain JSON %s", s)
	}
	if text := Body(e, event.ArchAMD64); !strings.HasSuffix(text, `argv=["ls", "a\\b", "café"]`) {
		t.Errorf("plain text %s", text)
	}
}
