package session

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/filter"
	"github.com/sysray/sysray/internal/proc"
)

const id2 = "9f3e2d1c0b4a59687766554433221100ffeeddccbbaa99887766554433221100"

// writeCapture writes a capture as record would: a process table and a
// container table in the header, then events, then a trailer with drops
// (closed false: the file is cut short before its trailer).
func writeCapture(t *testing.T, evs []*event.Event, closed bool) string {
	t.Helper()
	meta, err := json.Marshal([]captured{{Container: filter.Container{ID: id2, Runtime: "docker", Name: "db", Image: "postgres:16"},
		Cgroups: []uint64{900}, PIDs: []uint32{20}}})
	if err != nil {
		t.Fatal(err)
	}
	h := &capture.Header{Arch: event.HostArch(), Hostname: "h", Kernel: "6.1",
		Procs: []proc.Info{{PID: 20, Comm: "postgres", Cmdline: []string{"postgres", "-D", "/data"}, Cgroup: 900}},
		Meta:  map[string]string{MetaContainers: string(meta)}}
	path := filepath.Join(t.TempDir(), "c.sysray")
	w, err := capture.Create(path, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if closed {
		if err := w.Close(&capture.Trailer{Drops: []uint64{3, 4}}); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return path
}

func stamp(evs ...*event.Event) []*event.Event {
	for i, e := range evs {
		e.Time = uint64(1000 + i)
	}
	return evs
}

func TestCaptureEach(t *testing.T) {
	evs := stamp(
		syscallOf(20, 900, "read"),                    // in db, by the header's tables
		execIn(30, 901, dockerPath, "web", "--serve"), // a container started during the capture
		syscallOf(30, 901, "openat"),                  // in it
		&event.Event{Kind: event.KindDrop, Drop: event.Drop{Count: 7}},
		syscallOf(40, 1, "openat"), // on the host
	)
	path := writeCapture(t, evs, true)
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	type seen struct {
		kind      event.Kind
		pid       uint32
		container string
		cmdline   string
	}
	var got []seen
	drops, err := c.Each(func(e *event.Event) error {
		got = append(got, seen{e.Kind, e.PID, c.Container(e.PID, e.Cgroup).ID, c.Cmdline(e.PID)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if drops != 7 {
		t.Errorf("drops = %d, want 7 (3+4 from the trailer)", drops)
	}
	want := []seen{
		{event.KindSyscall, 20, id2, "postgres -D /data"},
		{event.KindExec, 30, id64, "web --serve"},
		{event.KindSyscall, 30, id64, "web --serve"},
		{event.KindDrop, 0, "", ""},
		{event.KindSyscall, 40, "", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if db := c.Container(20, 900); db.Name != "db" || db.Image != "postgres:16" {
		t.Errorf("the header's container: %+v", db)
	}
	if c.Trailer() == nil {
		t.Error("no trailer after reading a complete capture")
	}
}

// A filter set on the capture's session applies in Each, drops excepted,
// and the tables still see what it rejects.
func TestCaptureEachFiltered(t *testing.T) {
	evs := stamp(
		execIn(30, 901, dockerPath, "web", "--serve"),
		syscallOf(30, 901, "openat"),
		&event.Event{Kind: event.KindDrop, Drop: event.Drop{Count: 2}},
		syscallOf(30, 901, "read"),
		syscallOf(40, 1, "openat"),
	)
	c, err := Open(writeCapture(t, evs, true))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Filter = mustParse(t, "evt.type = openat and container.id != host")
	var kinds []string
	if _, err := c.Each(func(e *event.Event) error {
		k := e.Kind.String()
		if e.Kind == event.KindSyscall {
			k = event.SyscallName(c.Arch(), e.Syscall.Nr)
		}
		kinds = append(kinds, k)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(kinds, " "), "openat drop"; got != want {
		t.Errorf("passed %q, want %q", got, want)
	}
}

// A capture cut short is read to its last whole block, with a warning.
func TestCaptureEachTruncated(t *testing.T) {
	path := writeCapture(t, stamp(syscallOf(20, 900, "read"), syscallOf(20, 900, "write")), false)
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var warn bytes.Buffer
	c.Warn = &warn
	n := 0
	drops, err := c.Each(func(*event.Event) error { n++; return nil })
	if err != nil {
		t.Fatalf("a capture cut short: %v", err)
	}
	if n != 2 || drops != 0 {
		t.Errorf("read %d events, %d drops; want 2, 0", n, drops)
	}
	if !strings.HasPrefix(warn.String(), "sysray: warning: ") {
		t.Errorf("warning %q", warn.String())
	}
}

func TestCaptureOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "none.sysray")); err == nil {
		t.Error("opened a file that does not exist")
	}
	junk := filepath.Join(t.TempDir(), "junk.sysray")
	if err := os.WriteFile(junk, []byte("not a capture at all, just text"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(junk); err == nil {
		t.Error("opened a file that is not a capture")
	}
}

// fn's error stops Each and is returned.
func TestCaptureEachStops(t *testing.T) {
	c, err := Open(writeCapture(t, stamp(syscallOf(20, 900, "read"), syscallOf(20, 900, "write")), true))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := os.ErrClosed
	n := 0
	if _, err := c.Each(func(*event.Event) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("Each: %v after %d events, want %v after 1", err, n, stop)
	}
}
