package htmlreport

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/session"
)

const capStart = 1_700_000_000_000_000_000

// writeCapture writes a capture of a process that made three calls and
// one call through the legacy vsyscall page (the doctor's legacy-vsyscall
// finding); closed false cuts it short before its trailer.
func writeCapture(t *testing.T, closed bool) string {
	t.Helper()
	h := &capture.Header{Arch: arch, Hostname: "box", Kernel: "6.1.0", Start: capStart, BootTime: capStart - 5e9,
		Command: []string{"sysray", "record", "-w", "app.sysray", "--", "./app"},
		Procs:   []proc.Info{{PID: 10, Comm: "app", Cmdline: []string{"./app", "-v"}}},
		Meta:    map[string]string{"vsyscall_mode": "xonly", "audit": "off", session.MetaContainers: "[]"}}
	path := filepath.Join(t.TempDir(), "app.sysray")
	w, err := capture.Create(path, h)
	if err != nil {
		t.Fatal(err)
	}
	evs := []*event.Event{
		call(10, 10, "app", nr(t, "openat"), 1e9, 4000, -2),
		call(10, 10, "app", nr(t, "read"), 1e9+10_000, 2000, 16),
		{Kind: event.KindVsyscall, Time: 1e9 + 20_000, PID: 10, TID: 10, Comm: "app",
			Vsyscall: event.Vsyscall{Nr: 1, CallerIP: 0x401000}},
		call(10, 10, "app", nr(t, "write"), 1e9+30_000, 1000, 16),
	}
	for _, e := range evs {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if closed {
		err = w.Close(&capture.Trailer{Drops: []uint64{2, 3}, End: capStart + int64(time.Second)})
	} else {
		err = w.Flush()
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

var dataElement = regexp.MustCompile(`(?s)<script id="sysray-data" type="application/json">(.*?)</script>`)

// readPage reads back a written page's title and data.
func readPage(t *testing.T, path string) (string, *Data) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := dataElement.FindSubmatch(b)
	if m == nil {
		t.Fatal("no data element")
	}
	var d Data
	if err := json.Unmarshal(m[1], &d); err != nil {
		t.Fatal(err)
	}
	title := regexp.MustCompile(`<title>(.*?)</title>`).FindSubmatch(b)
	if title == nil {
		t.Fatal("no title")
	}
	return string(title[1]), &d
}

func TestCaptureFile(t *testing.T) {
	in := writeCapture(t, true)
	out := filepath.Join(t.TempDir(), "app.html")
	before := time.Now().UnixNano()
	s, err := Capture(in, out, "")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if s.Findings != 1 || s.Events != 4 || s.Bytes != fi.Size() {
		t.Errorf("summary %+v; want 1 finding, 4 events and the file's %d bytes", s, fi.Size())
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	title, d := readPage(t, out)
	if title != "sysray report: app.sysray" {
		t.Errorf("title %q, want the capture's file name", title)
	}
	m := d.Meta
	if m.File != in || m.Hostname != "box" || m.Kernel != "6.1.0" || m.Arch != arch.String() || m.VsyscallMode != "xonly" ||
		m.Start != capStart || m.End != capStart+int64(time.Second) || m.BootTime != capStart-5e9 ||
		!slices.Equal(m.Command, []string{"sysray", "record", "-w", "app.sysray", "--", "./app"}) {
		t.Errorf("meta %+v", m)
	}
	if m.Drops != 5 || !slices.Equal(m.DropsPerCPU, []uint64{2, 3}) || m.Warning != "" {
		t.Errorf("drops %d %v, warning %q; want the trailer's 2+3 and none", m.Drops, m.DropsPerCPU, m.Warning)
	}
	// The container table is the page's own view, not a fact to list.
	if len(m.Facts) != 2 || m.Facts["vsyscall_mode"] != "xonly" || m.Facts["audit"] != "off" {
		t.Errorf("facts %v", m.Facts)
	}
	if m.Generated < before || m.Generated > time.Now().UnixNano() {
		t.Errorf("generated at %d, not while the test ran", m.Generated)
	}
	if len(d.Findings) != 1 || d.Findings[0].ID != "legacy-vsyscall" {
		t.Errorf("findings %+v, want legacy-vsyscall", d.Findings)
	}
	if len(d.Containers) != 1 || len(d.Containers[0].Procs) != 1 || d.Containers[0].Procs[0].Cmd != "./app -v" ||
		d.Containers[0].Procs[0].Stats.Count != 3 || d.Containers[0].Procs[0].Stats.Errors != 1 {
		t.Errorf("containers %+v", d.Containers)
	}
}

// Recorded live, the page is named for the command and cites no file; a
// capture cut short says so.
func TestCaptureTitledAndCutShort(t *testing.T) {
	in := writeCapture(t, false)
	out := filepath.Join(t.TempDir(), "app.html")
	s, err := Capture(in, out, "./app -v")
	if err != nil {
		t.Fatal(err)
	}
	if s.Findings != 1 || s.Events != 4 {
		t.Errorf("summary %+v", s)
	}
	title, d := readPage(t, out)
	if title != "sysray report: ./app -v" || d.Meta.File != "" {
		t.Errorf("title %q, file %q", title, d.Meta.File)
	}
	if d.Meta.End != 0 || d.Meta.Drops != 0 || d.Meta.DropsPerCPU != nil || !strings.Contains(d.Meta.Warning, "no trailer") {
		t.Errorf("end %d, drops %d %v, warning %q", d.Meta.End, d.Meta.Drops, d.Meta.DropsPerCPU, d.Meta.Warning)
	}
}

// An old world-readable page is replaced, not reused, and nothing is left
// beside it.
func TestCaptureReplaces(t *testing.T) {
	in := writeCapture(t, true)
	dir := t.TempDir()
	out := filepath.Join(dir, "app.html")
	if err := os.WriteFile(out, []byte("old page"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Capture(in, out, ""); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() <= int64(len("old page")) {
		t.Errorf("mode %v, %d bytes", fi.Mode().Perm(), fi.Size())
	}
	if names, _ := os.ReadDir(dir); len(names) != 1 {
		t.Errorf("left in the directory: %v", names)
	}
}

func TestCaptureBadInput(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.html")
	if _, err := Capture(filepath.Join(dir, "none.sysray"), out, ""); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing capture: err %v", err)
	}
	junk := filepath.Join(dir, "junk.sysray")
	if err := os.WriteFile(junk, []byte("SYSRAY? no"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Capture(junk, out, ""); err == nil {
		t.Error("a report of junk")
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a page was written for bad input (%v)", err)
	}
	if _, err := Capture(writeCapture(t, true), dir, ""); err == nil || err.Error() != dir+" is a directory, not a regular file" {
		t.Errorf("out a directory: err %v", err)
	}
}
