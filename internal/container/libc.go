package container

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// LibcInfo is the C library a process would load inside its root.
type LibcInfo struct {
	Name    string // "glibc" or "musl"
	Version string // "2.36", "1.2.4"; "" when the library does not say
	Build   string // glibc's banner name, e.g. "Debian GLIBC 2.36-9+deb12u14"
	Path    string // the file read, as seen inside the root
}

func (l LibcInfo) String() string {
	if l.Name == "" {
		return "unknown libc"
	}
	s := l.Name
	if l.Version != "" {
		s += " " + l.Version
	}
	if l.Build != "" {
		s += " (" + l.Build + ")"
	}
	return s
}

// ErrNoLibc is returned when no C library is found (static or distroless
// images, busybox-static).
var ErrNoLibc = errors.New("no C library found")

// Libc reads the C library version inside the root of process pid
// (/proc/PID/root), which is the container's file system for a process in
// a container.
func Libc(pid int) (LibcInfo, error) {
	return LibcInRoot(fmt.Sprintf("/proc/%d/root", pid))
}

// libcDirs are searched in order; multiarch directories are globbed.
var libcDirs = []string{
	"/lib", "/lib64", "/usr/lib", "/usr/lib64", "/lib/*-linux-gnu*", "/usr/lib/*-linux-gnu*",
	"/usr/local/lib",
}

// LibcInRoot finds the C library under root, a directory standing for "/"
// (symbolic links are resolved inside it, as the process would see them),
// and reads its version:
//
//   - glibc: libc.so.6 (or libc-X.Y.so); the version is the banner string
//     "GNU C Library (...) ... version X.Y" inside the file, else the
//     libc-X.Y.so name the link points at.
//   - musl: ld-musl-ARCH.so.1 / libc.musl-ARCH.so.1; musl's file holds no
//     parsable version, so it comes from the apk database if there is one.
func LibcInRoot(root string) (LibcInfo, error) {
	var dirs []string
	for _, d := range libcDirs {
		if !strings.Contains(d, "*") {
			dirs = append(dirs, d)
			continue
		}
		// Glob in the root; the matched names are inside-root paths.
		parent, pat := path.Split(d)
		rp, err := resolveIn(root, parent)
		if err != nil {
			continue
		}
		ents, _ := os.ReadDir(filepath.Join(root, rp))
		for _, e := range ents {
			if ok, _ := path.Match(pat, e.Name()); ok {
				dirs = append(dirs, path.Join(parent, e.Name()))
			}
		}
	}
	// glibc anywhere first, then musl: a glibc system may carry musl's
	// loader beside its own (Debian's musl package puts
	// ld-musl-x86_64.so.1 in /lib, ahead of /lib/x86_64-linux-gnu), and
	// its programs still use glibc. An image with musl alone has no
	// libc.so.6.
	for _, find := range []func(root, dir string) (LibcInfo, bool){glibcIn, muslIn} {
		seen := map[string]bool{}
		for _, d := range dirs {
			rd, err := resolveIn(root, d)
			if err != nil || seen[rd] {
				continue
			}
			seen[rd] = true
			if info, ok := find(root, d); ok {
				return info, nil
			}
		}
	}
	return LibcInfo{}, ErrNoLibc
}

var (
	glibcBanner  = regexp.MustCompile(`GNU C Library (?:\(([^)\n]*)\) )?[^\n]*?version ([0-9]+\.[0-9]+(?:\.[0-9]+)?)`)
	glibcNameVer = regexp.MustCompile(`^libc-([0-9]+\.[0-9]+(?:\.[0-9]+)?)\.so$`)
)

// glibcIn looks for glibc in dir (an inside-root path).
func glibcIn(root, dir string) (LibcInfo, bool) {
	cands := []string{path.Join(dir, "libc.so.6")}
	if ents, err := os.ReadDir(filepath.Join(root, mustResolve(root, dir))); err == nil {
		for _, e := range ents {
			if glibcNameVer.MatchString(e.Name()) {
				cands = append(cands, path.Join(dir, e.Name()))
			}
		}
	}
	for _, c := range cands {
		rp, err := resolveIn(root, c)
		if err != nil {
			continue
		}
		info := LibcInfo{Name: "glibc", Path: c}
		if m := glibcNameVer.FindStringSubmatch(path.Base(rp)); m != nil {
			info.Version = m[1]
		}
		if ver, build, ok := scanGlibcBanner(filepath.Join(root, rp)); ok {
			info.Version, info.Build = ver, build
		} else if info.Version == "" {
			// A libc.so.6 without banner and name: still glibc's soname.
			if fi, err := os.Stat(filepath.Join(root, rp)); err != nil || !fi.Mode().IsRegular() {
				continue
			}
		}
		return info, true
	}
	return LibcInfo{}, false
}

