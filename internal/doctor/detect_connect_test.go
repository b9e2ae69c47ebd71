package doctor

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/event"
)

const (
	crNrPoll       = 7
	crNrClose      = 3
	crNrConnect    = 42
	crNrEpollWait  = 232
	crSecond       = 1_000_000_000
	crServerPort   = 8080
	crClosedServer = 8081
)

var crServer = [4]byte{10, 221, 0, 2}

// crRun is one thread's calls, each ending 5 µs before the next begins.
type crRun struct {
	evs []event.Event
	t   uint64
}

func (r *crRun) add(e event.Event) *event.Event {
	e.Time = r.t
	r.evs = append(r.evs, e)
	r.t += e.Syscall.Latency + 5000
	return &r.evs[len(r.evs)-1]
}

// connect is a blocking connect on fd 3 that returns ret after lat.
func (r *crRun) connect(ret int64, lat uint64, port uint16) {
	c := r.add(sys(7, 0, crNrConnect, ret, lat, 3, 0x7ffc1000, 16))
	c.Syscall.Data[1] = sockaddr4(crServer, port)
	r.add(sys(7, 0, crNrClose, 0, 2000, 3))
}

// nonblocking is connect's EINPROGRESS, then a wait (call nr) that
// returns ready after lat, then the close.
func (r *crRun) nonblocking(nr uint32, lat uint64) {
	c := r.add(sys(7, 0, crNrConnect, -einprogress, 20_000, 3, 0x7ffc1000, 16))
	c.Syscall.Data[1] = sockaddr4(crServer, crServerPort)
	r.add(sys(7, 0, nr, 1, lat, 0x7ffc2000, 1, 30000))
	r.add(sys(7, 0, crNrClose, 0, 2000, 3))
}

