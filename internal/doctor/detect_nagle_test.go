package doctor

import (
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
)

const (
	nrRead       = 0
	nrPoll       = 7
	nrWritev     = 20
	nrConnect    = 42
	nrSendto     = 44
	nrSetsockopt = 54
)

// client is a request/response client on fd 3, connected to 127.0.0.1:8080:
// each request is written by writes (their sizes), then its reply read
// with read; wait(i) is how long request i's reply took.
type client struct {
	evs []event.Event
	t   uint64
}

func newClient(nodelay bool) *client {
	c := &client{t: 1e9}
	if nodelay {
		c.add(sys(7, c.t, nrSetsockopt, 0, 2000, 3, 6, 1, 0x7ffc0000, 4))
	}
	con := sys(7, c.t, nrConnect, 0, 80000, 3, 0x7ffc1000, 16)
	con.Syscall.Data[1] = []byte{2, 0, 0x1f, 0x90, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	c.add(con)
	return c
}

func (c *client) add(e event.Event) {
	e.Time = c.t
	c.evs = append(c.evs, e)
	c.t += e.Syscall.Latency + 5000
}

// request writes sizes with the write call nr, then reads the reply with
// read after wait (or polls for wait first, then reads).
func (c *client) request(nr uint32, sizes []int64, wait uint64, poll bool) {
	for _, n := range sizes {
		c.add(sys(7, 0, nr, n, 5000, 3, 0x7ffc2000, uint64(n)))
	}
	if poll {
		c.add(sys(7, 0, nrPoll, 1, wait, 0x7ffc3000, 1, ^uint64(0)))
		c.add(sys(7, 0, nrRead, 32, 2000, 3, 0x7ffc4000, 32))
		return
	}
	c.add(sys(7, 0, nrRead, 32, wait, 3, 0x7ffc4000, 32))
}

// The quick-ACK phase: the first request's reply comes at once.
func nagleRun(nodelay bool, nr uint32, sizes []int64, waits func(i int) uint64, poll bool) []event.Event {
	c := newClient(nodelay)
	for i := 0; i < 20; i++ {
		c.request(nr, sizes, waits(i), poll)
	}
	return c.evs
}

func delayed(i int) uint64 {
	if i == 0 {
		return 500_000
	}
	return 44 * ms
}

func TestNagleDelayedAck(t *testing.T) {
	split := []int64{16, 48}
	tests := []struct {
		name  string
		evs   []event.Event
		words []string // nil: no finding
	}{
		{"two writes, delayed replies", nagleRun(false, nrWrite, split, delayed, false),
			[]string{"19 requests to 127.0.0.1:8080", "44.00ms", "write", "read", "TCP_NODELAY"}},
		{"sendto and a poll for the reply", nagleRun(false, nrSendto, split, delayed, true),
			[]string{"127.0.0.1:8080", "sendto", "poll+read", "sendto poll read"}},
		{"three writev", nagleRun(false, nrWritev, []int64{8, 8, 48}, delayed, false),
			[]string{"writev"}},
		{"one write, a server that takes 44 ms", nagleRun(false, nrWrite, []int64{64}, delayed, false), nil},
		{"TCP_NODELAY set, a server that takes 44 ms", nagleRun(true, nrWrite, split, delayed, false), nil},
		{"two writes, replies at once", nagleRun(false, nrWrite, split, func(int) uint64 { return 30_000 }, false), nil},
		{"two writes, a server slow in the band a quarter of the time", nagleRun(false, nrWrite, split, func(i int) uint64 {
			if i%4 == 1 {
				return 50 * ms
			}
			return 30_000
		}, false), nil},
		{"two writes, a server that takes 300 ms", nagleRun(false, nrWrite, split, func(int) uint64 { return 300 * ms }, false), nil},
		{"a large second write goes out at once", nagleRun(false, nrWrite, []int64{16, 100_000}, delayed, false), nil},
		{"too few", nagleRun(false, nrWrite, split, func(i int) uint64 {
			if i >= 1 && i <= 4 {
				return 44 * ms
			}
			return 30_000
		}, false), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := byID(findings(tt.evs), NagleDelayedAck)
			if tt.words == nil {
				if f != nil {
					t.Fatalf("want none, got %s: %s", f.Title, f.Summary)
				}
				return
			}
			if f == nil {
				t.Fatal("no finding")
			}
			text := f.Title + " " + f.Summary + " " + strings.Join(f.Syscalls, " ")
			for _, w := range tt.words {
				if !strings.Contains(text, w) {
					t.Errorf("%q missing from %s", w, text)
				}
			}
			if f.Key != "nagle-delayed-ack:127.0.0.1:8080" {
				t.Errorf("key %q", f.Key)
			}
			if len(f.Procs) != 1 || f.Procs[0].PID != 7 {
				t.Errorf("procs %v", f.Procs)
			}
			// The replies waited nearly all of the client's time.
			if f.Severity != Warning {
				t.Errorf("severity %v, want warning", f.Severity)
			}
		})
	}
}