// scanGlibcBanner reads the version banner out of a glibc shared object.
func scanGlibcBanner(file string) (version, build string, ok bool) {
	f, err := os.Open(file)
	if err != nil {
		return "", "", false
	}
	defer f.Close()
	const marker = "GNU C Library"
	br := bufio.NewReaderSize(f, 1<<16)
	var tail []byte // carries a possible marker split across reads
	buf := make([]byte, 1<<16)
	for total := 0; total < 64<<20; {
		n, err := br.Read(buf)
		total += n
		chunk := append(tail, buf[:n]...)
		if i := bytes.Index(chunk, []byte(marker)); i >= 0 {
			// The banner is one NUL-terminated string; read up to 512 bytes of it.
			s := chunk[i:]
			if len(s) < 512 {
				more := make([]byte, 512-len(s))
				m, _ := io.ReadFull(br, more)
				s = append(s, more[:m]...)
			}
			if j := bytes.IndexByte(s, 0); j >= 0 {
				s = s[:j]
			}
			if m := glibcBanner.FindSubmatch(s); m != nil {
				return string(m[2]), string(m[1]), true
			}
		}
		if len(chunk) > len(marker) {
			tail = append(tail[:0], chunk[len(chunk)-len(marker):]...)
		} else {
			tail = append(tail[:0], chunk...)
		}
		if err != nil {
			break
		}
	}
	return "", "", false
}

// muslIn looks for musl's loader (which is also its libc) in dir.
func muslIn(root, dir string) (LibcInfo, bool) {
	ents, err := os.ReadDir(filepath.Join(root, mustResolve(root, dir)))
	if err != nil {
		return LibcInfo{}, false
	}
	for _, e := range ents {
		n := e.Name()
		if !(strings.HasPrefix(n, "ld-musl-") || strings.HasPrefix(n, "libc.musl-")) || !strings.HasSuffix(n, ".so.1") {
			continue
		}
		info := LibcInfo{Name: "musl", Path: path.Join(dir, n)}
		info.Version = apkVersion(root, "musl")
		return info, true
	}
	return LibcInfo{}, false
}

// apkVersion reads package pkg's version from Alpine's installed database
// ("P:musl" then "V:1.2.4-r2" gives "1.2.4").
func apkVersion(root, pkg string) string {
	rp, err := resolveIn(root, "/lib/apk/db/installed")
	if err != nil {
		return ""
	}
	f, err := os.Open(filepath.Join(root, rp))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			in = false
		case strings.HasPrefix(line, "P:"):
			in = line[2:] == pkg
		case in && strings.HasPrefix(line, "V:"):
			v := line[2:]
			if i := strings.LastIndex(v, "-r"); i > 0 {
				if _, err := strconv.Atoi(v[i+2:]); err == nil {
					v = v[:i]
				}
			}
			return v
		}
	}
	return ""
}

func mustResolve(root, p string) string {
	rp, err := resolveIn(root, p)
	if err != nil {
		return p
	}
	return rp
}

// resolveIn resolves the absolute path p as a process whose root is root
// would: symbolic links, absolute or relative, stay inside root. It returns
// the resolved inside-root path; the file must exist.
func resolveIn(root, p string) (string, error) {
	const maxLinks = 40
	links := 0
	parts := splitPath(path.Clean("/" + p))
	resolved := "/"
	for len(parts) > 0 {
		name := parts[0]
		parts = parts[1:]
		if name == ".." { // never climbs above the root
			resolved = path.Dir(resolved)
			continue
		}
		next := path.Join(resolved, name)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if links++; links > maxLinks {
			return "", errors.New("too many levels of symbolic links")
		}
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			resolved = "/"
		}
		var tparts []string
		for _, s := range strings.Split(target, "/") {
			if s != "" && s != "." {
				tparts = append(tparts, s)
			}
		}
		parts = append(tparts, parts...)
	}
	return resolved, nil
}
