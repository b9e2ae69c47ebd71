package container

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseCgroupFile: any /proc/PID/cgroup gives a placement, never a
// panic, and one its lines account for: the v2 path is the last v2 line's,
// and a container named comes from some line's path.
func FuzzParseCgroupFile(f *testing.F) {
	for _, s := range []string{
		"0::/system.slice/containerd.service\n",
		"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0c4c3e3a_6d0e_4a43_9a8c_2a8a0f5d1a11.slice/cri-containerd-" +
			"3f2c6b8d7a1e4b5c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e.scope\n",
		"12:pids:/docker/3f2c6b8d7a1e4b5c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e\n1:name=systemd:/docker/3f2c6b8d7a1e\n0::/\n",
		"11:cpu,cpuacct:/default/ctr1\n0::/system.slice/docker-3f2c6b8d7a1e4b5c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e.scope",
		"x:y\n::\n0:::\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pl := ParseCgroupFile(data)
		lines := CgroupLines(data)
		v2 := ""
		for _, l := range lines {
			if l.V2() {
				v2 = l.Path
			}
		}
		if pl.V2Path != v2 {
			t.Fatalf("v2 path %q, last v2 line %q", pl.V2Path, v2)
		}
		if pl.Ref.ID != "" && !strings.Contains(string(data), pl.Ref.ID) {
			t.Fatalf("container %q is in no line of %q", pl.Ref.ID, data)
		}
	})
}

// FuzzDockerInspect: any answer from a Docker socket gives metadata or an
// error.
func FuzzDockerInspect(f *testing.F) {
	f.Add([]byte(`{"Name":"/web","Image":"sha256:1","Config":{"Image":"nginx:1","Labels":{"io.kubernetes.pod.name":"p","io.kubernetes.pod.namespace":"n"}}}`))
	f.Add([]byte(`{"Config":null}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := parseDockerInspect(body, "docker")
		if err == nil && m.Source != "docker" {
			t.Fatalf("source %q", m.Source)
		}
	})
}

// FuzzLibcFiles: a container's own files (its glibc, Alpine's package
// database) may say anything; reading them gives a version or none.
func FuzzLibcFiles(f *testing.F) {
	f.Add([]byte("\x00GNU C Library (Debian GLIBC 2.36-9+deb12u4) stable release version 2.36.\n\x00"),
		[]byte("P:musl\nV:1.2.4-r2\n\nP:busybox\nV:1.36.1-r5\n"))
	f.Add([]byte("GNU C Library"), []byte("P:musl\nV:-r\n"))
	f.Fuzz(func(t *testing.T, banner, apkdb []byte) {
		root := t.TempDir()
		lib := filepath.Join(root, "libc.so.6")
		db := filepath.Join(root, "lib", "apk", "db", "installed")
		if err := os.MkdirAll(filepath.Dir(db), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(lib, banner, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(db, apkdb, 0o644); err != nil {
			t.Fatal(err)
		}
		if v, _, ok := scanGlibcBanner(lib); ok && !strings.Contains(string(banner), v) {
			t.Fatalf("version %q is not in the banner", v)
		}
		if v := apkVersion(root, "musl"); v != "" && !strings.Contains(string(apkdb), v) {
			t.Fatalf("version %q is not in the database", v)
		}
	})
}
