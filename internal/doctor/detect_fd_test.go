package doctor

import (
	"net"
	"os"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
)

const (
	fdNrAccept4   = 288
	fdNrEpollWait = 232
	fdNrSocket    = 41
	fdNrClose     = 3
	fdNrFcntl     = 72
	fdNrIoctl     = 16
	fdNrPipe2     = 293
	fdEMFILE      = -24
	fdENFILE      = -23
)

// fdRun feeds events to a doctor whose fd-exhaustion reads facts with read
// (nil: offline), then the kernel's counts if any.
func fdRun(t *testing.T, evs []event.Event, read func(uint32) *fdFacts, cells []stat.Cell) []Finding {
	t.Helper()
	d := New(host, nil)
	found := false
	for _, det := range d.detectors {
		if x, ok := det.(*fdExhaustion); ok {
			x.read, found = read, true
		}
	}
	if !found {
		t.Fatal("fd-exhaustion is not registered in New")
	}
	for i := range evs {
		d.Observe(&evs[i])
	}
	if cells != nil {
		d.Counts(cells)
	}
	return checked(d.Report()).Findings
}

// leakFacts is a process at a limit of 256 that leaked one file.
func leakFacts(reads *int) func(uint32) *fdFacts {
	return func(pid uint32) *fdFacts {
		*reads++
		return &fdFacts{Soft: 256, Hard: 256, Limits: true, Open: 256,
			Kinds:     map[string]int{"regular files": 250, "pipes": 3, "devices": 3},
			Paths:     map[string]int{"regular files\x00/var/log/app/req.log": 250, "devices\x00/dev/null": 3},
			Sockets:   map[string]int{},
			Listeners: map[int]fdListener{}}
	}
}

func wantWords(t *testing.T, f *Finding, words ...string) {
	t.Helper()
	for _, w := range words {
		if !strings.Contains(f.Title+" "+f.Summary, w) {
			t.Errorf("%q missing from:\n%s\n%s", w, f.Title, f.Summary)
		}
	}
}

// A leak: a process fails openat with EMFILE every millisecond. A warning
// that names the call, the errno, the limit and what the descriptors are,
// with the facts read once, at the first failure.
func TestFDLeak(t *testing.T) {
	var evs []event.Event
	for i := range uint64(50) {
		evs = append(evs, sys(7, 1e9+i*1e6, nrOpenat, fdEMFILE, 2000))
	}
	reads := 0
	fs := fdRun(t, evs, leakFacts(&reads), nil)
	f := byID(fs, "fd-exhaustion")
	if f == nil {
		t.Fatalf("no fd-exhaustion finding: %+v", fs)
	}
	if f.Severity != Warning {
		t.Errorf("severity %s, want warning", f.Severity)
	}
	if reads != 1 {
		t.Errorf("facts read %d times, want once (at the first failure)", reads)
	}
	wantWords(t, f, "50 openat call(s) failed with EMFILE at its limit of 256", "256 (soft), 256 (hard)",
		"cannot raise it itself", "held 256 descriptors: 250 regular files (250× /var/log/app/req.log), 3 devices")
	if f.Evidence["failures"] != uint64(50) || f.Evidence["errno"] != "EMFILE" {
		t.Errorf("evidence %v", f.Evidence)
	}
	procs := f.Evidence["processes"].([]map[string]any)
	if len(procs) != 1 || procs[0]["open_descriptors"] != 256 {
		t.Errorf("processes %v", procs)
	}
	for _, w := range []string{"/var/log/app/req.log 250 times", "LimitNOFILE=", "ulimit -n", "--ulimit nofile", "/proc/7/fd"} {
		if !strings.Contains(f.Fix, w) {
			t.Errorf("fix lacks %q: %s", w, f.Fix)
		}
	}
	if strings.Contains(f.Summary, "busy accept loop") {
		t.Error("an openat leak called an accept loop")
	}
}

// A program probing its limit: three EMFILE, then an open that succeeds.
// True, so reported, but no warning.
func TestFDProbeIsInfo(t *testing.T) {
	evs := []event.Event{
		sys(7, 1000, nrOpenat, fdEMFILE, 900),
		sys(7, 2000, fdNrClose, 0, 300),
		sys(7, 3000, nrOpenat, fdEMFILE, 900),
		sys(7, 4000, fdNrPipe2, fdEMFILE, 900),
		sys(7, 5000, fdNrClose, 0, 300),
		sys(7, 6000, nrOpenat, 5, 900),
	}
	reads := 0
	f := byID(fdRun(t, evs, leakFacts(&reads), nil), "fd-exhaustion")
	if f == nil {
		t.Fatal("no finding")
	}
	if f.Severity != Info {
		t.Errorf("severity %s, want info: %s", f.Severity, f.Title)
	}
	if f.Evidence["failures"] != uint64(3) {
		t.Errorf("failures %v, want 3", f.Evidence["failures"])
	}
	wantWords(t, f, "hit its file descriptor limit 3 time(s)", "probing")
}

