package strace

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
)

// A log of strace -f -ttt -T becomes a capture whose header says what
// strace could not see, with every call in it; a log without times or
// durations says so in the header and in the warnings, and so does a line
// that is not strace's.
func TestImport(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "full.log")
	os.WriteFile(full, []byte(`9138  1795457949.266541 openat(AT_FDCWD, "/tmp/f", O_RDONLY) = 3 <0.000080>
9138  1795457949.266700 read(3, "abc", 4096) = 3 <0.000010>
9138  1795457949.266800 close(3) = 0 <0.000002>
`), 0o600)
	out := filepath.Join(dir, "full.sysray")
	st, err := Import([]string{full}, event.ArchAMD64, out, []string{"sysray", "import"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Events == 0 || len(st.Warnings()) != 0 {
		t.Errorf("events %d, warnings %q", st.Events, st.Warnings())
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("capture: %v %v", err, fi)
	}
	r, err := capture.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := r.Header()
	if h.Meta["source"] != "strace" || h.Meta["absent"] != strings.Join(Absent, ",") || h.Meta["strace_options"] != "-ttt -T -f" {
		t.Errorf("meta %v", h.Meta)
	}
	if h.Start != int64(st.First) || h.Syscalls[257] != "openat" {
		t.Errorf("start %d (first line %d), table %q", h.Start, st.First, h.Syscalls[257])
	}
	calls := map[string]int{}
	var e event.Event
	for {
		err := r.Next(&e)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == event.KindSyscall {
			calls[event.SyscallName(event.ArchAMD64, e.Syscall.Nr)]++
		}
	}
	if calls["openat"] != 1 || calls["read"] != 1 || calls["close"] != 1 {
		t.Errorf("calls %v, want one each of openat, read, close", calls)
	}

	bare := filepath.Join(dir, "bare.log")
	os.WriteFile(bare, []byte("openat(AT_FDCWD, \"/x\", O_RDONLY) = -1 ENOENT (No such file or directory)\nnot strace at all\n"), 0o600)
	st, err = Import([]string{bare}, event.ArchAMD64, filepath.Join(dir, "bare.sysray"), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, w := st.Meta(), strings.Join(st.Warnings(), "\n")
	for _, lack := range []string{"timestamps", "latency", "pids"} {
		if !strings.Contains(m["absent"], lack) {
			t.Errorf("absent %q lacks %s", m["absent"], lack)
		}
	}
	for _, say := range []string{"no timestamps", "no durations", "1 lines skipped, not strace's shape: " + bare + ":2"} {
		if !strings.Contains(w, say) {
			t.Errorf("warnings lack %q:\n%s", say, w)
		}
	}
}
