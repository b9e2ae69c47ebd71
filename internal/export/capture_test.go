package export_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/export"
	"github.com/sysray/sysray/internal/export/chromejson"
	"github.com/sysray/sysray/internal/export/exporttest"
	"github.com/sysray/sysray/internal/session"
)

// web is the capture's container table (session.MetaContainers): the
// fixture's server runs in cgroup 5.
const web = `[{"ID":"4a59687766554433221100ffeeddccbbaa998877669f3e2d1c0b00112233445566",` +
	`"Name":"web","Image":"nginx:1.27","Runtime":"containerd","PodName":"web-0","PodNamespace":"shop","cgroups":[5]}]`

// writeFixture writes the exporttest fixture as a capture; closed false
// cuts it short before its trailer.
func writeFixture(t *testing.T, closed bool) string {
	t.Helper()
	src := exporttest.Source()
	path := filepath.Join(t.TempDir(), "fixture.sysray")
	w, err := capture.Create(path, &capture.Header{Arch: src.Arch, BootTime: src.BootTime, Procs: src.Procs,
		Meta: map[string]string{session.MetaContainers: web}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range exporttest.Events() {
		if err := w.Write(&e); err != nil {
			t.Fatal(err)
		}
	}
	if closed {
		err = w.Close(&capture.Trailer{})
	} else {
		err = w.Flush()
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func chrome(w io.Writer) export.Sink { return chromejson.NewWriter(w) }

// Exported from its file, the fixture is the timeline of its events handed
// over directly, with the server labelled by the container the capture's
// table puts it in.
func TestCaptureAsFixture(t *testing.T) {
	for _, closed := range []bool{true, false} {
		in := writeFixture(t, closed)
		out := filepath.Join(t.TempDir(), "out.json")
		got, err := export.Capture(in, out, chrome, export.Options{})
		if err != nil {
			t.Fatal(err)
		}
		src := exporttest.Source()
		src.Container = func(pid uint32, cg uint64) string {
			if cg == 5 {
				return "container web (nginx:1.27, pod shop/web-0)"
			}
			return ""
		}
		var buf bytes.Buffer
		want, err := export.Export(src, chrome(&buf), export.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("closed %v: stats %+v, want %+v", closed, got, want)
		}
		if got.Slices != exporttest.Syscalls || got.Lanes != exporttest.Lanes {
			t.Errorf("closed %v: %d slices in %d lanes, the fixture has %d in %d", closed,
				got.Slices, got.Lanes, exporttest.Syscalls, exporttest.Lanes)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, buf.Bytes()) {
			t.Errorf("closed %v: the file differs from the direct export", closed)
		}
		if !bytes.Contains(b, []byte("container web (nginx:1.27, pod shop/web-0)")) {
			t.Errorf("closed %v: the server's container is not named", closed)
		}
	}
}

// The trace holds paths and arguments: an existing file is made private.
func TestCaptureFileMode(t *testing.T) {
	in := writeFixture(t, true)
	out := filepath.Join(t.TempDir(), "out.json")
	if err := os.WriteFile(out, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := export.Capture(in, out, chrome, export.Options{}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestCaptureOverItself(t *testing.T) {
	in := writeFixture(t, true)
	before, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	_, err = export.Capture(in, in, chrome, export.Options{})
	if err == nil || err.Error() != in+" is also an input of this command: writing it would destroy what is being read" {
		t.Errorf("err %v", err)
	}
	if after, err := os.ReadFile(in); err != nil || !bytes.Equal(after, before) {
		t.Errorf("the capture changed (%v)", err)
	}
}

// failing writes its header, then fails: the half-written file goes.
type failing struct{ w io.Writer }

var errSink = errors.New("disk full")

func (f failing) Begin(export.Header, []*export.Track) error {
	_, err := io.WriteString(f.w, "begun")
	return err
}
func (failing) Item(*export.Item) error { return errSink }
func (failing) End() error              { return nil }

func TestCaptureRemovesPartialFile(t *testing.T) {
	in := writeFixture(t, true)
	out := filepath.Join(t.TempDir(), "out.json")
	_, err := export.Capture(in, out, func(w io.Writer) export.Sink { return failing{w} }, export.Options{})
	if !errors.Is(err, errSink) {
		t.Errorf("err %v, want the sink's", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the partial file is still there (%v)", err)
	}
}

func TestCaptureBadInput(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.json")
	missing := filepath.Join(dir, "none.sysray")
	if _, err := export.Capture(missing, out, chrome, export.Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing capture: err %v", err)
	}
	junk := filepath.Join(dir, "junk.sysray")
	if err := os.WriteFile(junk, []byte("not a capture at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := export.Capture(junk, out, chrome, export.Options{})
	if err == nil {
		t.Error("junk exported")
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an output was written for bad input (%v)", err)
	}
	if _, err := export.Capture(writeFixture(t, true), filepath.Join(dir, "no", "such", "dir"), chrome, export.Options{}); err == nil ||
		!strings.Contains(err.Error(), "no such file") {
		t.Errorf("unwritable output: err %v", err)
	}
}
