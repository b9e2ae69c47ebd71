package proc

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeProc makes a /proc with the given files for pid 42 and points Root
// at it for the test.
func fakeProc(t *testing.T, files map[string]string) {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, "42", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := Root
	Root = root
	t.Cleanup(func() { Root = old })
}

func TestMapCountFake(t *testing.T) {
	var b strings.Builder
	// More text than MapCount reads at once, so the count and the gate
	// line at the end span reads.
	for i := range 3000 {
		fmt.Fprintf(&b, "%08x-%08x r--p 00000000 00:00 0 \n", 0x10000+i*0x2000, 0x11000+i*0x2000)
	}
	withGate := b.String() + "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n"
	fakeProc(t, map[string]string{"maps": withGate})
	if n, err := MapCount(42); err != nil || n != 3000 {
		t.Errorf("with the gate line: %d, %v; want 3000", n, err)
	}
	fakeProc(t, map[string]string{"maps": b.String()})
	if n, err := MapCount(42); err != nil || n != 3000 {
		t.Errorf("without: %d, %v; want 3000", n, err)
	}
	fakeProc(t, map[string]string{"maps": ""})
	if n, err := MapCount(42); err != nil || n != 0 {
		t.Errorf("empty: %d, %v", n, err)
	}
}

func TestRSSAndUIDsFake(t *testing.T) {
	fakeProc(t, map[string]string{
		"statm":  "65818 223 190 1 0 104 0\n",
		"status": "Name:\tinotifyfill\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1000\t64321\t64321\t64321\nGid:\t0\t0\t0\t0\n",
	})
	if rss, err := RSS(42); err != nil || rss != 223*uint64(os.Getpagesize()) {
		t.Errorf("RSS %d, %v", rss, err)
	}
	if r, e, err := UIDs(42); err != nil || r != 1000 || e != 64321 {
		t.Errorf("UIDs %d %d, %v", r, e, err)
	}
}

func TestTCPByLocalFake(t *testing.T) {
	const head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	tcp := head +
		"   0: 0100C80A:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n" +
		"   1: 0100C80A:C350 0100C80A:1F90 06 00000000:00000000 03:00000a5c 00000000     0        0 0 3 0\n" +
		"   2: 0100C80A:C38F 0100C80A:1F90 06 00000000:00000000 03:00000a5c 00000000     0        0 0 3 0\n" +
		"   3: 0100C80A:C360 0100C80A:1F90 01 00000000:00000000 00:00000000 00000000     0        0 5 1 0 20 4 0 10 -1\n" +
		"   4: 0100007F:0035 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 7 1 0 100 0 0 10 0\n"
	tcp6 := head +
		"   0: 00000000000000000000000001000000:1F91 00000000000000000000000000000000:0000 06 00000000:00000000 00:00000000 00000000     0        0 9 1 0 100 0 0 10 0\n"
	fakeProc(t, map[string]string{"net/tcp": tcp, "net/tcp6": tcp6})
	got, err := TCPByLocal(42)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d addresses, want 3: %+v", len(got), got)
	}
	a := got[0]
	if a.Addr != netip.MustParseAddr("10.200.0.1") || a.States[TCPListen] != 1 || a.States[TCPTimeWait] != 2 ||
		a.States[TCPEstablished] != 1 || a.MinPort != 50000 || a.MaxPort != 50063 {
		t.Errorf("10.200.0.1: %+v", a)
	}
	if l := got[1]; l.Addr != netip.MustParseAddr("127.0.0.1") || l.States[TCPListen] != 1 || l.MinPort != 0 || l.MaxPort != 0 {
		t.Errorf("127.0.0.1: %+v", l)
	}
	if l := got[2]; l.Addr != netip.IPv6Loopback() || l.States[TCPTimeWait] != 1 || l.MinPort != 8081 {
		t.Errorf("::1: %+v", l)
	}
}

