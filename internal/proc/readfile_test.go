package proc

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{0, 1, 511, 512, 513, 4096, 70000} {
		want := bytes.Repeat([]byte("x"), size)
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, want, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("size %d: got %d bytes, %v", size, len(got), err)
		}
	}
	// A procfs file whose size stat does not give, read as os.ReadFile reads it.
	want, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc")
	}
	got, err := ReadFile("/proc/self/status")
	if err != nil || !strings.HasPrefix(string(got), "Name:") || len(got) < len(want)/2 {
		t.Fatalf("/proc/self/status: %q, %v", got, err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file: %v, want fs.ErrNotExist", err)
	}
	if _, err := ReadFile(dir); err == nil {
		t.Fatal("a directory read without an error")
	}
}

func BenchmarkReadFile(b *testing.B) {
	b.Run("proc.ReadFile", func(b *testing.B) {
		for b.Loop() {
			if _, err := ReadFile("/proc/self/cgroup"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("os.ReadFile", func(b *testing.B) {
		for b.Loop() {
			if _, err := os.ReadFile("/proc/self/cgroup"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
