package container

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture builds a root directory from a spec: "path" -> content, or
// "path" -> "->target" for a symbolic link.
func fixture(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, full)
		} else {
			err = os.WriteFile(full, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// elf wraps a banner in binary noise, as it sits in .rodata.
func elf(banner string) string {
	return "\x7fELF\x02\x01\x01\x00" + strings.Repeat("\x00\x01junk", 100) + "\x00" + banner + "\x00" + "more\x00strings"
}

func TestLibcInRoot(t *testing.T) {
	bookworm := "GNU C Library (Debian GLIBC 2.36-9+deb12u14) stable release version 2.36.\nCopyright (C) 2022 Free Software Foundation, Inc."
	wheezy := "GNU C Library (Debian EGLIBC 2.13-38+deb7u11) stable release version 2.13, by Roland McGrath et al."
	tests := []struct {
		name  string
		files map[string]string
		want  LibcInfo
		err   error
	}{
		{"debian bookworm merged /usr", map[string]string{
			"lib":                                "->usr/lib",
			"lib64":                              "->usr/lib64",
			"usr/lib64/ld-linux-x86-64.so.2":     "->/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
			"usr/lib/x86_64-linux-gnu/libc.so.6": elf(bookworm),
			"usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2": "ld",
		}, LibcInfo{Name: "glibc", Version: "2.36", Build: "Debian GLIBC 2.36-9+deb12u14", Path: "/lib/x86_64-linux-gnu/libc.so.6"}, nil},
		{"debian wheezy libc-2.13.so", map[string]string{
			"lib/x86_64-linux-gnu/libc.so.6":    "->libc-2.13.so",
			"lib/x86_64-linux-gnu/libc-2.13.so": elf(wheezy),
		}, LibcInfo{Name: "glibc", Version: "2.13", Build: "Debian EGLIBC 2.13-38+deb7u11", Path: "/lib/x86_64-linux-gnu/libc.so.6"}, nil},
		{"centos absolute link, version from name", map[string]string{
			// The absolute target must resolve in the fixture, not on the host.
			"lib64/libc.so.6":    "->/lib64/libc-2.17.so",
			"lib64/libc-2.17.so": "\x7fELF stripped",
		}, LibcInfo{Name: "glibc", Version: "2.17", Path: "/lib64/libc.so.6"}, nil},
		{"libc-X.Y.so without libc.so.6", map[string]string{
			"lib/libc-2.12.so": "\x7fELF",
		}, LibcInfo{Name: "glibc", Version: "2.12", Path: "/lib/libc-2.12.so"}, nil},
		{"alpine musl", map[string]string{
			"lib/ld-musl-x86_64.so.1":   "\x7fELF musl",
			"lib/libc.musl-x86_64.so.1": "->ld-musl-x86_64.so.1",
			"lib/apk/db/installed":      "C:Q1abc=\nP:busybox\nV:1.36.1-r5\n\nC:Q1def=\nP:musl\nV:1.2.4-r2\nA:x86_64\n\n",
		}, LibcInfo{Name: "musl", Version: "1.2.4", Path: "/lib/ld-musl-x86_64.so.1"}, nil},
		{"debian with musl-tools: musl's loader in /lib, glibc's in the multiarch dir", map[string]string{
			"lib/ld-musl-x86_64.so.1":        "\x7fELF musl",
			"lib/x86_64-linux-gnu/libc.so.6": elf(bookworm),
		}, LibcInfo{Name: "glibc", Version: "2.36", Build: "Debian GLIBC 2.36-9+deb12u14", Path: "/lib/x86_64-linux-gnu/libc.so.6"}, nil},
		{"musl without apk", map[string]string{
			"lib/ld-musl-aarch64.so.1": "\x7fELF musl",
		}, LibcInfo{Name: "musl", Path: "/lib/ld-musl-aarch64.so.1"}, nil},
		{"busybox static, no libc", map[string]string{
			"bin/busybox": "\x7fELF static",
			"bin/sh":      "->busybox",
		}, LibcInfo{}, ErrNoLibc},
		{"escaping link stays inside", map[string]string{
			"lib": "->../../../../../../usr/lib",
			// Exists only in the fixture: the link must land here, not on the host.
			"usr/lib/libc.so.6": elf("GNU C Library (fixture) release release version 9.99"),
		}, LibcInfo{Name: "glibc", Version: "9.99", Build: "fixture", Path: "/lib/libc.so.6"}, nil},
		{"link loop", map[string]string{
			"lib/libc.so.6": "->libc.so.6",
		}, LibcInfo{}, ErrNoLibc},
		{"dangling libc.so.6", map[string]string{
			"lib/libc.so.6": "->/nowhere/libc-2.31.so",
		}, LibcInfo{}, ErrNoLibc},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LibcInRoot(fixture(t, tt.files))
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Errorf("got %+v, %v\nwant %+v, %v", got, err, tt.want, tt.err)
			}
		})
	}
}

// The marker may straddle the reader's 64 KiB chunks.
func TestGlibcBannerAcrossChunks(t *testing.T) {
	for _, off := range []int{1<<16 - 5, 1<<16 - 13, 1 << 16, 3<<16 - 1} {
		var b bytes.Buffer
		b.Write(bytes.Repeat([]byte{0xab}, off))
		b.WriteString("GNU C Library (Ubuntu GLIBC 2.35-0ubuntu3.8) stable release version 2.35.\x00")
		root := fixture(t, map[string]string{"lib/libc.so.6": b.String()})
		got, err := LibcInRoot(root)
		if err != nil || got.Version != "2.35" || got.Build != "Ubuntu GLIBC 2.35-0ubuntu3.8" {
			t.Errorf("offset %d: %+v, %v", off, got, err)
		}
	}
}

func TestLibcString(t *testing.T) {
	for in, want := range map[LibcInfo]string{
		{}:                               "unknown libc",
		{Name: "musl"}:                   "musl",
		{Name: "glibc", Version: "2.13"}: "glibc 2.13",
		{Name: "glibc", Version: "2.36", Build: "Debian GLIBC 2.36-9"}: "glibc 2.36 (Debian GLIBC 2.36-9)",
	} {
		if got := in.String(); got != want {
			t.Errorf("%+v: %q, want %q", in, got, want)
		}
	}
}

// On the host itself (root "/"), the probe finds the host's glibc if any.
func TestLibcSelf(t *testing.T) {
	got, err := Libc(os.Getpid())
	if errors.Is(err, ErrNoLibc) {
		t.Skip("host has no C library")
	}
	if err != nil || got.Name == "" {
		t.Fatalf("%+v, %v", got, err)
	}
	t.Logf("host: %s at %s", got, got.Path)
}