// Two failures, then the process exits with an error: it could not go on
// without the descriptor, so it is a warning however few they were.
func TestFDErrorExitWarns(t *testing.T) {
	evs := []event.Event{
		sys(7, 1000, nrOpenat, fdEMFILE, 900),
		sys(7, 2000, nrOpenat, fdEMFILE, 900),
		{Kind: event.KindExit, Time: 3000, PID: 7, TID: 7, Comm: "prog", Proc: event.Proc{ExitCode: 1 << 8, GroupDead: true}},
	}
	f := byID(fdRun(t, evs, nil, nil), "fd-exhaustion")
	if f == nil || f.Severity != Warning {
		t.Fatalf("want a warning, got %+v", f)
	}
	wantWords(t, f, "exited with status 1", "known only live")
}

// The classic: a listener polled with epoll, accept4 failing with EMFILE
// 1,000 times in 10 ms, epoll_wait ready again after each. Critical, named,
// with the listener's queue from the live read.
func TestFDAcceptLoop(t *testing.T) {
	var evs []event.Event
	tm := uint64(1e9)
	for range 1000 {
		evs = append(evs, sys(9, tm, fdNrAccept4, fdEMFILE, 800, 3, 0, 0, 0x80000))
		evs = append(evs, sys(9, tm+1000, fdNrEpollWait, 1, 700, 4, 0x7ffc0000, 1, 100))
		tm += 10_000
	}
	read := func(uint32) *fdFacts {
		return &fdFacts{Soft: 1024, Hard: 4096, Limits: true, Open: 1024,
			Kinds:     map[string]int{"sockets": 1020, "anon inodes (eventpoll)": 1, "devices": 3},
			Sockets:   map[string]int{"TCP CLOSE_WAIT": 1019, "TCP LISTEN": 1},
			Listeners: map[int]fdListener{3: {Addr: "127.0.0.1:8080", Queued: 5}}}
	}
	fs := fdRun(t, evs, read, nil)
	f := byID(fs, "fd-exhaustion")
	if f == nil {
		t.Fatalf("no finding: %+v", fs)
	}
	if f.Severity != Critical {
		t.Errorf("severity %s, want critical", f.Severity)
	}
	wantWords(t, f, "busy accept loop on EMFILE", "accept4 failed 1000 times", "fd 3 (127.0.0.1:8080)",
		"stays queued (5 waiting when the doctor looked)", "1000 times a poll reported it ready", "1019 TCP CLOSE_WAIT",
		"could raise the soft limit itself")
	loop := f.Evidence["accept_loop"].(map[string]any)
	if loop["failures"] != uint64(1000) || loop["ready_after_failure"] != uint64(1000) || loop["fd"] != 3 {
		t.Errorf("accept_loop %v", loop)
	}
	if r := loop["per_second"].(float64); r < 99_000 || r > 101_000 {
		t.Errorf("rate %.0f/s, want 100,000", r)
	}
	for _, w := range []string{"spare descriptor", "back off", "stop polling the listener", "CLOSE_WAIT"} {
		if !strings.Contains(f.Fix, w) {
			t.Errorf("fix lacks %q: %s", w, f.Fix)
		}
	}
	if !strings.Contains(f.Fix, "soft limit (1024) is below its hard one (4096)") {
		t.Errorf("fix does not say the soft limit can be raised: %s", f.Fix)
	}
	// The same failures are not an error-storm, at any count.
	if e := byID(fs, "error-storm"); e != nil {
		t.Errorf("also an error-storm: %s", e.Title)
	}
}

