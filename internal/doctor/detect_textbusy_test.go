package doctor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

const (
	tbNrOpen     = 2
	tbNrClose    = 3
	tbNrExecve   = 59
	tbNrTruncate = 76
	tbNrOpenat   = 257
	tbETXTBSY    = -26
	tbOWronly    = 1
	tbATFDCWD    = 0xffffff9c
)

func tbRun(t *testing.T, evs []event.Event, live bool, read func(uint32, string, bool) *tbFacts) []Finding {
	t.Helper()
	d := New(host, nil)
	found := false
	for _, det := range d.detectors {
		if x, ok := det.(*textBusy); ok {
			found = true
			if live {
				x.read = read
				x.abs = func(_ uint32, _ int32, p string) string { return "/work/" + p }
			}
		}
	}
	if !found {
		t.Fatal("text-busy is not registered in New")
	}
	for i := range evs {
		d.Observe(&evs[i])
	}
	return checked(d.Report()).Findings
}

func openatW(pid uint32, t uint64, path string, ret int64) event.Event {
	e := sys(pid, t, tbNrOpenat, ret, 3000, tbATFDCWD, 0x1000, tbOWronly|0x200)
	e.Syscall.Data[1] = []byte(path)
	return e
}

func execveOf(pid uint32, t uint64, path string, ret int64) event.Event {
	e := sys(pid, t, tbNrExecve, ret, 30000, 0x1000, 0x2000, 0x3000)
	e.Syscall.Data[0] = []byte(path)
	return e
}

func execEvent(pid uint32, t uint64, comm, path string) event.Event {
	return event.Event{Kind: event.KindExec, Time: t, PID: pid, TID: pid, Comm: comm, Proc: event.Proc{Filename: path}}
}

// Live, the file is a running program: a warning that names the holder
// read by inode, that the program retried and gave up, and the rename fix.
func TestTextBusyWriteLive(t *testing.T) {
	var evs []event.Event
	for i := range uint64(5) {
		evs = append(evs, openatW(7, 1e9+i*100e6, "/srv/app/server", tbETXTBSY))
	}
	evs = append(evs, exitOf(7, 1.5e9, 1))
	reads := 0
	read := func(pid uint32, path string, exec bool) *tbFacts {
		reads++
		if pid != 7 || path != "/srv/app/server" || exec {
			t.Errorf("read %d %q %v", pid, path, exec)
		}
		return &tbFacts{Ino: 1234, Dev: "254:0", Holders: []tbHolder{{PID: 42, Comm: "server", FD: -1}}}
	}
	f := byID(tbRun(t, evs, true, read), TextBusy)
	if f == nil || f.Severity != Warning {
		t.Fatalf("finding %+v", f)
	}
	wantWords(t, f, `5 openat call(s) failed with ETXTBSY`, `"/srv/app/server"`, "running executable (/proc/PID/exe) of server[42]",
		"inode 1234", "gave up: exit status 1", "the running program of server[42]")
	if reads != 1 || f.Key != "text-busy:prog|write|/srv/app/server|exe" {
		t.Errorf("reads %d key %q", reads, f.Key)
	}
	if !strings.Contains(f.Fix, "mv /srv/app/.server.new /srv/app/server") || !strings.Contains(f.Fix, "kill 42") {
		t.Errorf("fix: %s", f.Fix)
	}
}

// An exec refused: the holder is a descriptor open for writing, with its
// mode, and the fix is to close it. A relative path is made absolute.
func TestTextBusyExecLive(t *testing.T) {
	evs := []event.Event{execveOf(7, 1e9, "job.sh", tbETXTBSY), execveOf(7, 1.2e9, "job.sh", tbETXTBSY)}
	read := func(_ uint32, path string, exec bool) *tbFacts {
		if path != "/work/job.sh" || !exec {
			t.Errorf("read %q %v", path, exec)
		}
		return &tbFacts{Ino: 99, Dev: "254:0", Holders: []tbHolder{{PID: 43, Comm: "editor", FD: 4, Mode: "O_WRONLY"}}}
	}
	f := byID(tbRun(t, evs, true, read), TextBusy)
	if f == nil || f.Severity != Warning {
		t.Fatalf("finding %+v", f)
	}
	wantWords(t, f, "2 execve call(s)", `execute "/work/job.sh"`, "editor[43] (fd 4, O_WRONLY) held it open for writing",
		"kept retrying: prog[7] failed 2 times")
	if !strings.Contains(f.Fix, "O_CLOEXEC") {
		t.Errorf("fix: %s", f.Fix)
	}
}

// One refusal, then the program carried on and exited 0: handled, info.
// Several processes refused on one file make one finding.
func TestTextBusyProbeAndProcs(t *testing.T) {
	read := func(uint32, string, bool) *tbFacts { return &tbFacts{Ino: 5, Dev: "8:1"} }
	evs := []event.Event{openatW(7, 1e9, "/srv/server", tbETXTBSY), exitOf(7, 1.5e9, 0)}
	f := byID(tbRun(t, evs, true, read), TextBusy)
	if f == nil || f.Severity != Info {
		t.Fatalf("probe: %+v", f)
	}
	wantWords(t, f, "handled", "no process held that inode")

	evs = nil
	for pid := uint32(10); pid < 13; pid++ {
		evs = append(evs, openatW(pid, 1e9+uint64(pid), "/srv/server", tbETXTBSY))
	}
	fs := tbRun(t, evs, true, read)
	if len(fs) != 1 || fs[0].ID != TextBusy || len(fs[0].Procs) != 3 || fs[0].Severity != Info {
		t.Fatalf("procs: %+v", fs)
	}
	wantWords(t, &fs[0], "3 processes (prog[10]")
}