func TestConnectRetransmit(t *testing.T) {
	tests := []struct {
		name     string
		run      func(r *crRun)
		counted  uint64
		timedOut uint64
		sums     map[string]uint64
		severity Severity
	}{
		{name: "blocking 1 s", counted: 5, sums: map[string]uint64{"1": 5}, severity: Warning,
			run: func(r *crRun) {
				for range 5 {
					r.connect(0, 1_016*ms, crServerPort)
				}
			}},
		{name: "blocking 1, 2 and 5 s", counted: 3, sums: map[string]uint64{"1": 1, "2": 1, "5": 1}, severity: Warning,
			run: func(r *crRun) {
				r.connect(0, 1_008*ms, crServerPort)
				r.connect(0, 2_045*ms, crServerPort)
				r.connect(0, 5_128*ms, crServerPort)
			}},
		{name: "non-blocking, poll", counted: 4, sums: map[string]uint64{"1": 4}, severity: Warning,
			run: func(r *crRun) {
				for range 4 {
					r.nonblocking(crNrPoll, 1_020*ms)
				}
			}},
		{name: "non-blocking, epoll_wait", counted: 3, sums: map[string]uint64{"3": 3}, severity: Warning,
			run: func(r *crRun) {
				for range 3 {
					r.nonblocking(crNrEpollWait, 3_070*ms)
				}
			}},
		{name: "accept queue full: ETIMEDOUT", counted: 3, timedOut: 3, sums: map[string]uint64{}, severity: Warning,
			run: func(r *crRun) {
				r.connect(0, 80_000, crServerPort)
				r.connect(0, 40_000, crServerPort)
				for range 3 {
					r.connect(-etimedout, 3_068*ms, crServerPort)
				}
			}},
		// One lost SYN among many fast connects: a path loses a packet
		// now and then.
		{name: "one among many", counted: 1, sums: map[string]uint64{"1": 1}, severity: Info,
			run: func(r *crRun) {
				for i := range 200 {
					if i == 100 {
						r.connect(0, 1_010*ms, crServerPort)
					} else {
						r.connect(0, 60_000, crServerPort)
					}
				}
			}},
		// Three held up among 1,000 (each 20 ms): 0.3%, under the share
		// a path's ordinary loss explains, and 13% of the thread's time.
		{name: "three in a thousand", counted: 3, sums: map[string]uint64{"1": 3}, severity: Info,
			run: func(r *crRun) {
				for i := range 1000 {
					if i%300 == 1 && i < 900 {
						r.connect(0, 1_010*ms, crServerPort)
					} else {
						r.connect(0, 20*ms, crServerPort)
					}
				}
			}},
		// Benign cousins.
		{name: "closed port: refused at once", run: func(r *crRun) {
			for range 50 {
				r.connect(-econnrefused, 40_000, crClosedServer)
			}
		}},
		{name: "fast connects", run: func(r *crRun) {
			for range 50 {
				r.connect(0, 60_000, crServerPort)
			}
		}},
		// Connected at once, then a long poll on the established socket
		// (a reply awaited): only the first wait after the connect is
		// for it.
		{name: "non-blocking at once, then a long poll", run: func(r *crRun) {
			for range 5 {
				c := r.add(sys(7, 0, crNrConnect, -einprogress, 20_000, 3, 0x7ffc1000, 16))
				c.Syscall.Data[1] = sockaddr4(crServer, crServerPort)
				r.add(sys(7, 0, crNrPoll, 1, 90_000, 0x7ffc2000, 1, 30000))
				r.add(sys(7, 0, crNrPoll, 1, 1_010*ms, 0x7ffc2000, 1, 30000))
				r.add(sys(7, 0, crNrClose, 0, 2000, 3))
			}
		}},
		// A connect's wait that timed out at 1 s: the program's own timer.
		{name: "non-blocking, the program's timeout", run: func(r *crRun) {
			for range 5 {
				c := r.add(sys(7, 0, crNrConnect, -einprogress, 20_000, 3, 0x7ffc1000, 16))
				c.Syscall.Data[1] = sockaddr4(crServer, crServerPort)
				r.add(sys(7, 0, crNrPoll, 0, 1_000*ms, 0x7ffc2000, 1, 1000))
				r.add(sys(7, 0, crNrClose, 0, 2000, 3))
			}
		}},
		// A slow server on the far side of the world: 1.5 s is no sum.
		{name: "slow, not at a backoff sum", run: func(r *crRun) {
			for range 5 {
				r.connect(0, 1_500*ms, crServerPort)
			}
		}},
		// A fast ETIMEDOUT is not the SYN's (TCP_USER_TIMEOUT, a route).
		{name: "fast ETIMEDOUT", run: func(r *crRun) {
			for range 5 {
				r.connect(-etimedout, 200*ms, crServerPort)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &crRun{t: 1e9}
			tc.run(r)
			f := byID(findings(r.evs), ConnectRetransmit)
			if tc.counted == 0 {
				if f != nil {
					t.Fatalf("finding: %s", f.Title)
				}
				return
			}
			if f == nil {
				t.Fatal("no connect-retransmit")
			}
			if f.Severity != tc.severity {
				t.Errorf("severity %s, want %s (%v)", f.Severity, tc.severity, f.Evidence["severity_because"])
			}
			if n := f.Evidence["connects_held_up"]; n != tc.counted {
				t.Errorf("connects_held_up %v, want %d", n, tc.counted)
			}
			if n := f.Evidence["timed_out"]; n != tc.timedOut {
				t.Errorf("timed_out %v, want %d", n, tc.timedOut)
			}
			sums := f.Evidence["by_backoff_sum_s"].(map[string]uint64)
			if len(sums) != len(tc.sums) {
				t.Errorf("by_backoff_sum_s %v, want %v", sums, tc.sums)
			}
			for k, v := range tc.sums {
				if sums[k] != v {
					t.Errorf("by_backoff_sum_s %v, want %v", sums, tc.sums)
				}
			}
			if f.Evidence["peer"] != "10.221.0.2:8080" || f.Key != "connect-retransmit:10.221.0.2:8080" {
				t.Errorf("peer %v key %q", f.Evidence["peer"], f.Key)
			}
			if f.Evidence["cause"] != "unknown from a capture" || !strings.Contains(f.Summary, "cannot be known from a capture") {
				t.Errorf("cause %v; summary %q", f.Evidence["cause"], f.Summary)
			}
		})
	}
}

func TestBackoffSums(t *testing.T) {
	want := []uint64{1, 2, 3, 4, 5, 7, 11, 15, 19, 31, 63, 127, 255}
	if len(crSums) != len(want) {
		t.Fatalf("sums %v, want %v", crSums, want)
	}
	for i := range want {
		if crSums[i] != want[i] {
			t.Fatalf("sums %v, want %v", crSums, want)
		}
	}
	for _, c := range []struct {
		lat  uint64
		want uint64
	}{{985 * ms, 0}, {995 * ms, 1}, {1_024 * ms, 1}, {1_180 * ms, 0}, {1_500 * ms, 0}, {2_047 * ms, 2}, {3_079 * ms, 3}, {5_127 * ms, 5}, {6_000 * ms, 0}, {7_300 * ms, 7}} {
		if got := backoffSum(c.lat); got != c.want {
			t.Errorf("backoffSum(%d ms) = %d, want %d", c.lat/ms, got, c.want)
		}
	}
}

func TestParseSNMP(t *testing.T) {
	snmp := "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm RtoMin RetransSegs InErrs\nTcp: 1 200 17 0\n"
	if got := parseSNMP(snmp, "Tcp:"); got["RetransSegs"] != 17 || got["RtoMin"] != 200 || len(got) != 4 {
		t.Errorf("parseSNMP = %v", got)
	}
	netstat := "TcpExt: SyncookiesSent ListenOverflows ListenDrops TCPSynRetrans\nTcpExt: 0 5 6 9\nIpExt: InNoRoutes\nIpExt: 0\n"
	if got := parseSNMP(netstat, "TcpExt:"); got["ListenOverflows"] != 5 || got["ListenDrops"] != 6 || got["TCPSynRetrans"] != 9 {
		t.Errorf("parseSNMP = %v", got)
	}
}

// The cause, live: the counters' growth tells a full accept queue on this
// host from SYNs dropped on the way.
func TestConnectRetransmitCause(t *testing.T) {
	live := host
	live.Live = true
	live.ReadsStall = func() bool { return true } // the test reads nothing itself
	ns := func(first, last map[string]uint64) *crNS {
		return &crNS{ino: "net:[1]", first: first, last: last}
	}
	zero := map[string]uint64{"RetransSegs": 0, "TCPSynRetrans": 0, "ListenOverflows": 0, "ListenDrops": 0}
	for _, tc := range []struct {
		name           string
		client, server *crNS
		want           string
	}{
		{"overflow", ns(zero, map[string]uint64{"TCPSynRetrans": 4}), ns(zero, map[string]uint64{"ListenOverflows": 3, "ListenDrops": 3, "TCPSynRetrans": 0, "RetransSegs": 0}), "accept queue full"},
		{"dropped", ns(zero, map[string]uint64{"RetransSegs": 5, "TCPSynRetrans": 5, "ListenOverflows": 0, "ListenDrops": 0}), ns(zero, zero), "SYNs dropped on the way"},
		{"remote server", ns(zero, map[string]uint64{"RetransSegs": 5, "TCPSynRetrans": 5, "ListenOverflows": 0, "ListenDrops": 0}), nil, "SYNs dropped on the way"},
		{"read once", ns(zero, nil), nil, "not shown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConnRetx(&live)
			c.ns["c"] = tc.client
			g := &crPeer{peer: "10.221.0.2:8080", clientNS: "c", server: tc.server}
			var b strings.Builder
			ev := map[string]any{}
			got, fix := c.cause(&Env{Host: live}, g, ev, &b)
			if got != tc.want {
				t.Errorf("cause %q, want %q (%s)", got, tc.want, b.String())
			}
			if tc.want == "accept queue full" && (!strings.Contains(fix, "backlog") || !strings.Contains(b.String(), "ListenOverflows grew by 3")) {
				t.Errorf("fix %q / summary %q", fix, b.String())
			}
			if tc.want == "SYNs dropped on the way" && (!strings.Contains(fix, "nft list ruleset") || strings.Contains(fix, "backlog")) {
				t.Errorf("fix %q", fix)
			}
		})
	}
}