// The server's side of a split request: it reads the header, then waits
// for the body as long as the client waits for the reply. It writes once
// per request, after its reads, so it is no Nagle client.
func TestNagleServerSideSilent(t *testing.T) {
	var evs []event.Event
	tm := uint64(1e9)
	for i := 0; i < 20; i++ {
		evs = append(evs, sys(8, tm, nrRead, 16, 3000, 4, 0, 64), sys(8, tm+5000, nrRead, 48, 44*ms, 4, 0, 48),
			sys(8, tm+44*ms+10000, nrWrite, 32, 5000, 4, 0, 32))
		tm += 45 * ms
	}
	if f := byID(findings(evs), NagleDelayedAck); f != nil {
		t.Fatalf("want none, got %s", f.Title)
	}
}

// Live, the kernel sends the fast calls only as a sample: the first
// request is seen whole (a process's first calls of each syscall cross
// over), then only the slow reads.
func TestNagleSampled(t *testing.T) {
	// writes is the kernel's count of the process's write calls.
	run := func(sizes []int64, writes uint64) *Finding {
		c := newClient(false)
		c.request(nrWrite, sizes, 500_000, false)
		for i := 0; i < 10; i++ {
			c.add(sys(7, 0, nrRead, 32, 44*ms, 3, 0x7ffc4000, 32))
		}
		d := New(host, nil)
		d.Counts([]stat.Cell{{Key: stat.Key{PID: 7, Nr: nrWrite}, Count: writes}})
		for i := range c.evs {
			d.Observe(&c.evs[i])
		}
		return byID(checked(d.Report()).Findings, NagleDelayedAck)
	}
	if f := run([]int64{16, 48}, 22); f == nil || !strings.Contains(f.Summary, "sample") {
		t.Fatalf("split first request: want a finding that says it was sampled, got %v", f)
	}
	if f := run([]int64{64}, 11); f != nil {
		t.Fatalf("one write: want none, got %s", f.Title)
	}
	// Split once, then one write a request: the kernel counted too few
	// writes for the stalls to be split requests.
	if f := run([]int64{16, 48}, 12); f != nil {
		t.Fatalf("12 writes for 10 stalls: want none, got %s", f.Title)
	}
	// 200 writes: at most 100 split requests, of which 10 stalled; the
	// fast ones did not cross over.
	if f := run([]int64{16, 48}, 200); f != nil {
		t.Fatalf("200 writes for 10 stalls: want none, got %s", f.Title)
	}
}

// Sampled, with a poll for the reply: after the first request only the
// polls that waited cross over, not the writes or the fast reads after
// them.
func TestNagleSampledPoll(t *testing.T) {
	c := newClient(false)
	c.request(nrSendto, []int64{16, 48}, 500_000, true)
	for i := 0; i < 10; i++ {
		c.add(sys(7, 0, nrPoll, 1, 44*ms, 0x7ffc3000, 1, ^uint64(0)))
	}
	d := New(host, nil)
	d.Counts(nil)
	for i := range c.evs {
		d.Observe(&c.evs[i])
	}
	f := byID(checked(d.Report()).Findings, NagleDelayedAck)
	if f == nil {
		t.Fatal("no finding")
	}
	// The last poll's read did not cross over and nothing came after it.
	if f.Evidence["requests_stalled"] != uint64(9) || !strings.Contains(f.Summary, "poll") {
		t.Errorf("stalled %v: %s", f.Evidence["requests_stalled"], f.Summary)
	}
}

// A client that closes its socket when done is reported; one whose
// connect was not seen names no peer it cannot know (not live). Its
// sendto says the descriptor is a socket.
func TestNagleClosedUnknownPeer(t *testing.T) {
	c := &client{t: 1e9}
	for i := 0; i < 10; i++ {
		c.request(nrSendto, []int64{16, 48}, delayed(i), false)
	}
	c.add(sys(7, 0, nrClose, 0, 1000, 3))
	f := byID(findings(c.evs), NagleDelayedAck)
	if f == nil {
		t.Fatal("no finding after the close")
	}
	if f.Evidence["peer"] != "an unknown peer" || f.Evidence["requests_stalled"] != uint64(9) {
		t.Errorf("evidence %v", f.Evidence)
	}
}

