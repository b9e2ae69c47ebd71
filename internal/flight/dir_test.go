package flight

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/capture"
)

func TestFileName(t *testing.T) {
	at := time.Date(2026, 11, 23, 4, 15, 0, 0, time.FixedZone("CET", 3600))
	for _, c := range []struct{ finding, container, want string }{
		{"oom-kill", "web", "20261123T031500Z-oom-kill-web.sysray"},
		{"oom-kill", "", "20261123T031500Z-oom-kill.sysray"},
		{"", "", "20261123T031500Z.sysray"},
		{"../../etc/passwd", "k8s_web/default", "20261123T031500Z-etc_passwd-k8s_web_default.sysray"},
		{"..", "w\u00e9b\n", "20261123T031500Z-w__b.sysray"},
		{".hidden", "a b", "20261123T031500Z-hidden-a_b.sysray"},
	} {
		got := FileName(at, c.finding, c.container)
		if got != c.want {
			t.Errorf("FileName(%q, %q) = %q, want %q", c.finding, c.container, got, c.want)
		}
		if _, ok := parseName(got); !ok {
			t.Errorf("%q is not a name the directory lists", got)
		}
	}
	long := FileName(at, strings.Repeat("a", 500), "")
	if len(long) > len("20261123T031500Z-")+maxPart+len(".sysray") {
		t.Errorf("name of %d bytes", len(long))
	}
}

func newRecorder(t *testing.T, events int) *Recorder {
	t.Helper()
	r := New(Config{})
	evs := genEvents(events, 0, 1_000_000, 11)
	for i := range evs {
		r.Add(&evs[i])
	}
	return r
}

func TestDirSaveAndCaps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flight")
	d, err := OpenDir(path, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("directory: %v %v", st.Mode(), err)
	}
	// Something else in the directory is neither listed nor deleted.
	other := filepath.Join(path, "README")
	os.WriteFile(other, []byte("hi"), 0o600)

	r := newRecorder(t, 500)
	t0 := time.Date(2026, 11, 23, 3, 15, 0, 0, time.UTC)
	var names []string
	for i, at := range []time.Time{t0, t0.Add(time.Minute), t0.Add(time.Minute), t0.Add(2 * time.Minute), t0.Add(3 * time.Minute)} {
		e, s, err := d.Save(r, &capture.Header{Hostname: "n"}, at, "oom-kill", "web", "test")
		if err != nil {
			t.Fatal(i, err)
		}
		if s.Events != 500 || e.Size != s.Bytes || !e.Time.Equal(at) {
			t.Fatalf("save %d: %+v %+v", i, e, s)
		}
		checkPrivate(t, filepath.Join(path, e.Name))
		names = append(names, e.Name)
	}
	want := []string{
		"20261123T031500Z-oom-kill-web.sysray",
		"20261123T031600Z-oom-kill-web.sysray",
		"20261123T031600Z-oom-kill-web-2.sysray", // same second
		"20261123T031700Z-oom-kill-web.sysray",
		"20261123T031800Z-oom-kill-web.sysray",
	}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("names %q", names)
	}
	// At most 3 files: the two oldest went.
	list, err := d.List()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range list {
		got = append(got, e.Name)
	}
	if !reflect.DeepEqual(got, []string{want[4], want[3], want[2]}) {
		t.Fatalf("kept %q, want the 3 newest, newest first", got)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatal("pruning deleted a file that is not a capture")
	}

	// A byte cap of two and a half captures keeps two; the newest is kept
	// even when it alone is over the cap.
	size := list[0].Size
	d2, _ := OpenDir(path, size*5/2, 0)
	if _, _, err := d2.Save(r, nil, t0.Add(4*time.Minute), "sigusr1", "", "signal"); err != nil {
		t.Fatal(err)
	}
	if got := listNames(t, d2); !reflect.DeepEqual(got, []string{"20261123T031900Z-sigusr1.sysray", want[4]}) {
		t.Fatalf("byte cap kept %q", got)
	}
	d3, _ := OpenDir(path, 1, 0)
	if _, _, err := d3.Save(r, nil, t0.Add(5*time.Minute), "manual", "", "api"); err != nil {
		t.Fatal(err)
	}
	if got := listNames(t, d3); !reflect.DeepEqual(got, []string{"20261123T032000Z-manual.sysray"}) {
		t.Fatalf("1-byte cap kept %q", got)
	}
	// A clock set back names the new capture older than the others; it is
	// still the one kept.
	d4, _ := OpenDir(path, 0, 1)
	d4.Save(r, nil, t0.Add(time.Minute), "manual", "", "api")
	d4.Save(r, nil, t0, "early", "", "api")
	if got := listNames(t, d4); !reflect.DeepEqual(got, []string{"20261123T031500Z-early.sysray"}) {
		t.Fatalf("after a clock step back: %q", got)
	}
}