// A client whose network namespace ends with it, before the report: the
// namespace held at its held-up connect is read at the report all the
// same, and the counters that grew after the hold are there. Through the
// process, as before, the read finds nothing.
func TestHeldNamespaceOutlivesItsProcess(t *testing.T) {
	if os.Getenv("SYSRAY_NETNS_CHILD") == "1" {
		netnsChild()
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for unshare -n")
	}
	cmd := exec.Command("unshare", "-n", os.Args[0], "-test.run=^TestHeldNamespaceOutlivesItsProcess$")
	cmd.Env = append(os.Environ(), "SYSRAY_NETNS_CHILD=1")
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("child: %q %v", line, err)
	}
	pid := uint32(cmd.Process.Pid)
	c := &connRetx{}
	n := &crNS{ino: netNSOf(pid), pid: pid}
	if n.ino == "" || n.ino == netNSOf(uint32(os.Getpid())) {
		t.Fatalf("child's namespace %q is not a new one", n.ino)
	}
	n.first = n.counters()
	c.hold(n)
	if n.held == nil || c.held != 1 {
		t.Fatalf("not held: %v, %d", n.held, c.held)
	}
	in.Write([]byte("go\n"))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if m := tcpCounters(pid); m != nil {
		t.Fatalf("the ended child's counters read through its pid: %v", m)
	}
	n.last = n.counters()
	if d, ok := n.delta("ListenOverflows"); !ok || d < 1 {
		t.Errorf("ListenOverflows grew by %d (%v) after the hold; want at least 1 (first %v, last %v)", d, ok, n.first, n.last)
	}
	c.release(n)
	if n.held != nil || c.held != 0 {
		t.Errorf("release left %v, %d", n.held, c.held)
	}
}

// netnsChild, in a new network namespace: loopback up, then on "go" a
// listener with the smallest accept queue and three connects to it that
// no one accepts, so the kernel drops SYNs it cannot queue
// (ListenOverflows), then it exits.
func netnsChild() {
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "ip link: %v %s\n", err, out)
		os.Exit(2)
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		err = syscall.Bind(fd, &syscall.SockaddrInet4{Port: 7070, Addr: [4]byte{127, 0, 0, 1}})
	}
	if err == nil {
		err = syscall.Listen(fd, 0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "listener:", err)
		os.Exit(2)
	}
	var conns []net.Conn // kept open: the queue stays full
	for i := 0; i < 3; i++ {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:7070", 300*time.Millisecond); err == nil {
			conns = append(conns, c)
		}
	}
	_ = conns
	os.Exit(0)
}
