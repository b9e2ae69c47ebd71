package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sysray/sysray/internal/capture"
)

// A capture holds the command lines of the processes its selection
// traces, not the whole host's, unless asked with --all-procs.
func TestRecordHeaderProcs(t *testing.T) {
	requireBPF(t)
	dir := t.TempDir()
	header := func(args ...string) []uint32 {
		t.Helper()
		path := filepath.Join(dir, "c.sysray")
		os.Remove(path)
		if out, err := exec.Command(sysray, append([]string{"record", "-w", path}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("record %v: %v\n%s", args, err, out)
		}
		r, err := capture.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var pids []uint32
		for _, p := range r.Header().Procs {
			pids = append(pids, p.PID)
		}
		return pids
	}
	if got := header("--", "true"); len(got) != 0 {
		t.Errorf("record -- true: the header holds %d processes, want none", len(got))
	}
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleeper.Process.Kill()
	pid := uint32(sleeper.Process.Pid)
	if got := header("-p", strconv.Itoa(int(pid)), "--duration", "300ms"); len(got) != 1 || got[0] != pid {
		t.Errorf("record -p %d: the header holds %v, want just %d", pid, got, pid)
	}
	if got := header("--all-procs", "--", "true"); len(got) < 10 {
		t.Errorf("record --all-procs: the header holds %d processes, want the host's", len(got))
	}
}