// An event loop that writes split requests and then sleeps in poll until
// its 50 ms timeout: the waits ended by the clock are no replies.
func TestNaglePollTimeoutsSilent(t *testing.T) {
	c := newClient(false)
	for i := 0; i < 20; i++ {
		for _, n := range []int64{16, 48} {
			c.add(sys(7, 0, nrWrite, n, 5000, 3, 0x7ffc2000, uint64(n)))
		}
		c.add(sys(7, 0, nrPoll, 0, 50*ms, 0x7ffc3000, 1, 50))
	}
	if f := byID(findings(c.evs), NagleDelayedAck); f != nil {
		t.Fatalf("want none, got %s", f.Title)
	}
}

// write and read on a descriptor not known to be a socket: a terminal
// whose user types a key every 44 ms after two echoes is no TCP peer.
// And a unix socket has no Nagle.
func TestNagleNotASocketSilent(t *testing.T) {
	c := &client{t: 1e9}
	for i := 0; i < 10; i++ {
		c.request(nrWrite, []int64{1, 8}, delayed(i), false)
	}
	if f := byID(findings(c.evs), NagleDelayedAck); f != nil {
		t.Fatalf("unknown descriptor: want none, got %s", f.Title)
	}
	u := &client{t: 1e9}
	con := sys(7, 0, nrConnect, 0, 80000, 3, 0x7ffc1000, 110)
	con.Syscall.Data[1] = append([]byte{1, 0}, "/run/app.sock"...)
	u.add(con)
	for i := 0; i < 10; i++ {
		u.request(nrSendto, []int64{16, 48}, delayed(i), false)
	}
	if f := byID(findings(u.evs), NagleDelayedAck); f != nil {
		t.Fatalf("unix socket: want none, got %s", f.Title)
	}
}

// Where the reply read slept says the descriptor is a TCP socket, when
// neither its connect nor a call only sockets take was seen (a process
// running before sysray, on a host whose /proc cannot be read).
func TestNagleTCPFromSleepStack(t *testing.T) {
	tcp := []event.Frame{{Name: "schedule_timeout+0xc1"}, {Name: "wait_woken+0x89"}, {Name: "sk_wait_data+0x172"},
		{Name: "tcp_recvmsg_locked+0x21d"}, {Name: "tcp_recvmsg+0x6e"}, {Name: "sock_recvmsg+0xab"}}
	tty := []event.Frame{{Name: "schedule_timeout+0xc1"}, {Name: "wait_woken+0x89"}, {Name: "n_tty_read+0x4a1"}, {Name: "tty_read+0x13e"}}
	run := func(stack []event.Frame) *Finding {
		c := &client{t: 1e9}
		for i := 0; i < 10; i++ {
			c.request(nrWrite, []int64{16, 48}, delayed(i), false)
			r := &c.evs[len(c.evs)-1]
			r.Syscall.Sleeps = []event.Sleep{{Duration: r.Syscall.Latency, Count: 1, Stack: stack}}
		}
		return byID(findings(c.evs), NagleDelayedAck)
	}
	if f := run(tcp); f == nil || f.Evidence["peer"] != "an unknown peer" {
		t.Fatalf("asleep in tcp_recvmsg: want a finding with an unknown peer, got %v", f)
	}
	if f := run(tty); f != nil {
		t.Fatalf("asleep in n_tty_read: want none, got %s", f.Title)
	}
}