// From a capture: the holder is named only when the capture's calls show
// it, and said to be inferred.
func TestTextBusyCapture(t *testing.T) {
	evs := []event.Event{execEvent(50, 0.5e9, "server", "/srv/server")}
	for i := range uint64(3) {
		evs = append(evs, openatW(7, 1e9+i*1e8, "/srv/server", tbETXTBSY))
	}
	f := byID(tbRun(t, evs, false, nil), TextBusy)
	if f == nil || f.Severity != Warning {
		t.Fatalf("finding %+v", f)
	}
	wantWords(t, f, "server[50] executed it earlier in the capture", "likely the running program of server[50] (inferred)")

	// The executor exited before the failures: it holds nothing.
	evs = append([]event.Event{execEvent(50, 0.5e9, "server", "/srv/server"), exitOf(50, 0.6e9, 0)}, evs[1:]...)
	f = byID(tbRun(t, evs, false, nil), TextBusy)
	wantWords(t, f, "holder unknown", "fuser -v /srv/server")

	// A writer that has not closed the script holds it against exec; one
	// that closed it does not.
	w := openatW(60, 0.5e9, "/srv/job.sh", 4)
	w.Comm = "editor"
	evs = []event.Event{w, execveOf(7, 1e9, "/srv/job.sh", tbETXTBSY)}
	f = byID(tbRun(t, evs, false, nil), TextBusy)
	wantWords(t, f, "editor[60] (fd 4, for writing) opened it for writing earlier in the capture", "(inferred)")
	evs = []event.Event{w, sys(60, 0.7e9, tbNrClose, 0, 1000, 4), execveOf(7, 1e9, "/srv/job.sh", tbETXTBSY)}
	f = byID(tbRun(t, evs, false, nil), TextBusy)
	wantWords(t, f, "holder unknown")
}

// readTextBusy against the kernel: a running copy of a program is found by
// its inode, not its name, and a descriptor open for writing with its mode.
func TestReadTextBusy(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "sleeper")
	src, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Skip(err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := uint32(cmd.Process.Pid)
	var f *tbFacts
	for range 200 {
		if f = readTextBusy(uint32(os.Getpid()), bin, false); len(f.Holders) > 0 {
			break
		}
	}
	if f.Err != "" || len(f.Holders) != 1 || f.Holders[0].PID != pid || f.Holders[0].Comm != "sleeper" || f.Ino == 0 {
		t.Fatalf("exe holders %+v (want pid %d)", f, pid)
	}
	if f.MntNS == "" || f.OwnNS {
		t.Errorf("this process's mount namespace %q read as its own (not the host's): %v", f.MntNS, f.OwnNS)
	}
	// The same bytes at another inode are not held.
	other := filepath.Join(dir, "copy")
	if err := os.WriteFile(other, src, 0o755); err != nil {
		t.Fatal(err)
	}
	if g := readTextBusy(uint32(os.Getpid()), other, false); len(g.Holders) != 0 {
		t.Errorf("a copy is held: %+v", g)
	}

	script := filepath.Join(dir, "job.sh")
	wf, err := os.OpenFile(script, os.O_RDWR|os.O_CREATE, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	defer wf.Close()
	rf, err := os.Open(script)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	g := readTextBusy(uint32(os.Getpid()), script, true)
	if len(g.Holders) != 1 || g.Holders[0].PID != uint32(os.Getpid()) || g.Holders[0].FD != int(wf.Fd()) || g.Holders[0].Mode != "O_RDWR" {
		t.Fatalf("writers %+v (want fd %d O_RDWR; the read-only fd %d is no writer)", g, wf.Fd(), rf.Fd())
	}
}

// In a mount namespace of its own (a container's), the path is the
// container's: the finding gives the host's way to it, and the fix says to
// run its commands in the container, not on the host, where the same path
// is another file or none.
func TestTextBusyOwnMountNS(t *testing.T) {
	var evs []event.Event
	for i := range uint64(3) {
		evs = append(evs, openatW(7, 1e9+i*100e6, "/srv/app/server", tbETXTBSY))
	}
	read := func(uint32, string, bool) *tbFacts {
		return &tbFacts{Ino: 1234, Dev: "0:39", Holders: []tbHolder{{PID: 42, Comm: "server", FD: -1}}, MntNS: "mnt:[4026532177]", OwnNS: true}
	}
	f := byID(tbRun(t, evs, true, read), TextBusy)
	if f == nil {
		t.Fatal("no finding")
	}
	wantWords(t, f, "mnt:[4026532177], not the host's", "from the host it is /proc/7/root/srv/app/server")
	if !strings.Contains(f.Fix, "nsenter -t 7 -m") || !strings.Contains(f.Fix, "not on the host") || f.Evidence["mount_namespace_own"] != true {
		t.Errorf("fix %q evidence %v", f.Fix, f.Evidence)
	}
	host := func(uint32, string, bool) *tbFacts {
		return &tbFacts{Ino: 1234, Dev: "254:0", Holders: []tbHolder{{PID: 42, Comm: "server", FD: -1}}, MntNS: "mnt:[4026531841]"}
	}
	g := byID(tbRun(t, evs, true, host), TextBusy)
	if g == nil || strings.Contains(g.Summary, "not the host's") || strings.Contains(g.Fix, "nsenter") {
		t.Errorf("in the host's namespace: %+v", g)
	}
}