func listNames(t *testing.T, d *Dir) []string {
	t.Helper()
	list, err := d.List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name)
	}
	return names
}

func TestDirStaleTemp(t *testing.T) {
	path := t.TempDir()
	d, _ := OpenDir(path, 0, 0)
	stale := filepath.Join(path, ".20261123T031500Z-x.sysray.123.tmp")
	fresh := filepath.Join(path, ".20261123T031600Z-x.sysray.456.tmp")
	os.WriteFile(stale, nil, 0o600)
	os.WriteFile(fresh, nil, 0o600)
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(stale, old, old)
	if err := d.Prune(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("stale temporary file kept")
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatal("a snapshot being written was deleted")
	}
	if names := listNames(t, d); len(names) != 0 {
		t.Fatalf("temporary files listed: %q", names)
	}
}

func TestDirOpen(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "flight")
	d, _ := OpenDir(path, 0, 0)
	r := newRecorder(t, 50)
	e, _, err := d.Save(r, nil, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), "crash", "api", "test")
	if err != nil {
		t.Fatal(err)
	}
	f, err := d.Open(e.Name)
	if err != nil {
		t.Fatal(err)
	}
	cr, err := capture.NewReader(f)
	if err != nil || cr.Header().Meta[MetaReason] != "test" {
		t.Fatalf("opened capture: %v", err)
	}
	f.Close()

	secret := filepath.Join(root, "20260102T030405Z-secret.sysray")
	os.WriteFile(secret, []byte("secret"), 0o600)
	os.Symlink(secret, filepath.Join(path, "20260102T030406Z-link.sysray"))
	os.Mkdir(filepath.Join(path, "20260102T030407Z-dir.sysray"), 0o700)
	for _, name := range []string{
		"", ".", "..", "../20260102T030405Z-secret.sysray", secret, "/etc/passwd",
		e.Name + "/../" + e.Name, "./" + e.Name, "20260102T030406Z-link.sysray", "20260102T030407Z-dir.sysray",
		"20260102T030405Z-nonexistent.sysray", "notes.sysray", "20260102T030405Zx.sysray", "20261399T999999Z.sysray",
	} {
		if f, err := d.Open(name); !errors.Is(err, ErrNotFound) {
			if f != nil {
				f.Close()
			}
			t.Errorf("Open(%q): %v, want ErrNotFound", name, err)
		}
	}
	if got := listNames(t, d); !reflect.DeepEqual(got, []string{e.Name}) {
		t.Fatalf("list %q: a link or directory is listed", got)
	}
}

func TestOpenDirErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o600)
	if _, err := OpenDir(file, 0, 0); err == nil {
		t.Fatal("a file accepted as a directory")
	}
	if _, err := OpenDir(t.TempDir(), -1, 0); err == nil {
		t.Fatal("negative cap accepted")
	}
}

func TestCooldown(t *testing.T) {
	c := NewCooldown(time.Minute)
	t0 := time.Unix(1_800_000_000, 0)
	steps := []struct {
		key  string
		at   time.Duration
		want bool
	}{
		{"oom/web", 0, true},
		{"oom/web", 30 * time.Second, false},
		{"oom/db", 30 * time.Second, true},
		{"oom/web", 59 * time.Second, false},
		{"oom/web", 60 * time.Second, true},
		{"oom/web", 61 * time.Second, false},
		{"oom/db", 89 * time.Second, false},
		{"oom/db", 90 * time.Second, true},
	}
	for _, s := range steps {
		if got := c.Allow(s.key, t0.Add(s.at)); got != s.want {
			t.Fatalf("Allow(%s, +%v) = %v", s.key, s.at, got)
		}
	}
	// Many one-off keys: the cooled-down ones are forgotten.
	for i := range 5000 {
		c.Allow(string(rune('a'+i%26))+time.Duration(i).String(), t0.Add(time.Duration(i)*time.Minute))
	}
	if len(c.last) > 1025 {
		t.Fatalf("%d keys remembered", len(c.last))
	}
	if c.Allow("z", t0.Add(5000*time.Minute)) != true || c.Allow("z", t0.Add(5000*time.Minute)) {
		t.Fatal("cooldown broken after sweeping")
	}
}