// A server that answers in two writes, then reads the client's next
// request, waits for the client: a client that asks every 44 ms is no
// timer.
func TestNagleAcceptedSilent(t *testing.T) {
	c := &client{t: 1e9}
	acc := sys(7, 0, 43, 3, 20000, 5, 0x7ffc1000, 0x7ffc1100) // accept
	acc.Syscall.Data[1] = []byte{2, 0, 0xc3, 0x50, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	c.add(acc)
	for i := 0; i < 10; i++ {
		c.request(nrWrite, []int64{16, 48}, 44*ms, false)
	}
	if f := byID(findings(c.evs), NagleDelayedAck); f != nil {
		t.Fatalf("want none, got %s", f.Title)
	}
}

// A request streamed in many writes is acknowledged as it goes (every
// second full segment at once): a slow reply after it is the server's.
func TestNagleStreamedRequestSilent(t *testing.T) {
	var sizes []int64
	for range 40 {
		sizes = append(sizes, 4096)
	}
	sizes = append(sizes, 100)
	if f := byID(findings(nagleRun(false, nrWrite, sizes, delayed, false)), NagleDelayedAck); f != nil {
		t.Fatalf("want none, got %s", f.Title)
	}
}

// Sampled, a slow server's requests' single writes can cross over with
// the reads between them missing: writes a round trip apart are two
// requests, not one split.
func TestNagleSampledWritesApart(t *testing.T) {
	c := newClient(false)
	for i := 0; i < 10; i++ {
		c.add(sys(7, 0, nrWrite, 64, 5000, 3, 0x7ffc2000, 64))
		c.t += 44 * ms // the read that did not cross over
	}
	for i := 0; i < 10; i++ {
		c.add(sys(7, 0, nrRead, 32, 44*ms, 3, 0x7ffc4000, 32))
	}
	d := New(host, nil)
	d.Counts(nil)
	for i := range c.evs {
		d.Observe(&c.evs[i])
	}
	if f := byID(checked(d.Report()).Findings, NagleDelayedAck); f != nil {
		t.Fatalf("want none, got %s", f.Title)
	}
}

// Silent, the doctor says how near the connection came.
func TestNagleNear(t *testing.T) {
	d := New(host, nil)
	evs := nagleRun(false, nrWrite, []int64{16, 48}, func(i int) uint64 {
		if i >= 1 && i <= 4 {
			return 44 * ms
		}
		return 30_000
	}, false)
	for i := range evs {
		d.Observe(&evs[i])
	}
	r := checked(d.Report())
	for _, n := range r.Near {
		if n.ID == NagleDelayedAck {
			if n.Closeness != 0.8 || !strings.Contains(n.Short, "reports from 5") {
				t.Errorf("near %+v", n)
			}
			return
		}
	}
	t.Fatalf("no near miss in %+v", r.Near)
}

func TestSockaddrString(t *testing.T) {
	in6 := make([]byte, 28)
	in6[0], in6[2], in6[3], in6[23] = 10, 0x1f, 0x90, 1
	for _, tt := range []struct {
		b    []byte
		want string
	}{
		{[]byte{2, 0, 0x1f, 0x90, 10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0}, "10.0.0.2:8080"},
		{in6, "[::1]:8080"},
		{[]byte{1, 0, '/', 't'}, ""},
		{nil, ""},
	} {
		if got := sockaddrString(tt.b); got != tt.want {
			t.Errorf("%v: %q, want %q", tt.b, got, tt.want)
		}
	}
}

// A thread's pending writes go with it; a closed socket's too.
func TestNagleLetsGo(t *testing.T) {
	n := newNagle(&host)
	for tid := uint32(1); tid <= 3; tid++ {
		for fd := uint64(3); fd < 6; fd++ {
			e := sys(tid, 1e9, nrWrite, 16, 5000, fd, 0, 16)
			n.Observe(&e)
		}
	}
	if n.nBursts != 9 {
		t.Fatalf("%d pending, want 9", n.nBursts)
	}
	exit := event.Event{Kind: event.KindExit, PID: 2, TID: 2}
	n.Observe(&exit)
	cl := sys(1, 2e9, nrClose, 0, 1000, 4)
	n.Observe(&cl)
	if n.nBursts != 5 || len(n.bursts[2]) != 0 || n.bursts[1][4] != nil {
		t.Fatalf("%d pending (%v), want 5", n.nBursts, n.bursts)
	}
	// A process the doctor forgets: its sockets are retired, its
	// threads' writes dropped.
	n.conn(3, 3, "prog").stalls = 1
	n.conn(1, 3, "prog")
	n.forget(map[uint32]bool{3: true}, map[uint32]bool{3: true})
	if n.nBursts != 2 || n.conns[nagleKey{3, 3}] != nil || n.conns[nagleKey{1, 3}] == nil || len(n.closed) != 1 {
		t.Fatalf("after forget: %d pending, conns %v, closed %d", n.nBursts, n.conns, len(n.closed))
	}
}

// The options that take small writes out of Nagle's hold are read from a
// live socket, whoever set them and when.
func TestTCPHoldOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	set := func(opt, v int) {
		if err := raw.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, opt, v) }); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want string) {
		t.Helper()
		var got string
		var known bool
		raw.Control(func(fd uintptr) { got, known = tcpHoldOff(uint32(os.Getpid()), int(fd)) })
		if got != want || !known {
			t.Errorf("tcpHoldOff = %q, %v; want %q, known", got, known, want)
		}
	}
	// Go sets TCP_NODELAY on every connection it makes.
	check("TCP_NODELAY")
	set(unix.TCP_NODELAY, 0)
	check("")
	set(unix.TCP_CORK, 1)
	check("TCP_CORK")
	if _, known := tcpHoldOff(uint32(os.Getpid()), 1<<20); known {
		t.Error("a descriptor that is not there was read")
	}
}