// A server that backs off (failures 20 ms apart, 50 a second) has run out
// of descriptors but is not spinning: a warning, not the accept loop.
func TestFDAcceptBackoffIsNoLoop(t *testing.T) {
	var evs []event.Event
	for i := range uint64(150) {
		evs = append(evs, sys(9, 1e9+i*20_000_000, fdNrAccept4, fdEMFILE, 800, 3, 0, 0, 0x80000))
	}
	f := byID(fdRun(t, evs, nil, nil), "fd-exhaustion")
	if f == nil || f.Severity != Warning {
		t.Fatalf("want a warning, got %+v", f)
	}
	if strings.Contains(f.Title+f.Summary, "busy accept loop") {
		t.Errorf("a backing-off server called a busy loop: %s", f.Title)
	}
	wantWords(t, f, "150 accept4 call(s) failed with EMFILE", "it backs off, so no busy loop")
}

// ENFILE: the host's table. One process: a warning; two: critical.
func TestFDENFILE(t *testing.T) {
	read := func(uint32) *fdFacts {
		return &fdFacts{Soft: 1024, Hard: 1024, Limits: true, Open: 40, Kinds: map[string]int{"sockets": 40},
			FileNr: 99_990, FileMax: 100_000}
	}
	one := []event.Event{sys(7, 1000, fdNrSocket, fdENFILE, 900, 2, 1, 0)}
	f := byID(fdRun(t, one, read, nil), "fd-exhaustion")
	if f == nil || f.Severity != Warning {
		t.Fatalf("one ENFILE: want a warning, got %+v", f)
	}
	wantWords(t, f, "ENFILE", "99990 of at most 100000")
	if nr, _ := f.Evidence["file_nr"].(map[string]any); nr["max"] != uint64(100_000) {
		t.Errorf("file_nr %v", f.Evidence["file_nr"])
	}
	if !strings.Contains(f.Fix, "fs.file-max") || !strings.Contains(f.Fix, "/proc/sys/fs/file-nr") {
		t.Errorf("fix %s", f.Fix)
	}
	two := append(one, sys(8, 2000, nrOpenat, fdENFILE, 900))
	if f := byID(fdRun(t, two, read, nil), "fd-exhaustion"); f == nil || f.Severity != Critical {
		t.Fatalf("ENFILE in two processes: want critical, got %+v", f)
	}
}

// EMFILE from a call that makes no descriptor is not this mechanism, and
// fcntl counts only when it duplicates.
func TestFDOnlyDescriptorCalls(t *testing.T) {
	var evs []event.Event
	for i := range uint64(20) {
		evs = append(evs, sys(7, 1000+i, fdNrIoctl, fdEMFILE, 900, 3, 0xc0045401))
		evs = append(evs, sys(7, 5000+i, fdNrFcntl, fdEMFILE, 900, 3, 4)) // F_SETFL
	}
	if f := byID(fdRun(t, evs, nil, nil), "fd-exhaustion"); f != nil {
		t.Fatalf("unexpected finding: %s", f.Title)
	}
	evs = append(evs, sys(7, 9000, fdNrFcntl, fdEMFILE, 900, 3, 1030)) // F_DUPFD_CLOEXEC
	if f := byID(fdRun(t, evs, nil, nil), "fd-exhaustion"); f == nil || f.Evidence["failures"] != uint64(1) {
		t.Fatalf("F_DUPFD_CLOEXEC's EMFILE not counted: %+v", f)
	}
}

// The kernel's counts: failures lost as events are counted, and the
// descriptors created and closed say the count grew.
func TestFDCounts(t *testing.T) {
	evs := []event.Event{sys(7, 1000, nrOpenat, fdEMFILE, 900)}
	cells := []stat.Cell{
		{Key: stat.Key{PID: 7, Nr: nrOpenat}, Count: 1300, Errors: 40, Errnos: map[int]uint64{24: 40}},
		{Key: stat.Key{PID: 7, Nr: fdNrClose}, Count: 10},
		{Key: stat.Key{PID: 8, Nr: nrOpenat}, Count: 500, Errors: 3, Errnos: map[int]uint64{2: 3}}, // ENOENT: not this
	}
	f := byID(fdRun(t, evs, nil, cells), "fd-exhaustion")
	if f == nil || f.Severity != Warning {
		t.Fatalf("want a warning from 40 counted failures, got %+v", f)
	}
	if f.Evidence["failures"] != uint64(40) {
		t.Errorf("failures %v, want the kernel's 40", f.Evidence["failures"])
	}
	wantWords(t, f, "created 1260 descriptors and closed 10: its count grew by 1250")
	if len(f.Evidence["processes"].([]map[string]any)) != 1 {
		t.Errorf("processes %v", f.Evidence["processes"])
	}
}