func TestInotifyWatchesSelf(t *testing.T) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Skip(err)
	}
	defer unix.Close(fd)
	dir := t.TempDir()
	for i := range 3 {
		p := filepath.Join(dir, strconv.Itoa(i))
		os.WriteFile(p, nil, 0o644)
		if _, err := unix.InotifyAddWatch(fd, p, unix.IN_MODIFY); err != nil {
			t.Skip(err)
		}
	}
	got, err := InotifyWatches(uint32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range got {
		if w.FD == fd {
			found = true
			if w.Watches != 3 {
				t.Errorf("fd %d: %d watches, want 3", fd, w.Watches)
			}
		}
	}
	if !found {
		t.Errorf("fd %d not among %+v", fd, got)
	}
	if r, e, err := UIDs(uint32(os.Getpid())); err != nil || r != uint32(os.Getuid()) || e != uint32(os.Geteuid()) {
		t.Errorf("UIDs %d %d, %v", r, e, err)
	}
}

// scenario builds scenarios/bin/NAME, starts it with args, and returns the
// fields of its first "NAME: full k=v ..." line on stderr. The run ends
// with the test.
func scenario(t *testing.T, name string, args ...string) map[string]string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if out, err := exec.Command("make", "-s", "-C", "../../scenarios", "bin/"+name).CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", name, err, out)
	}
	cmd := exec.Command("../../scenarios/bin/"+name, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// SIGTERM: the scenario puts back what it changed.
		cmd.Process.Signal(unix.SIGTERM)
		cmd.Wait()
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), name+": full ") {
				lines <- sc.Text()
			}
		}
		close(lines)
	}()
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatalf("%s ended before it was full", name)
		}
		go func() {
			for range lines {
			}
		}()
		kv := map[string]string{}
		for _, m := range regexp.MustCompile(`(\w+)=(\S+)`).FindAllStringSubmatch(line, -1) {
			kv[m[1]] = m[2]
		}
		t.Log(line)
		return kv
	case <-time.After(30 * time.Second):
		t.Fatalf("%s not full after 30 s", name)
	}
	return nil
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// The count MapCount reads is the one the scenario reached and the kernel
// refused mmap at: one above vm.max_map_count on 6.18, where do_mmap
// refuses a count above the limit (at it, where it tests >=).
func TestMapCountScenario(t *testing.T) {
	kv := scenario(t, "mapcount", "-d", "5")
	pid := uint32(atoi(t, kv["pid"]))
	n, err := MapCount(pid)
	if err != nil {
		t.Fatal(err)
	}
	if lim := atoi(t, kv["max_map_count"]); n != atoi(t, kv["maps"]) || n != lim+1 && n != lim {
		t.Errorf("MapCount %d; the scenario counted %s, vm.max_map_count %s", n, kv["maps"], kv["max_map_count"])
	}
	// The mappings are untouched: address space, not memory.
	if rss, err := RSS(pid); err != nil || rss == 0 || rss > 16<<20 {
		t.Errorf("RSS %d, %v", rss, err)
	}
}

