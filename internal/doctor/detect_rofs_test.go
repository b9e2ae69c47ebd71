package doctor

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

const (
	rfNrMkdir  = 83
	rfNrUnlink = 87
	rfNrAccess = 21
	rfNrMount  = 165
	rfEROFS    = -30
	rfEACCES   = -13
)

func rofsRun(t *testing.T, evs []event.Event, live bool, read func(uint32, string) *rofsFacts) []Finding {
	t.Helper()
	d := New(host, nil)
	found := false
	for _, det := range d.detectors {
		if x, ok := det.(*rofs); ok {
			found = true
			if live {
				x.read = read
				x.abs = func(_ uint32, _ int32, p string) string { return "/work/" + p }
			}
		}
	}
	if !found {
		t.Fatal("read-only-fs is not registered in New")
	}
	for i := range evs {
		d.Observe(&evs[i])
	}
	return checked(d.Report()).Findings
}

func mkdirOf(pid uint32, t uint64, path string, ret int64) event.Event {
	e := sys(pid, t, rfNrMkdir, ret, 2000, 0x1000, 0o755)
	e.Syscall.Data[0] = []byte(path)
	return e
}

// Live, a read-only bind mount: the mount named from the process's own
// mountinfo, ro by its mount options only, retried then given up.
func TestROFSBindLive(t *testing.T) {
	var evs []event.Event
	for i := range uint64(4) {
		evs = append(evs, mkdirOf(7, 1e9+i*1e8, "/data/cache", rfEROFS))
	}
	evs = append(evs, exitOf(7, 1.5e9, 1))
	reads := 0
	read := func(pid uint32, path string) *rofsFacts {
		reads++
		if pid != 7 || path != "/data/cache" {
			t.Errorf("read %d %q", pid, path)
		}
		return &rofsFacts{Point: "/data", FSType: "ext4", Source: "/dev/vda1", MountOpts: "ro,relatime", SuperOpts: "rw",
			MountRO: true, OwnNS: true, MntNS: "mnt:[4026532500]", DevMatch: true}
	}
	f := byID(rofsRun(t, evs, true, read), ReadOnlyFS)
	if f == nil || f.Severity != Warning {
		t.Fatalf("finding %+v", f)
	}
	wantWords(t, f, "4 mkdir call(s) failed with EROFS", `"/data/cache"`, `mount at "/data"`, "own mount namespace (mnt:[4026532500]",
		"Only this mount is read-only", "gave up: exit status 1", "a read-only mount of a writable filesystem")
	if reads != 1 || !strings.Contains(f.Fix, "remount,bind,rw /data") {
		t.Errorf("reads %d fix %s", reads, f.Fix)
	}
}

// The kinds of read-only told apart: a container's read-only root, an
// ext4 read-only at the superblock (errors), an image format, an overlay
// with no upper layer.
func TestROFSKinds(t *testing.T) {
	for _, c := range []struct {
		facts rofsFacts
		words []string
		fix   string
	}{
		{rofsFacts{Point: "/", FSType: "overlay", Source: "overlay", MountOpts: "ro,relatime", SuperOpts: "rw,lowerdir=/l,upperdir=/u,workdir=/w",
			MountRO: true, OwnNS: true, MntNS: "mnt:[1]"}, []string{"the container's read-only root", "readOnlyRootFilesystem"}, "emptyDir"},
		{rofsFacts{Point: "/var", FSType: "ext4", Source: "/dev/sdb1", MountOpts: "rw", SuperOpts: "ro,errors=remount-ro", SuperRO: true},
			[]string{"read-only filesystem", "remounted it read-only after errors", "the host's"}, "fsck"},
		{rofsFacts{Point: "/snap/x", FSType: "squashfs", Source: "/dev/loop3", MountOpts: "ro", SuperOpts: "ro", MountRO: true, SuperRO: true},
			[]string{"a read-only image", "squashfs is a read-only format"}, "tmpfs"},
		{rofsFacts{Point: "/app", FSType: "overlay", Source: "overlay", MountOpts: "rw", SuperOpts: "ro,lowerdir=/a:/b", SuperRO: true},
			[]string{"no upper layer"}, "emptyDir"},
	} {
		read := func(uint32, string) *rofsFacts { fc := c.facts; return &fc }
		evs := []event.Event{mkdirOf(7, 1e9, c.facts.Point+"/x", rfEROFS), mkdirOf(7, 2e9, c.facts.Point+"/x", rfEROFS)}
		f := byID(rofsRun(t, evs, true, read), ReadOnlyFS)
		if f == nil || f.Severity != Warning {
			t.Fatalf("%s: finding %+v", c.facts.Point, f)
		}
		wantWords(t, f, c.words...)
		if !strings.Contains(f.Fix, c.fix) {
			t.Errorf("%s: fix %s", c.facts.Point, f.Fix)
		}
	}
}