// 20,000 EMFILE are fd-exhaustion's only: error-storm skips them.
func TestFDNotAlsoErrorStorm(t *testing.T) {
	var evs []event.Event
	for i := range uint64(20000) {
		evs = append(evs, sys(7, 1e9+i*1000, fdNrSocket, fdEMFILE, 900, 2, 2, 0))
	}
	fs := fdRun(t, evs, nil, nil)
	if byID(fs, "fd-exhaustion") == nil {
		t.Fatal("no fd-exhaustion finding")
	}
	if f := byID(fs, "error-storm"); f != nil {
		t.Errorf("also an error-storm: %s", f.Title)
	}
	// Other errnos of the same call still are.
	evs = evs[:0]
	for i := range uint64(20000) {
		evs = append(evs, sys(7, 1e9+i*1000, fdNrSocket, -97, 900, 2, 2, 0)) // EAFNOSUPPORT
	}
	if byID(fdRun(t, evs, nil, nil), "error-storm") == nil {
		t.Error("error-storm lost its other errnos")
	}
}

// The live reader on this very process: no root needed.
func TestReadFDFacts(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skip(err)
	}
	defer ln.Close()
	var pipes []*os.File
	for range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		pipes = append(pipes, r, w)
	}
	defer func() {
		for _, p := range pipes {
			p.Close()
		}
	}()
	f := readFDFacts(uint32(os.Getpid()))
	if !f.Limits || f.Soft == 0 || f.Open == 0 {
		t.Fatalf("facts %+v", f)
	}
	if f.Kinds["pipes"] < 6 || f.Kinds["sockets"] < 1 {
		t.Errorf("kinds %v, want ≥ 6 pipes and a socket", f.Kinds)
	}
	fd := int(mustFd(t, ln))
	l, ok := f.Listeners[fd]
	if !ok || l.Addr != ln.Addr().String() || l.Queued != 0 {
		t.Errorf("listener on fd %d: %+v, want %s; all %v", fd, l, ln.Addr(), f.Listeners)
	}
	if f.Sockets["TCP LISTEN"] < 1 {
		t.Errorf("sockets %v", f.Sockets)
	}
	if g := readFDFacts(1 << 30); g.Open != 0 || g.Limits || g.Err == "" {
		t.Errorf("a missing process: %+v", g)
	}
}

func mustFd(t *testing.T, ln net.Listener) uintptr {
	raw, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd uintptr
	raw.Control(func(f uintptr) { fd = f })
	return fd
}

func TestHexAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:1F90":                         "127.0.0.1:8080",
		"00000000000000000000000001000000:0050": "[0:0:0:0:0:0:0:1]:80",
		"garbage":                               "garbage",
	} {
		if got := hexAddr(in); got != want {
			t.Errorf("hexAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

// Several processes, one finding: the count is theirs together, and the
// limit is named once when they share it.
func TestFDSeveralProcesses(t *testing.T) {
	var evs []event.Event
	for pid := uint32(20); pid < 24; pid++ {
		for i := range uint64(15) {
			evs = append(evs, sys(pid, 1e9+i*1e6, fdNrPipe2, fdEMFILE, 900))
		}
	}
	reads := 0
	fs := fdRun(t, evs, leakFacts(&reads), nil)
	var n int
	for _, f := range fs {
		if f.ID == "fd-exhaustion" {
			n++
		}
	}
	f := byID(fs, "fd-exhaustion")
	if n != 1 || f == nil || f.Severity != Warning {
		t.Fatalf("want one warning, got %d: %+v", n, fs)
	}
	if reads != 4 {
		t.Errorf("facts read %d times, want once per process", reads)
	}
	wantWords(t, f, "4 processes (prog[20], …) ran out of file descriptors: 60 pipe2 call(s) failed with EMFILE at their limit of 256",
		"prog[20]'s RLIMIT_NOFILE is 256")
}

// A process gone before its facts could be read says so.
func TestFDProcessGone(t *testing.T) {
	var evs []event.Event
	for i := range uint64(12) {
		evs = append(evs, sys(7, 1000+i, nrOpenat, fdEMFILE, 900))
	}
	gone := func(uint32) *fdFacts { return &fdFacts{Err: "open /proc/7/limits: no such file or directory"} }
	f := byID(fdRun(t, evs, gone, nil), "fd-exhaustion")
	if f == nil || f.Severity != Warning {
		t.Fatalf("want a warning, got %+v", f)
	}
	wantWords(t, f, "12 openat call(s) failed with EMFILE", "gone before the doctor could read")
	if strings.Contains(f.Title, "limit of") {
		t.Errorf("a limit named without being read: %s", f.Title)
	}
}
