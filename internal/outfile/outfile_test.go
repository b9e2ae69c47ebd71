package outfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func write(t *testing.T, f *File, s string) {
	t.Helper()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func ino(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// The old file stays whole until Finish, then the new one replaces it,
// 0600, and nothing is left beside it.
func TestFinishReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	os.WriteFile(path, []byte("old"), 0o644)
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, "new contents")
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("before Finish the file holds %q", b)
	}
	if err := f.Finish(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if b, _ := os.ReadFile(path); string(b) != "new contents" || err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("after Finish: %q, mode %v (%v)", b, fi.Mode().Perm(), err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("left in the directory: %v", es)
	}
}

// Closed without Finish, the write is undone: the old file as it was, no
// temporary file.
func TestCloseUndoes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	os.WriteFile(path, []byte("old"), 0o644)
	before := ino(t, path)
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, "half a pa")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" || ino(t, path) != before {
		t.Errorf("the old file now %q", b)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("left in the directory: %v", es)
	}
}

func TestRefuses(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(victim, link)
	fifo := filepath.Join(dir, "fifo")
	syscall.Mkfifo(fifo, 0o600)
	hard := filepath.Join(dir, "hard")
	os.Link(victim, hard)
	for _, c := range []struct {
		path   string
		inputs []string
		want   string
	}{
		{link, nil, link + " is a symbolic link"},
		{fifo, nil, fifo + " is not a regular file (a FIFO)"},
		{dir, nil, dir + " is a directory"},
		{victim, []string{victim}, victim + " is also an input of this command: writing"},
		{hard, []string{"x", victim}, hard + " is also an input of this command (" + victim + "): writing"},
		{filepath.Join(dir, "none", "out"), nil, filepath.Join(dir, "none", "out") + ": no such file or directory"},
	} {
		f, err := Create(c.path, c.inputs...)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Create(%s, %v): %v, want %q", c.path, c.inputs, err, c.want)
		}
		if f != nil {
			f.Close()
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("victim now %q", b)
	}
	if es, _ := os.ReadDir(dir); len(es) != 4 {
		t.Errorf("left in the directory: %v", es)
	}
}

// A file another writer holds is refused; a writer whose committed file
// was replaced by another's learns so at Close.
func TestTwoWriters(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	a, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(path); err == nil || !strings.Contains(err.Error(), "being written by another sysray") {
		t.Errorf("second writer while the first holds it: %v", err)
	}
	// Both created before either committed: the second's Commit sees the
	// first's lock.
	os.Remove(path)
	a.Close()
	b, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(); err == nil || !strings.Contains(err.Error(), "being written by another sysray") {
		t.Errorf("second commit: %v", err)
	}
	c.Close()
	// Replaced behind the writer's back (as two renames racing would).
	os.Remove(path)
	os.WriteFile(path, []byte("other"), 0o600)
	if err := b.Close(); err == nil || !strings.Contains(err.Error(), "was replaced or removed while this sysray wrote it") {
		t.Errorf("Close after replacement: %v", err)
	}
}

func TestSamePath(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "sub"), 0o700)
	os.Symlink(filepath.Join(dir, "sub"), filepath.Join(dir, "alias"))
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{filepath.Join(dir, "sub", "x"), filepath.Join(dir, "alias", "x"), true},
		{filepath.Join(dir, "sub", "x"), filepath.Join(dir, "sub", "..", "sub", "x"), true},
		{filepath.Join(dir, "sub", "x"), filepath.Join(dir, "sub", "y"), false},
	} {
		if got := SamePath(c.a, c.b); got != c.same {
			t.Errorf("SamePath(%s, %s) = %v", c.a, c.b, got)
		}
	}
}

// Check refuses what Create refuses, opening nothing.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	os.Symlink(filepath.Join(dir, "target"), link)
	in := filepath.Join(dir, "in")
	os.WriteFile(in, nil, 0o600)
	for _, c := range []struct {
		path, input string
		ok          bool
	}{
		{"-", "", true},
		{"", "", true},
		{filepath.Join(dir, "new"), "", true},
		{link, "", false},
		{dir, "", false},
		{in, in, false},
		{filepath.Join(dir, "no-such-dir", "x"), "", false},
	} {
		if err := Check(c.path, c.input); (err == nil) != c.ok {
			t.Errorf("Check(%q, %q) = %v, want ok %v", c.path, c.input, err, c.ok)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("Check left files behind: %v", ents)
	}
}