// A probe: one refusal, the process exits 0: info. access(W_OK)'s EROFS
// and an EACCES are not this detector's.
func TestROFSBenign(t *testing.T) {
	read := func(uint32, string) *rofsFacts {
		return &rofsFacts{Point: "/ro", FSType: "tmpfs", MountOpts: "ro", SuperOpts: "ro", MountRO: true, SuperRO: true}
	}
	evs := []event.Event{mkdirOf(7, 1e9, "/ro/cache", rfEROFS), mkdirOf(7, 1.1e9, "/tmp/cache", 0), exitOf(7, 1.2e9, 0)}
	f := byID(rofsRun(t, evs, true, read), ReadOnlyFS)
	if f == nil || f.Severity != Info {
		t.Fatalf("probe: %+v", f)
	}
	wantWords(t, f, "handled")

	acc := sys(7, 1e9, rfNrAccess, rfEROFS, 1000, 0x1000, 2)
	acc.Syscall.Data[0] = []byte("/ro")
	evs = []event.Event{acc, acc, mkdirOf(7, 2e9, "/ro/x", rfEACCES), mkdirOf(7, 3e9, "/ro/x", rfEACCES)}
	if f := byID(rofsRun(t, evs, true, read), ReadOnlyFS); f != nil {
		t.Errorf("access and EACCES reported: %+v", f)
	}

	// Many paths, each refused once: a program persisting, not probing.
	evs = nil
	for i := range uint64(rofsPersist) {
		evs = append(evs, mkdirOf(7, 1e9+i, "/ro/d"+string(rune('a'+i)), rfEROFS))
	}
	f = byID(rofsRun(t, evs, true, read), ReadOnlyFS)
	if f == nil || f.Severity != Warning {
		t.Fatalf("persisting: %+v", f)
	}
	wantWords(t, f, "10 mkdir call(s)", "kept writing there: 10 refused changes")
}

// From a capture: the read-only mount inferred from the capture's own
// mount calls, or said unknown.
func TestROFSCapture(t *testing.T) {
	m := sys(5, 0.5e9, rfNrMount, 0, 5000, 0, 0x2000, 0, msRemount|msRdonly|msBind, 0)
	m.Syscall.Data[1], m.Comm = []byte("/srv/data"), "setup"
	evs := []event.Event{m}
	for i := range uint64(3) {
		evs = append(evs, mkdirOf(7, 1e9+i*1e8, "/srv/data/cache", rfEROFS))
	}
	f := byID(rofsRun(t, evs, false, nil), ReadOnlyFS)
	if f == nil || f.Severity != Warning {
		t.Fatalf("finding %+v", f)
	}
	wantWords(t, f, `setup[5] remounted "/srv/data" read-only (MS_REMOUNT|MS_RDONLY|MS_BIND`, "inferred from the capture's mount calls")

	f = byID(rofsRun(t, evs[1:], false, nil), ReadOnlyFS)
	wantWords(t, f, "mount unknown from a capture", "read-only from before it began")
	if !strings.Contains(f.Fix, "findmnt -T /srv/data") {
		t.Errorf("fix %s", f.Fix)
	}
}

// readROFS against the kernel: a read-only bind mount in a mount namespace
// of its own (unshare -m), read through /proc/PID.
func TestReadROFS(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root for unshare -m")
	}
	dir := t.TempDir()
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		"mkdir -p "+dir+"/ro && mount --bind "+dir+"/ro "+dir+"/ro && mount -o remount,bind,ro "+dir+"/ro && echo ok && exec sleep 30")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	buf := make([]byte, 3)
	if n, _ := out.Read(buf); string(buf[:n]) != "ok\n" {
		t.Skipf("no read-only bind mount: %q", buf[:n])
	}
	f := readROFS(uint32(cmd.Process.Pid), dir+"/ro/new/file")
	if f.Err != "" || f.Point != dir+"/ro" || !f.MountRO || f.SuperRO || !f.OwnNS || !f.DevMatch {
		t.Fatalf("facts %+v", f)
	}
	// The doctor's own namespace has no such mount.
	if g := readROFS(uint32(os.Getpid()), dir+"/ro/new/file"); g.Point == dir+"/ro" || g.MountRO && g.Point != "/" {
		t.Errorf("own namespace %+v", g)
	}
}

// A process gone before its mountinfo was read: said so, not a mount
// named "" nor the host's namespace.
func TestROFSUnread(t *testing.T) {
	read := func(uint32, string) *rofsFacts { return &rofsFacts{Err: "the process had exited when read"} }
	evs := []event.Event{mkdirOf(7, 1e9, "/repo/.git/x", rfEROFS)}
	f := byID(rofsRun(t, evs, true, read), ReadOnlyFS)
	if f == nil || f.Severity != Info {
		t.Fatalf("finding %+v", f)
	}
	wantWords(t, f, `"/repo/.git" (mount not read)`, "could not be read at the first failure (the process had exited when read)")
	if strings.Contains(f.Summary, "host's") || f.Evidence["read_error"] == nil {
		t.Errorf("summary %s evidence %v", f.Summary, f.Evidence)
	}
}
