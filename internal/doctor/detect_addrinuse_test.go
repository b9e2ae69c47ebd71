package doctor

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/stat"
)

const (
	auNrBind     = 49
	auNrListen   = 50
	auEADDRINUSE = -98
)

func inUseRun(t *testing.T, evs []event.Event, live bool, read func(uint32, uint16) *inUseFacts, cells []stat.Cell) []Finding {
	t.Helper()
	d := New(host, nil)
	found := false
	for _, det := range d.detectors {
		if x, ok := det.(*addrInUse); ok {
			found = true
			if live {
				x.read = read
				x.sockname = func(uint32, int) string { return "" }
			}
		}
	}
	if !found {
		t.Fatal("port-in-use is not registered in New")
	}
	for i := range evs {
		d.Observe(&evs[i])
	}
	if cells != nil {
		d.Counts(cells)
	}
	return checked(d.Report()).Findings
}

// bindTo is a bind of fd 3 to 127.0.0.1:port.
func bindTo(pid uint32, t uint64, port uint16, ret int64) event.Event {
	e := sys(pid, t, auNrBind, ret, 5000, 3, 0, 16)
	e.Syscall.Data[1] = []byte{2, 0, byte(port >> 8), byte(port), 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	return e
}

func exitOf(pid uint32, t uint64, code int32) event.Event {
	return event.Event{Kind: event.KindExit, Time: t, PID: pid, TID: pid, Comm: "prog",
		Proc: event.Proc{ExitCode: code << 8, GroupDead: true}}
}

// Live, another process listens on the port: a warning that names the
// port, the namespace, the holder, and that the program gave up (exit 1
// right after its last failure), with the kernel's exact count.
func TestPortInUseListener(t *testing.T) {
	var evs []event.Event
	for i := range uint64(5) {
		evs = append(evs, bindTo(7, 1e9+i*100e6, 8080, auEADDRINUSE))
	}
	evs = append(evs, exitOf(7, 1.5e9, 1))
	reads := 0
	read := func(pid uint32, port uint16) *inUseFacts {
		reads++
		if pid != 7 || port != 8080 {
			t.Errorf("read %d %d", pid, port)
		}
		return &inUseFacts{NetNS: "net:[4026532999]", States: map[int]int{},
			Listen: []inUseHolder{{PID: 42, Comm: "holder", Local: "0.0.0.0:8080"}}}
	}
	cells := []stat.Cell{{Key: stat.Key{PID: 7, Nr: auNrBind}, Count: 6, Errors: 6, Errnos: map[int]uint64{98: 6}}}
	f := byID(inUseRun(t, evs, true, read, cells), PortInUse)
	if f == nil || f.Severity != Warning {
		t.Fatalf("finding %+v", f)
	}
	wantWords(t, f, "6 bind call(s)", "127.0.0.1:8080", "net:[4026532999], not the host's", "LISTEN by holder[42]",
		"gave up", "exit status 1")
	if reads != 1 || f.Key != "port-in-use:prog|127.0.0.1:8080|listen" {
		t.Errorf("reads %d key %q", reads, f.Key)
	}
	if !strings.Contains(f.Fix, "nsenter -t 7 -n ss") {
		t.Errorf("fix: %s", f.Fix)
	}
}

// Live, only TIME_WAIT connections on the port, and the program retries
// without exiting: a warning that says it restarted without SO_REUSEADDR,
// and a fix that names it.
func TestPortInUseTimeWait(t *testing.T) {
	var evs []event.Event
	for i := range uint64(4) {
		evs = append(evs, bindTo(7, 1e9+i*500e6, 8080, auEADDRINUSE))
	}
	read := func(uint32, uint16) *inUseFacts {
		return &inUseFacts{NetNS: "net:[4026531840]", HostNS: true, States: map[int]int{proc.TCPTimeWait: 12, proc.TCPFinWait2: 1}}
	}
	f := byID(inUseRun(t, evs, true, read, nil), PortInUse)
	if f == nil || f.Severity != Warning {
		t.Fatalf("finding %+v", f)
	}
	wantWords(t, f, "the host's", "13 connection(s) on it are closing, 12 of them in TIME_WAIT", "without SO_REUSEADDR",
		"kept retrying: 4 failures")
	if !strings.Contains(f.Fix, "SO_REUSEADDR") {
		t.Errorf("fix: %s", f.Fix)
	}
}

// listen's EADDRINUSE names no address: the port is the one the
// process's earlier bind of that descriptor named.
func TestPortInUseListen(t *testing.T) {
	evs := []event.Event{bindTo(7, 1e9, 9090, 0)}
	for i := range uint64(3) {
		evs = append(evs, sys(7, 1.1e9+i*10e6, auNrListen, auEADDRINUSE, 3000, 3, 128))
	}
	evs = append(evs, exitOf(7, 1.2e9, 1))
	var port uint16
	read := func(_ uint32, p uint16) *inUseFacts {
		port = p
		return &inUseFacts{NetNS: "net:[1]", States: map[int]int{}, Listen: []inUseHolder{{PID: 9, Comm: "first", Local: "127.0.0.1:9090"}}}
	}
	f := byID(inUseRun(t, evs, true, read, nil), PortInUse)
	if f == nil || f.Severity != Warning || port != 9090 {
		t.Fatalf("port %d finding %+v", port, f)
	}
	wantWords(t, f, "listen on 127.0.0.1:9090", "SO_REUSEADDR (both sides)", "first[9]")
}

// From a capture: the holder inferred from the calls, and said to be.
func TestPortInUseCapture(t *testing.T) {
	holder := bindTo(42, 0.5e9, 8080, 0)
	holder.Comm = "holder"
	evs := []event.Event{holder}
	for i := range uint64(3) {
		evs = append(evs, bindTo(7, 1e9+i*100e6, 8080, auEADDRINUSE))
	}
	evs = append(evs, exitOf(7, 1.3e9, 1))
	f := byID(inUseRun(t, evs, false, nil, nil), PortInUse)
	if f == nil || f.Severity != Warning {
		t.Fatalf("finding %+v", f)
	}
	wantWords(t, f, "inferred", "holder[42] bound port 8080", "gave up")
	// The earlier run exited 10 s before: its TIME_WAIT, inferred.
	evs[0].Comm = "prog"
	const nrAccept4 = 288
	evs = append([]event.Event{evs[0], sys(42, 0.51e9, nrAccept4, 4, 1000, 3), sys(42, 0.52e9, nrAccept4, 5, 1000, 3),
		exitOf(42, 0.6e9, 0)}, evs[1:]...)
	f = byID(inUseRun(t, evs, false, nil, nil), PortInUse)
	if f == nil || !strings.Contains(f.Fix, "SO_REUSEADDR") {
		t.Fatalf("finding %+v", f)
	}
	wantWords(t, f, "prog[42] bound port 8080, accepted 2 connection(s) and exited", "TIME_WAIT", "(inferred)")
}

// Not a warning: a port probed once and another bound (live and from a
// capture), and a bind of port 0, whose EADDRINUSE is no port held.
func TestPortInUseBenign(t *testing.T) {
	evs := []event.Event{bindTo(7, 1e9, 8080, auEADDRINUSE), bindTo(7, 1.01e9, 8081, 0)}
	read := func(uint32, uint16) *inUseFacts {
		return &inUseFacts{NetNS: "net:[1]", States: map[int]int{}, Listen: []inUseHolder{{PID: 9, Comm: "other", Local: "0.0.0.0:8080"}}}
	}
	for _, live := range []bool{true, false} {
		f := byID(inUseRun(t, evs, live, read, nil), PortInUse)
		if f == nil || f.Severity >= Warning {
			t.Fatalf("live %v: %+v", live, f)
		}
		wantWords(t, f, "a probe it handled")
	}
	// The probe's process ends normally much later: still no warning.
	later := append(evs, exitOf(7, 30e9, 0))
	if f := byID(inUseRun(t, later, true, read, nil), PortInUse); f == nil || f.Severity >= Warning {
		t.Errorf("%+v", f)
	}
	zero := []event.Event{bindTo(7, 1e9, 0, auEADDRINUSE), bindTo(7, 1.1e9, 0, auEADDRINUSE), exitOf(7, 1.2e9, 1)}
	if f := byID(inUseRun(t, zero, true, func(uint32, uint16) *inUseFacts { t.Error("read"); return nil }, nil), PortInUse); f != nil {
		t.Errorf("port 0: %s", f.Title)
	}
}

// readInUse on this process's own listener: the socket found by port in
// this namespace, and this process named as its holder.
func TestReadInUse(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skip(err)
	}
	defer l.Close()
	port := uint16(l.Addr().(*net.TCPAddr).Port)
	pid := uint32(os.Getpid())
	f := readInUse(pid, port)
	if f.Err != "" || !f.HostNS && f.NetNS == "" {
		t.Fatalf("%+v", f)
	}
	if len(f.Listen) != 1 || f.Listen[0].PID != pid || f.Listen[0].Local != l.Addr().String() || f.Orphans != 0 {
		t.Errorf("listeners %+v orphans %d", f.Listen, f.Orphans)
	}
	if a := boundAddr(pid, fdOfListener(t, l)); a != l.Addr().String() {
		t.Errorf("boundAddr %q, want %q", a, l.Addr())
	}
}