// A watcher refused ENOSPC holds exactly the limit's watches on one
// instance, as the dedicated user the scenario runs as. The limit is set
// in a user namespace of the scenario's own (-N): lowering the host's
// would refuse every user's watches while the tests run.
func TestInotifyWatchesScenario(t *testing.T) {
	kv := scenario(t, "inotifyfill", "-N", "-r", "500")
	pid := uint32(atoi(t, kv["pid"]))
	got, err := InotifyWatches(pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Watches != atoi(t, kv["watches"]) || got[0].Watches != atoi(t, kv["limit"]) {
		t.Errorf("%+v; the scenario holds %s watches, limit %s", got, kv["watches"], kv["limit"])
	}
	uid := uint32(atoi(t, kv["uid"]))
	if _, e, err := UIDs(pid); err != nil || e != uid {
		t.Errorf("euid %d, %v; want %d", e, err, uid)
	}
	// The dedicated user's only watcher holds all its watches.
	users, err := InotifyByUser(uid)
	if err != nil || len(users) != 1 || users[0] != (InotifyUse{PID: pid, Instances: 1, Watches: atoi(t, kv["limit"])}) {
		t.Errorf("InotifyByUser(%d) = %+v, %v", uid, users, err)
	}
}

func TestInotifyInstancesScenario(t *testing.T) {
	kv := scenario(t, "inotifyfill", "-m", "instances", "-r", "500")
	got, err := InotifyWatches(uint32(atoi(t, kv["pid"])))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != atoi(t, kv["instances"]) || len(got) != atoi(t, kv["limit"]) {
		t.Errorf("%d instances; the scenario holds %s, limit %s", len(got), kv["instances"], kv["limit"])
	}
	users, err := InotifyByUser(uint32(atoi(t, kv["uid"])))
	if err != nil || len(users) != 1 || users[0].Instances != atoi(t, kv["limit"]) || users[0].Watches != 0 {
		t.Errorf("InotifyByUser = %+v, %v", users, err)
	}
}

// Every port of the scenario's range is in TIME_WAIT on the client's
// address, in its own namespace, when connect says EADDRNOTAVAIL.
func TestTCPByLocalScenario(t *testing.T) {
	kv := scenario(t, "portexhaust", "-d", "5")
	pid := uint32(atoi(t, kv["pid"]))
	lo, hi, _ := strings.Cut(kv["range"], "-")
	addr := netip.MustParseAddr(kv["addr"])
	var l *TCPLocal
	// The last connection reaches TIME_WAIT once the server has closed
	// its side; until then its port is held in FIN_WAIT2.
	for try := 0; try < 20; try++ {
		got, err := TCPByLocal(pid)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i].Addr == addr {
				l = &got[i]
			}
		}
		if l != nil && l.States[TCPTimeWait] == atoi(t, kv["connects"]) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if l == nil {
		t.Fatalf("no sockets on %s", addr)
	}
	if l.States[TCPTimeWait] != atoi(t, kv["connects"]) || int(l.MinPort) != atoi(t, lo) || int(l.MaxPort) != atoi(t, hi) ||
		l.States[TCPListen] != 1 {
		t.Errorf("%+v; the scenario made %s connections over %s", *l, kv["connects"], kv["range"])
	}
	plo, phi, err := LocalPortRange(pid)
	if err != nil || int(plo) != atoi(t, lo) || int(phi) != atoi(t, hi) {
		t.Errorf("LocalPortRange %d-%d, %v; want %s", plo, phi, err, kv["range"])
	}
	// This process's own namespace is not the scenario's.
	b, _ := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	slo, shi, err := LocalPortRange(uint32(os.Getpid()))
	if err != nil || fmt.Sprintf("%d %d", slo, shi) != strings.Join(strings.Fields(string(b)), " ") {
		t.Errorf("own LocalPortRange %d-%d, %v; /proc/sys says %q", slo, shi, err, b)
	}
}

func TestInotifyWatchesFake(t *testing.T) {
	fakeProc(t, map[string]string{
		"fdinfo/3": "pos:\t0\nflags:\t02004000\nmnt_id:\t16\nino:\t1057\n" +
			"inotify wd:2 ino:2c01 sdev:800001 mask:8 ignored_mask:0 fhandle-bytes:8 fhandle-type:1 f_handle:012c000054c2a1b3\n" +
			"inotify wd:1 ino:2c00 sdev:800001 mask:8 ignored_mask:0 fhandle-bytes:8 fhandle-type:1 f_handle:002c00005a2c0c6e\n",
		"fdinfo/4": "pos:\t0\nflags:\t02004000\nmnt_id:\t16\nino:\t1057\n",
		"fdinfo/5": "pos:\t0\nflags:\t0100002\n",
		"status":   "Name:\tw\nUid:\t0\t64321\t64321\t64321\n",
	})
	dir := filepath.Join(Root, "42", "fd")
	os.MkdirAll(dir, 0o755)
	for fd, target := range map[string]string{"3": "anon_inode:inotify", "4": "anon_inode:inotify", "5": "/dev/null"} {
		if err := os.Symlink(target, filepath.Join(dir, fd)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := InotifyWatches(42)
	if err != nil || len(got) != 2 || got[0] != (InotifyFD{3, 2}) || got[1] != (InotifyFD{4, 0}) {
		t.Errorf("%+v, %v", got, err)
	}
	users, err := InotifyByUser(64321)
	if err != nil || len(users) != 1 || users[0] != (InotifyUse{PID: 42, Instances: 2, Watches: 2}) {
		t.Errorf("InotifyByUser: %+v, %v", users, err)
	}
	if users, _ := InotifyByUser(0); len(users) != 0 {
		t.Errorf("uid 0 (the real uid, not the effective one): %+v", users)
	}
}