func fdOfListener(t *testing.T, l net.Listener) int {
	raw, err := l.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	if err := raw.Control(func(f uintptr) { fd = int(f) }); err != nil {
		t.Fatal(err)
	}
	return fd
}

// readInUse on scenarios/errno/addrinuse, whose port is held in a network
// namespace of its own: the listener and its process, or the earlier run's
// 16 TIME_WAIT connections, are read in the failing process's namespace,
// and said not to be the host's.
func TestReadInUseScenario(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if out, err := exec.Command("make", "-s", "-C", "../../scenarios", "bin/addrinuse").CombinedOutput(); err != nil {
		t.Fatalf("building addrinuse: %v\n%s", err, out)
	}
	for _, mode := range []string{"listener", "timewait"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command("../../scenarios/bin/addrinuse", "-m", mode, "-r", "300", "-b", "100")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			sc := bufio.NewScanner(stderr)
			kv := map[string]string{}
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "addrinuse: held ") {
					for _, f := range strings.Fields(sc.Text()) {
						if k, v, ok := strings.Cut(f, "="); ok {
							kv[k] = v
						}
					}
					break
				}
			}
			go io.Copy(io.Discard, stderr)
			if kv["pid"] == "" {
				t.Fatal("addrinuse ended before holding the port")
			}
			pid := uint32(cmd.Process.Pid)
			f := readInUse(pid, 8080)
			if f.Err != "" || f.HostNS || f.NetNS == "" || f.NetNS == netNSOf(uint32(os.Getpid())) {
				t.Fatalf("%+v", f)
			}
			switch mode {
			case "listener":
				if len(f.Listen) != 1 || strconv.Itoa(int(f.Listen[0].PID)) != kv["pid"] || f.Listen[0].Comm != "addrinuse-hold" ||
					f.Listen[0].Local != "127.0.0.1:8080" || len(f.States) != 0 {
					t.Errorf("holder pid=%s: %+v", kv["pid"], f)
				}
			case "timewait":
				if len(f.Listen) != 0 || f.Orphans != 0 || strconv.Itoa(f.States[proc.TCPTimeWait]) != kv["conns"] || len(f.States) != 1 {
					t.Errorf("conns=%s: %+v", kv["conns"], f)
				}
			}
		})
	}
}
