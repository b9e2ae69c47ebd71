package doctor

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/dns"
	"github.com/sysray/sysray/internal/event"
	hostfacts "github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/units"
)

// The finding it reports. "dns-timeout" is what an operator searches for
// when lookups hang: the name server did not answer within the resolver's
// timeout. The detector reads only the resolver's own calls, so the name
// says what they show, not why the server was silent.
const DNSTimeout ID = "dns-timeout"

func init() {
	register(registration{ids: []ID{DNSTimeout},
		build: func(h *Host) Detector { return newResolver(h) }})
}

// dnsPort: a stub resolver (glibc's, musl's) sends its queries to port 53
// of the servers resolv.conf names; nothing else in a process does.
const dnsPort = 53

// dnsWaitMin: a resolver's wait for an answer is resolv.conf's timeout, in
// whole seconds (glibc: at least 1 s per server and attempt; musl divides
// it by the attempts, and caps attempts at 10, so 100 ms at the least). A
// poll that timed out sooner was not waiting out a resolver's timeout.
const dnsWaitMin = 100_000_000

// dnsWarnNS: one whole timeout of glibc's smallest (1 s) is a stall every
// request behind the lookup sees; the default (5 s) is the classic "DNS
// takes 5 seconds" incident. From 1 s of timed-out waits in all the
// finding is a warning, below it (musl's shorter waits, a few) info.
const dnsWarnNS = 1_000_000_000

// dnsKept bounds the sockets and threads followed, each (about 100 bytes
// an entry), and the waits kept for the median.
const dnsKept = 1 << 14

// dnsWaitCalls: the calls a resolver waits for its answer in, with a
// timeout, ending with 0 ready when the timeout passed. epoll_wait is left
// out: a program's event loop waits there for everything at once, and its
// timeouts are the loop's.
var dnsWaitCalls = map[string]bool{"poll": true, "ppoll": true, "select": true, "pselect6": true}

type dnsSockKey struct{ pid, fd uint32 }

// dnsThread is what a thread's calls said last about the sockets it uses:
// server is the name server it last connected or sent a query to, "" once
// it has since used another internet socket (bound, connected or sent
// elsewhere), so a later poll is not the resolver's.
type dnsThread struct {
	pid    uint32
	fd     uint32
	server string
	tcp    bool
	query  string // the call that sent the last query seen
	// qnames are the questions ("NAME TYPE") of the last query call
	// seen: sendmmsg sends two (A and AAAA); none when the payload was
	// not copied or did not decode.
	qnames []string
	sent   bool // a query was seen sent since the thread's last wait
	// alike are the shapes (waitShape) of the thread's waits that timed
	// out right after a query seen sent: the resolver's waits. A later
	// timed-out wait whose query was not seen (live, only a sample of
	// the fast calls crosses over) counts if it has one of these shapes,
	// or asked poll for the wait the process's resolv.conf sets; another
	// (an idle loop's poll on a pipe after an answered lookup) does not.
	alike map[string]bool
	// answered: the thread's last resolver wait seen was answered. Its
	// later waits without a query seen are then not taken for the
	// resolver's by resolv.conf's timeout alone: the server answers, and
	// a loop that polls with that timeout is likelier than a lookup
	// whose every fast call was unseen.
	answered bool
	// other: a call since the last query said the thread uses another
	// internet socket.
	other bool
	// pending are timed-out waits made before any socket call of the
	// thread was seen: live, the fast calls cross over only as a sample,
	// and a lookup's connect and send often do not. They count for the
	// server once a wait of the thread known to be the resolver's times
	// out as they did (the same call, descriptors and timeout argument):
	// the resolver's waits are alike, and an idle loop's poll with
	// another timeout or set of descriptors is not taken for them. An
	// answered wait, or a call that names another socket, drops them.
	pending []dnsWait
}

// dnsWait is one timed-out wait, kept until its server is known.
type dnsWait struct {
	pid  uint32
	comm string
	name string
	call event.Syscall
}

// dnsPendingMax: waits kept per thread before its first socket call is
// seen; a thread that waits out timeouts this often without a socket
// call crossing over is counted from the next one on.
const dnsPendingMax = 64

// dnsServer is the finding's group: the waits on one name server.
type dnsServer struct {
	server            string
	tcp               bool
	procs             map[uint32]string
	byPID             map[uint32]uint64 // ns of timed-out waits
	timeouts, approx  uint64
	waited            uint64
	waits             []uint64
	waitCalls, sends  map[string]uint64
	timeoutArgs       map[int64]uint64 // poll's timeout argument, ms
	answered, refused uint64
	answeredNS        uint64
	example           []string
	// names are the questions of the queries whose waits timed out,
	// by name then type; named counts those waits.
	names map[string]map[string]uint64
	named uint64
	// vcReads are the waits that were reads of a TCP socket connected
	// to port 53 (glibc's `options use-vc`, or a truncated answer's
	// retry over TCP) that ended without an answer: glibc reads there
	// with no timeout of its own, so the wait lasts until the server
	// closes or resets the connection. vcNS is their time.
	vcReads, vcNS uint64
	// nbQueries are the queries read at once and found unanswered
	// (EAGAIN) whose socket was closed with no answer read: Go's
	// resolver, which waits in the runtime's netpoller, not in a poll
	// of the socket.
	nbQueries uint64
	// nbRounds: the rounds of those queries, one a lookup round (A and
	// AAAA, sent side by side, are closed at one deadline).
	nbRounds uint64
}

// dnsQueriesPerWait bounds the questions one wait is taken to wait
// for: a resolver sends one or two (A and AAAA) a server, and a thread
// that sends queries and never waits (a forwarder) keeps only its first.
const dnsQueriesPerWait = 8

// dnsNamesMax bounds the names kept per server: a storm of distinct
// names is told by its count, and the first ones show its shape.
const dnsNamesMax = 64

// dnsNamesShown: the names the summary lists (the evidence keeps all
// dnsNamesMax).
const dnsNamesShown = 8

// resolver finds lookups that waited out the resolver's timeout: a thread
// that connected or sent a query to port 53, then waited in poll (or
// select) until the timeout passed with nothing to read.
type resolver struct {
	host    *Host
	arch    event.Arch
	socks   map[dnsSockKey]*dnsThread // descriptors known to be connected to port 53
	stream  map[dnsSockKey]bool       // descriptors socket() made SOCK_STREAM (TCP)
	threads map[uint32]*dnsThread
	servers map[string]*dnsServer
	// conf is each process's resolver settings, read live at its first
	// timed-out wait (the process is alive then; at report time it may
	// not be).
	conf map[uint32]*resolvConf
	kept int
	// nb are each process's queries on non-blocking sockets (Go's
	// resolver) not yet answered or closed; nbUntil, the end of the
	// last of its waits counted (the queries of a lookup wait side by
	// side: their time is counted once).
	nb      map[uint32][]dnsNBQuery
	nbUntil map[uint32]uint64
	// wq is the question of the last query written on each socket
	// (live, a sample of the writes), until a read finds it unanswered.
	wq map[dnsSockKey]string
	// udpPeer: live, what /proc said of a descriptor whose connect was
	// not seen ("" not port 53), by its socket inode.
	udpPeer map[string]string
}

// dnsNBQuery: a read of a socket connected to port 53 that found nothing
// (EAGAIN): the resolver sent its query and waits elsewhere for the
// answer (Go's resolver parks the goroutine on the runtime's netpoller
// and sets a deadline of resolv.conf's timeout). Over UDP, or over TCP
// (Go with `options use-vc`, or after a truncated answer), whose
// non-blocking connect crossed over as EINPROGRESS: glibc's TCP reads
// block, and never find nothing.
type dnsNBQuery struct {
	fd     uint32
	at     uint64 // the read's end
	server string
	tcp    bool
	comm   string
	qname  string // "NAME TYPE", when its write was seen
}

// dnsNBMax bounds the queries kept per process: Go sends two queries a
// lookup (A and AAAA), a few lookups at once; the oldest goes first.
const dnsNBMax = 64

func newResolver(h *Host) *resolver {
	return &resolver{host: h, arch: h.Arch, socks: map[dnsSockKey]*dnsThread{}, stream: map[dnsSockKey]bool{}, threads: map[uint32]*dnsThread{},
		servers: map[string]*dnsServer{}, conf: map[uint32]*resolvConf{},
		nb: map[uint32][]dnsNBQuery{}, nbUntil: map[uint32]uint64{}, wq: map[dnsSockKey]string{}, udpPeer: map[string]string{}}
}

// dnsPeer: the server of a sockaddr a call copied, when its port is 53.
func dnsPeer(b []byte) string {
	p := sockaddrString(b)
	if p == "" || !strings.HasSuffix(p, ":"+strconv.Itoa(dnsPort)) {
		return ""
	}
	return strings.TrimSuffix(p, ":"+strconv.Itoa(dnsPort))
}

func (r *resolver) thread(e *event.Event) *dnsThread {
	t := r.threads[e.TID]
	if t == nil {
		if len(r.threads) >= dnsKept {
			return nil
		}
		t = &dnsThread{pid: e.PID}
		r.threads[e.TID] = t
	}
	return t
}

// queried: the thread's last socket call was for the name server.
func (r *resolver) queried(e *event.Event, fd uint32, server string, tcp bool, call string) {
	if t := r.thread(e); t != nil {
		t.fd, t.server, t.tcp, t.other = fd, server, tcp, false
		if call != "" {
			// The queries sent since the thread's last wait all wait
			// in the next one: musl sends A and AAAA with two sendto
			// calls, glibc with one sendmmsg.
			if !t.sent {
				t.qnames = nil
			}
			t.query, t.sent = call, true
			if call == "sendto" || call == "sendmmsg" || call == "writev" {
				// sendmmsg's second message's query is copied under
				// vlen, writev's (glibc over TCP) under iovcnt
				for _, b := range [][]byte{e.Syscall.Data[1], e.Syscall.Data[2]} {
					if q, ok := dns.Parse(b); ok && len(t.qnames) < dnsQueriesPerWait {
						t.qnames = append(t.qnames, q.String())
					}
				}
			}
		}
		r.confirmPending(t, e.PID)
	}
}

// confirmPending counts the thread's held waits that asked poll for one
// of the waits the process's resolv.conf sets (read live: glibc waits
// timeout × 1000 ms for its first server, (timeout << n) / servers
// seconds for the n-th after it), on one descriptor, now that the thread is seen to query a
// name server: a process running before sysray may not show a wait known
// to be the resolver's (its connect crossing over) before the trace ends.
func (r *resolver) confirmPending(t *dnsThread, pid uint32) {
	if len(t.pending) == 0 {
		return
	}
	kept := t.pending[:0]
	for _, p := range t.pending {
		if r.confWait(pid, p.name, &p.call) {
			r.timedOut(t, p.pid, p.comm, p.name, &p.call, nil)
		} else {
			kept = append(kept, p)
		}
	}
	t.pending = kept
}

// confWait: s asked poll, on one descriptor, for one of the waits the
// process's resolv.conf sets (read live; false when it cannot be).
func (r *resolver) confWait(pid uint32, name string, s *event.Syscall) bool {
	if name != "poll" || s.Args[1] != 1 || !r.host.canRead() {
		return false
	}
	if _, ok := r.conf[pid]; !ok && len(r.conf) < dnsKept {
		r.conf[pid] = readResolvConf(pid)
	}
	c := r.conf[pid]
	if c == nil {
		return false
	}
	n := max(len(c.nameservers), 1)
	if s.Args[2] == uint64(c.timeout*1000) {
		return true
	}
	for ns := 1; ns < n; ns++ {
		if s.Args[2] == uint64(max((c.timeout<<ns)/n, 1)*1000) {
			return true
		}
	}
	return false
}

// waitShape is what the resolver's waits share: the call, the number of
// descriptors, and poll's timeout argument.
func waitShape(name string, s *event.Syscall) string {
	if name == "poll" {
		return fmt.Sprintf("%s|%d|%d", name, s.Args[1], s.Args[2])
	}
	return fmt.Sprintf("%s|%d", name, s.Args[1])
}

// elsewhere: the thread's last socket call was on another internet socket.
func (r *resolver) elsewhere(e *event.Event) {
	if t := r.thread(e); t != nil {
		t.server, t.other, t.pending = "", true, nil
	}
}

func (r *resolver) Observe(e *event.Event) {
	if e.Kind == event.KindExit {
		delete(r.threads, e.TID)
		return
	}
	if e.Kind != event.KindSyscall || e.Syscall.Unfinished {
		return
	}
	s := &e.Syscall
	name := event.SyscallName(r.arch, s.Nr)
	fd := uint32(s.Args[0])
	key := dnsSockKey{e.PID, fd}
	switch name {
	case "socket":
		if s.Ret >= 0 {
			k := dnsSockKey{e.PID, uint32(s.Ret)}
			delete(r.socks, k)
			delete(r.stream, k)
			const sockStream = 1
			if s.Args[1]&0xf == sockStream && len(r.stream) < dnsKept {
				r.stream[k] = true
			}
		}
	case "close":
		r.nbClose(e, key)
		delete(r.wq, key)
		delete(r.socks, key)
		delete(r.stream, key)
	case "connect":
		if s.Ret != 0 && s.Ret != -115 { // EINPROGRESS: a non-blocking TCP connect under way
			return
		}
		server := dnsPeer(s.Data[1])
		if server == "" {
			// A unix socket (glibc asks nscd's first) says nothing of
			// the thread's internet sockets.
			if sockaddrString(s.Data[1]) != "" {
				delete(r.socks, key)
				r.elsewhere(e)
			}
			return
		}
		d := &dnsThread{pid: e.PID, fd: fd, server: server, tcp: s.Ret == -115 || r.stream[key]}
		if len(r.socks) < dnsKept {
			r.socks[key] = d
		}
		r.queried(e, fd, server, d.tcp, "")
	case "bind":
		// musl binds its resolver's socket to port 0 (any address, a
		// port the kernel picks) before it sends: that says nothing of
		// where the socket goes. A bind to a port of its own is a
		// listener's.
		if a := sockaddrString(s.Data[1]); a != "" && s.Ret == 0 && !strings.HasSuffix(a, ":0") {
			r.elsewhere(e)
		}
	case "sendto", "sendmsg", "sendmmsg", "send", "write", "writev":
		if s.Ret < 0 {
			return
		}
		if name == "write" {
			// Go writes its query on the connected socket: the kernel
			// copied its first bytes only if the peer is port 53. Over
			// TCP the message follows its length.
			q, ok := dns.Parse(s.Data[1])
			if !ok {
				q, ok = dns.ParseFramed(s.Data[1], s.Args[2])
			}
			if ok && (r.wq[key] != "" || len(r.wq) < dnsKept) {
				r.wq[key] = q.String()
			}
		}
		if name == "sendto" {
			if server := dnsPeer(s.Data[4]); server != "" {
				r.queried(e, fd, server, false, name)
				return
			} else if sockaddrString(s.Data[4]) != "" {
				r.elsewhere(e)
				return
			}
		}
		// A send on a descriptor whose connect was not seen says
		// nothing: only a sample of the fast calls crosses over live.
		if d := r.socks[key]; d != nil {
			r.queried(e, fd, d.server, d.tcp, name)
		}
	case "read", "readv", "recvfrom", "recvmsg", "recv", "recvmmsg":
		r.nbRead(e, key)
		r.vcRead(e, name, key)
		t := r.threads[e.TID]
		if d := r.socks[key]; d != nil && t != nil && t.server == d.server && s.Ret == -111 {
			// ECONNREFUSED: the port was unreachable, said at once.
			if g := r.group(d.server, d.tcp); g != nil {
				g.refused++
			}
		}
	default:
		if dnsWaitCalls[name] {
			r.wait(e, name, s)
		}
	}
}

// vcRead takes a read of a TCP socket connected to port 53 that waited
// at least dnsWaitMin: glibc over TCP writes the query and reads the
// answer with no timeout of its own, so a silent server is a read that
// waits until the server closes (EOF) or resets the connection. One that
// got bytes was answered. Live, a descriptor whose connect was not seen
// is read from /proc.
func (r *resolver) vcRead(e *event.Event, name string, key dnsSockKey) {
	s := &e.Syscall
	if s.Latency < dnsWaitMin || s.Ret == -11 || s.Ret == -4 { // EAGAIN, EINTR: not the server's answer
		return
	}
	d := r.socks[key]
	// A connect seen without its socket call (live, a sample) does not
	// say the socket is TCP: /proc does.
	if (d == nil || !d.tcp) && s.Ret <= 0 {
		if server := dnsTCPPeer(r.host, e.PID, key.fd); server != "" {
			d = &dnsThread{pid: e.PID, fd: key.fd, server: server, tcp: true}
			if len(r.socks) < dnsKept {
				r.socks[key] = d
			}
		}
	}
	// The process may be gone by now (its last lookup's read ends, it
	// exits): the same descriptor as the thread's last read of its name
	// server over TCP, with no other internet socket used since, is that
	// socket or the one the resolver opened again in its place.
	if t := r.threads[e.TID]; d == nil && s.Ret <= 0 && t != nil && t.tcp && t.server != "" && t.fd == key.fd {
		d = &dnsThread{pid: e.PID, fd: key.fd, server: t.server, tcp: true}
	}
	// A descriptor seen connected to port 53 whose socket call was not
	// seen: a read there that waited and got no bytes is TCP's (glibc's
	// UDP socket is non-blocking; its reads follow a ready poll).
	if d == nil || !d.tcp && s.Ret > 0 {
		return
	}
	g := r.group(d.server, true)
	if g == nil {
		return
	}
	if s.Ret > 0 {
		g.answered++
		g.answeredNS += s.Latency
		return
	}
	t := r.thread(e)
	if t == nil {
		return
	}
	// The queries written on this socket since the thread's last wait
	// (writev: glibc sends A and AAAA in one) are the ones that waited.
	var qnames []string
	if t.sent && t.fd == key.fd {
		qnames = t.qnames
	}
	t.sent, t.qnames = false, nil
	t.fd, t.server, t.tcp, t.other = key.fd, d.server, true, false
	g.vcReads++
	g.vcNS += s.Latency
	r.timedOut(t, e.PID, e.Comm, name, s, qnames)
}

// dnsTCPPeer reads, live, whether descriptor fd of process pid is a TCP
// socket connected to port 53, and returns its server ("" if not, or not
// live).
func dnsTCPPeer(h *Host, pid, fd uint32) string {
	if !h.canRead() {
		return ""
	}
	dir := "/proc/" + strconv.FormatUint(uint64(pid), 10)
	link, err := os.Readlink(dir + "/fd/" + strconv.FormatUint(uint64(fd), 10))
	if err != nil || !strings.HasPrefix(link, "socket:[") {
		return ""
	}
	inode := strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")
	server := ""
	for _, t := range []string{"tcp", "tcp6"} {
		scanTable(dir+"/net/"+t, func(fs []string) {
			if server == "" && len(fs) >= 10 && fs[9] == inode && strings.HasSuffix(fs[2], ":0035") {
				server = strings.TrimSuffix(hexAddr(fs[2]), ":53")
			}
		})
	}
	return server
}

func (r *resolver) group(server string, tcp bool) *dnsServer {
	g := r.servers[server]
	if g == nil {
		if len(r.servers) >= dnsKept {
			return nil
		}
		g = &dnsServer{server: server, procs: map[uint32]string{}, byPID: map[uint32]uint64{},
			waitCalls: map[string]uint64{}, sends: map[string]uint64{}, timeoutArgs: map[int64]uint64{}}
		r.servers[server] = g
	}
	g.tcp = g.tcp || tcp
	return g
}

// wait takes a poll (select…) of a thread whose last socket call was a
// query to a name server: one that returned 0 after waiting waited out
// the timeout; one that returned a ready descriptor was answered (or told
// the port is unreachable, which the read after it says).
func (r *resolver) wait(e *event.Event, name string, s *event.Syscall) {
	if s.Ret < 0 || s.Ret == 0 && s.Latency < dnsWaitMin {
		return
	}
	t := r.threads[e.TID]
	if s.Ret == 0 && (t == nil || t.server == "" && !t.other) {
		// No socket call of the thread seen yet: live, the process
		// may still hold the socket it waited on (a second attempt or
		// server, single-request's second query).
		if server := dnsSocketHeld(r.host, e.PID); server != "" {
			r.queried(e, ^uint32(0), server, false, "")
			t = r.threads[e.TID]
			t.sent = true // the socket it waited on, held now
		} else if t = r.thread(e); t != nil && len(t.pending) < dnsPendingMax {
			t.pending = append(t.pending, dnsWait{pid: e.PID, comm: e.Comm, name: name, call: *s})
			return
		}
	}
	if t == nil || t.server == "" {
		return
	}
	// glibc polls for POLLOUT with no timeout before it sends: ready at
	// once, it answers nothing. A wait after a query seen sent that found
	// something to read was answered (or told the port is unreachable:
	// refused_seen counts the failed reads after it).
	sent, qnames := t.sent, t.qnames
	t.sent, t.qnames = false, nil
	if s.Ret > 0 {
		if g := r.group(t.server, t.tcp); g != nil && sent {
			g.answered++
			g.answeredNS += s.Latency
			t.pending, t.answered = nil, true
		}
		return
	}
	shape := waitShape(name, s)
	if !sent && !t.alike[shape] && (t.answered || !r.confWait(e.PID, name, s)) {
		return
	}
	if sent {
		t.answered = false
	}
	if sent {
		if t.alike == nil {
			t.alike = map[string]bool{}
		}
		if len(t.alike) < 8 {
			t.alike[shape] = true
		}
	}
	for i := range t.pending {
		p := &t.pending[i]
		if waitShape(p.name, &p.call) == shape {
			r.timedOut(t, p.pid, p.comm, p.name, &p.call, nil)
		}
	}
	t.pending = nil
	if !sent {
		qnames = nil
	}
	r.timedOut(t, e.PID, e.Comm, name, s, qnames)
}

// timedOut counts a wait on t's server that ended by its timeout;
// qnames are the questions of the queries it waited for, when seen.
func (r *resolver) timedOut(t *dnsThread, pid uint32, comm, name string, s *event.Syscall, qnames []string) {
	g := r.group(t.server, t.tcp)
	if g == nil {
		return
	}
	g.addNames(qnames)
	g.procs[pid] = comm
	g.timeouts++
	g.waited += s.Latency
	g.byPID[pid] += s.Latency
	if s.Approx {
		g.approx++
	}
	if r.kept < dnsKept {
		g.waits = append(g.waits, s.Latency)
		r.kept++
	}
	g.waitCalls[name]++
	if t.query != "" {
		g.sends[t.query]++
	}
	if name == "poll" {
		g.timeoutArgs[int64(int32(s.Args[2]))]++
	}
	if g.example == nil {
		g.example = []string{event.FormatSyscall(r.arch, s) + " <" + units.Duration(s.Latency) + ">"}
	}
	if _, ok := r.conf[pid]; !ok && len(r.conf) < dnsKept && r.host.canRead() {
		r.conf[pid] = readResolvConf(pid)
	}
}

// addNames counts the questions ("NAME TYPE") of one timed-out wait.
func (g *dnsServer) addNames(qnames []string) {
	if len(qnames) > 0 {
		g.named++
	}
	for _, qn := range qnames {
		n, typ, _ := strings.Cut(qn, " ")
		if g.names == nil {
			g.names = map[string]map[string]uint64{}
		}
		if g.names[n] != nil || len(g.names) < dnsNamesMax {
			if g.names[n] == nil {
				g.names[n] = map[string]uint64{}
			}
			g.names[n][typ]++
		}
	}
}

// dnsSocketHeld reads, live, whether the process holds a UDP or TCP
// socket connected to port 53 now, and returns its server ("" if none,
// or not live).
func dnsSocketHeld(h *Host, pid uint32) string {
	if !h.canRead() {
		return ""
	}
	dir := "/proc/" + strconv.FormatUint(uint64(pid), 10)
	ents, err := os.ReadDir(dir + "/fd")
	if err != nil {
		return ""
	}
	inodes := map[string]bool{}
	for _, e := range ents {
		if link, err := os.Readlink(dir + "/fd/" + e.Name()); err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	if len(inodes) == 0 {
		return ""
	}
	server := ""
	for _, t := range []string{"udp", "udp6", "tcp", "tcp6"} {
		scanTable(dir+"/net/"+t, func(fs []string) {
			if server != "" || len(fs) < 10 || !inodes[fs[9]] || !strings.HasSuffix(fs[2], ":0035") {
				return
			}
			server = strings.TrimSuffix(hexAddr(fs[2]), ":53")
		})
	}
	return server
}

func (r *resolver) Findings(env *Env) []Finding {
	threadNS, _ := env.threadTime()
	names := make([]string, 0, len(r.servers))
	for s, g := range r.servers {
		if g.timeouts > 0 {
			names = append(names, s)
		}
	}
	sort.Strings(names)
	var out []Finding
	for _, server := range names {
		g := r.servers[server]
		sev := Info
		if g.waited >= dnsWarnNS {
			sev = Warning
		}
		share := 0.0
		for pid, w := range g.byPID {
			if t := threadNS[pid]; t > 0 {
				share = max(share, float64(w)/float64(t))
			}
		}
		var procs []string
		for pid, comm := range g.procs {
			procs = append(procs, env.ProcName(pid, comm))
		}
		sort.Strings(procs)
		who := strings.Join(procs, ", ")
		if len(procs) > 1 {
			who = fmt.Sprintf("%d processes (%s)", len(procs), who)
		}
		proto := "UDP"
		if g.tcp {
			proto = "TCP"
		}
		med := medianU(g.waits)
		count := strconv.FormatUint(g.timeouts, 10)
		if env.Host.Live && env.Host.slowBar() > dnsWaitMin {
			count = "at least " + count
		}
		lost := units.Duration(g.waited)
		lostIs := "exact: the sum of the waits that timed out"
		if g.approx > 0 {
			lost = "about " + lost
			lostIs = fmt.Sprintf("the sum of the waits that timed out, %d of them known only to a kernel tick", g.approx)
		}
		waitCalls, sends := byValue(g.waitCalls), byValue(g.sends)
		queried := "sent its queries"
		if len(sends) > 0 {
			queried = "sent its queries (" + strings.Join(sends, ", ") + ")"
		}
		ev := map[string]any{"server": server, "protocol": proto, "processes": procs,
			"timed_out_waits": g.timeouts, "waited_ns": g.waited, "waited_ns_is": lostIs,
			"median_wait_ns": med, "wait_calls": waitCalls, "query_calls": sends,
			"answered_waits_seen": g.answered, "refused_seen": g.refused, "share_of_thread_time": share}
		if len(g.timeoutArgs) > 0 {
			args := map[string]uint64{}
			for ms, n := range g.timeoutArgs {
				args[strconv.FormatInt(ms, 10)] = n
			}
			ev["poll_timeout_ms"] = args
		}
		if g.example != nil {
			ev["example"] = g.example
		}
		settings, conf := r.settings(env, g)
		if conf != nil {
			ev["resolv_conf"] = map[string]any{"from": conf.from, "nameservers": conf.nameservers, "options": conf.options,
				"timeout_s": conf.timeout, "attempts": conf.attempts}
			if g.vcReads < g.timeouts {
				ev["lookups_failed_at_most"] = (g.timeouts - g.nbQueries + g.nbRounds) / uint64(conf.attempts*max(len(conf.nameservers), 1))
			}
		}
		ev["port"] = dnsPort
		names := ""
		if len(g.names) > 0 {
			var text string
			text, ev["names"], ev["search_expansion"] = dnsNames(g, conf)
			atLeast := ""
			if g.named < g.timeouts {
				atLeast = fmt.Sprintf(" (the queries seen: %d of the %d waits; live, a fast send crosses over only as a sample)", g.named, g.timeouts)
			}
			names = fmt.Sprintf(" The names looked up, from the queries sent before those waits%s: %s.", atLeast, text)
			ev["named_waits"] = g.named
		}
		answered := ""
		if g.answered > 0 {
			answered = fmt.Sprintf(" %d other waits seen on this server were answered.", g.answered)
		}
		title := fmt.Sprintf("%s DNS queries to name server %s went unanswered, each waiting out the resolver's timeout (%s lost)",
			count, server, lost)
		vc, ended := "", "because the resolver's timeout passed with nothing to read"
		if g.vcReads > 0 {
			ev["tcp_reads_unanswered"] = g.vcReads
			ev["tcp_read_waited_ns"] = g.vcNS
			vc = fmt.Sprintf(" Over TCP (`options use-vc`, or a truncated answer asked again) glibc writes the query and reads the answer "+
				"with no timeout of its own: %d of those waits were reads of a socket connected to port 53 that waited %s in all "+
				"until the server closed or reset the connection without an answer.", g.vcReads, units.Duration(g.vcNS))
			if g.vcReads == g.timeouts {
				ended = "with no answer"
				title = fmt.Sprintf("%s DNS queries over TCP to name server %s went unanswered, each read waiting until the server gave up (%s lost)",
					count, server, lost)
			}
		}
		if g.nbQueries > 0 {
			ev["nonblocking_queries_unanswered"] = g.nbQueries
			vc += fmt.Sprintf(" %d of those were queries the resolver read at once on a non-blocking socket connected to port 53 and found "+
				"unanswered (EAGAIN), then waited for outside the socket, in a runtime's netpoller (Go's resolver: epoll_pwait or futex "+
				"on any thread), until the resolver closed the socket at its deadline with no answer read (then the query is sent again "+
				"on a new socket, or the lookup fails). Their time, from the read to the close, is counted once for the "+
				"queries of a lookup that waited side by side (A and AAAA on two sockets).", g.nbQueries)
		}
		f := Finding{
			ID:       DNSTimeout,
			Key:      keyOf(server),
			Procs:    env.refs(pidsOf(g.procs)...),
			Syscalls: append(sends, waitCalls...),
			Severity: sev,
			Title:    title,
			Summary: fmt.Sprintf("%s %s over %s to the name server %s (port 53) and waited for the answer (%s); "+
				"%s of those waits ended %s, median %s, %s in all (%s).%s "+
				"Each such wait is one query round (an A query, or A and AAAA sent together) that got no answer: the lookup then tries "+
				"the next attempt or server, or fails.%s%s%s",
				who, queried, proto, server, strings.Join(waitCalls, ", "), count, ended, units.Duration(med), lost, lostIs, vc, names, answered, settings),
			Evidence: ev,
			Fix: "Make the name server reachable, or list one that answers first in resolv.conf (check that a firewall does not drop UDP " +
				"port 53 to it). Meanwhile bound the cost (glibc waits 5 s a round and makes 2 rounds where resolv.conf does not say): `options timeout:1 attempts:1` (and `rotate` across several servers) in " +
				"resolv.conf or RES_OPTIONS; run a local cache (systemd-resolved, nscd, dnsmasq, or NodeLocal DNSCache in Kubernetes) " +
				"so a lookup rarely leaves the host; and with `ndots:5` (Kubernetes' default) use fully qualified names (a trailing dot) " +
				"so one lookup is not several.",
			Score: float64(g.waited),
		}
		out = append(out, f)
	}
	return out
}

// dnsNames lists the names whose queries went unanswered, most queries
// first, and says which of them are one name with resolv.conf's search
// domains appended (conf nil: not known): each such lookup waits once for
// every domain tried.
func dnsNames(g *dnsServer, conf *resolvConf) (string, []map[string]any, map[string]any) {
	type named struct {
		name    string
		queries uint64
		types   map[string]uint64
	}
	var list []named
	for n, types := range g.names {
		var w uint64
		for _, c := range types {
			w += c
		}
		list = append(list, named{n, w, types})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].queries != list[j].queries {
			return list[i].queries > list[j].queries
		}
		return list[i].name < list[j].name
	})
	var ev []map[string]any
	var parts []string
	for i, n := range list {
		ev = append(ev, map[string]any{"name": n.name, "types": n.types, "queries": n.queries})
		if i < dnsNamesShown {
			var ts []string
			for _, t := range byValue(n.types) {
				ts = append(ts, fmt.Sprintf("%d %s", n.types[t], t))
			}
			parts = append(parts, fmt.Sprintf("%s (%s)", n.name, strings.Join(ts, ", ")))
		}
	}
	text := strings.Join(parts, "; ")
	if len(list) > dnsNamesShown {
		text += fmt.Sprintf("; and %d more", len(list)-dnsNamesShown)
	}
	if len(list) >= dnsNamesMax {
		text += fmt.Sprintf(" (the first %d names kept)", dnsNamesMax)
	}
	if conf == nil || len(conf.search) == 0 {
		return text, ev, nil
	}
	// A base name the resolver tried with several search domains (or
	// also as it is): the domains multiplied its queries.
	bases := map[string]map[string]bool{}
	for _, n := range list {
		base := n.name
		for _, d := range conf.search {
			if b, ok := strings.CutSuffix(n.name, "."+strings.TrimSuffix(d, ".")); ok && b != "" {
				base = b
				break
			}
		}
		if bases[base] == nil {
			bases[base] = map[string]bool{}
		}
		bases[base][n.name] = true
	}
	var multiplied []string
	for b, ns := range bases {
		if len(ns) > 1 {
			multiplied = append(multiplied, b)
		}
	}
	if len(multiplied) == 0 {
		return text, ev, nil
	}
	sort.Strings(multiplied)
	text += fmt.Sprintf(". Search-domain expansion multiplied the queries: %s, each tried under several names "+
		"(search %s, ndots:%d: a name with fewer than %d dots is tried with each search domain appended, and every try waits out the timeout)",
		strings.Join(multiplied[:min(len(multiplied), dnsNamesShown)], ", "), strings.Join(conf.search, " "), conf.ndots, conf.ndots)
	return text, ev, map[string]any{"base_names": multiplied, "search": conf.search, "ndots": conf.ndots}
}

// settings says what resolv.conf set the wait to: the process's own file,
// read live, or from a capture the recorder's, when it lists the server
// the process queried (a process in a container reads another file).
func (r *resolver) settings(env *Env, g *dnsServer) (string, *resolvConf) {
	var conf *resolvConf
	for _, pid := range pidsOf(g.procs) {
		if c := r.conf[pid]; c != nil {
			conf = c
			break
		}
	}
	if conf == nil {
		if text := env.Host.Meta[hostfacts.MetaResolvConf]; text != "" && !env.Host.Live {
			c := parseResolvConf(text)
			for _, ns := range c.nameservers {
				if ns == g.server {
					c.from = "the capture's copy of the recorder's /etc/resolv.conf"
					conf = c
				}
			}
		}
	}
	if conf == nil {
		where := "could not be read"
		if !env.Host.Live {
			where = "are not in the capture (it holds the recorder's /etc/resolv.conf, which does not list this server: " +
				"the process read its own, in its container or mount namespace)"
		}
		return " The resolver's settings " + where + " (resolv.conf's `options timeout:` sets each wait and `attempts:` " +
			"how many rounds; glibc's defaults apply where they are not set).", nil
	}
	opts := conf.options
	if opts == "" {
		opts = "none"
	}
	search := ""
	if len(conf.search) > 0 {
		// glibc tries a name with fewer than ndots dots under each
		// search domain before it tries it as is: one lookup, several
		// queries, each that gets no answer another wait.
		search = fmt.Sprintf(" Search list %s, ndots:%d: a name with fewer than %d dots is tried with each search domain appended "+
			"before it is tried as is, and each of those queries can wait out the timeout.", strings.Join(conf.search, " "), conf.ndots, conf.ndots)
	}
	if g.vcReads == g.timeouts {
		// glibc's reads over TCP wait for the server, not the timeout,
		// and it connects again once after a reset.
		return fmt.Sprintf(" The resolver's settings (%s): name servers %s, options %s; over TCP the `timeout:` bounds no read.",
			conf.from, strings.Join(conf.nameservers, ", "), opts) + search, conf
	}
	rounds := uint64(conf.attempts * max(len(conf.nameservers), 1))
	return fmt.Sprintf(" The resolver's settings (%s): name servers %s, options %s, so each wait is %d s and a lookup "+
		"that gets no answer waits %d rounds (attempts × servers) before it fails: at most %d lookups failed outright.",
		conf.from, strings.Join(conf.nameservers, ", "), opts, conf.timeout, rounds, (g.timeouts-g.nbQueries+g.nbRounds)/rounds) + search, conf
}

// forget lets go of ended processes and threads (Doctor.forget): their
// sockets are closed; what their waits cost stays in the servers' groups.
func (r *resolver) forget(pids, tids map[uint32]bool) {
	for k := range r.socks {
		if pids[k.pid] {
			delete(r.socks, k)
		}
	}
	for k := range r.stream {
		if pids[k.pid] {
			delete(r.stream, k)
		}
	}
	for k := range r.wq {
		if pids[k.pid] {
			delete(r.wq, k)
		}
	}
	for tid := range tids {
		delete(r.threads, tid)
	}
	for pid := range pids {
		delete(r.nb, pid)
		delete(r.nbUntil, pid)
	}
}

// nbRead takes a read of a UDP socket connected to port 53. One that
// found nothing (EAGAIN) is a query the resolver will wait for
// elsewhere: Go's resolver writes the query on a connected non-blocking
// socket, reads at once, and parks the goroutine on the runtime's
// netpoller until the answer or the deadline (resolv.conf's timeout),
// then closes the socket. The wait is not a poll of the socket: it is
// the netpoller's epoll_pwait, or an idle thread's timed futex, on any
// thread. A failed read always crosses over; one that got bytes was
// answered.
func (r *resolver) nbRead(e *event.Event, key dnsSockKey) {
	s := &e.Syscall
	if s.Ret != -11 && s.Ret <= 0 {
		return
	}
	d := r.socks[key]
	if d == nil && s.Ret == -11 {
		if server := r.udpDNSPeer(e.PID, key.fd); server != "" {
			d = &dnsThread{pid: e.PID, fd: key.fd, server: server}
			if len(r.socks) < dnsKept {
				r.socks[key] = d
			}
		}
	}
	if d == nil {
		return
	}
	if s.Ret > 0 {
		// Answered (this read crossed over as a sample): its query
		// waits no more.
		qs := r.nb[e.PID]
		kept := qs[:0]
		for _, q := range qs {
			if q.fd != key.fd {
				kept = append(kept, q)
			}
		}
		if len(qs) != len(kept) {
			if g := r.group(d.server, d.tcp); g != nil {
				g.answered++
			}
		}
		r.nb[e.PID] = kept
		return
	}
	q := dnsNBQuery{fd: key.fd, at: e.Time + s.Latency, server: d.server, tcp: d.tcp, comm: e.Comm, qname: r.wq[key]}
	delete(r.wq, key)
	if _, ok := r.conf[e.PID]; !ok && len(r.conf) < dnsKept && r.host.canRead() {
		r.conf[e.PID] = readResolvConf(e.PID)
	}
	qs := r.nb[e.PID]
	if len(qs) >= dnsNBMax {
		qs = qs[1:]
	}
	if len(r.nb) < dnsKept || r.nb[e.PID] != nil {
		r.nb[e.PID] = append(qs, q)
	}
}

// nbClose: the resolver closed the socket of a query it found
// unanswered. Closed with no answer read since and at least dnsWaitMin
// later, the query waited out the resolver's deadline (Go closes the
// socket then, and sends the query again on a new one or fails the
// lookup); closed sooner, it was given up for another reason. Live, the
// read of an answer and the close of such a socket always cross over
// (bpf/dnswatch.h): neither is left to the sample.
func (r *resolver) nbClose(e *event.Event, key dnsSockKey) {
	qs := r.nb[e.PID]
	if len(qs) == 0 {
		return
	}
	kept := qs[:0]
	var done []dnsNBQuery
	for _, q := range qs {
		if q.fd != key.fd {
			kept = append(kept, q)
		} else if e.Time >= q.at+dnsWaitMin {
			done = append(done, q)
		}
	}
	r.nb[e.PID] = kept
	if len(done) > 0 {
		r.nbTimedOut(e, done)
	}
}

// nbTimedOut counts the queries whose socket close e ended unanswered:
// each is one query that got no answer. The time lost is the wait from
// the query's read to the close, counted once where the process's
// queries waited side by side (A and AAAA on two sockets).
func (r *resolver) nbTimedOut(e *event.Event, qs []dnsNBQuery) {
	pid := e.PID
	for _, q := range qs {
		g := r.group(q.server, q.tcp)
		if g == nil {
			continue
		}
		from := max(q.at, r.nbUntil[pid])
		lost := uint64(0)
		if e.Time > from {
			lost = e.Time - from
		}
		if lost > 0 {
			r.nbUntil[pid] = e.Time
		}
		g.procs[pid] = q.comm
		g.timeouts++
		g.nbQueries++
		if q.qname != "" {
			g.addNames([]string{q.qname})
		}
		g.waited += lost
		g.byPID[pid] += lost
		if lost >= dnsWaitMin {
			g.nbRounds++
			if r.kept < dnsKept {
				g.waits = append(g.waits, e.Time-q.at)
				r.kept++
			}
		}
		g.waitCalls["netpoller (read EAGAIN … close)"]++
		if g.example == nil {
			g.example = []string{fmt.Sprintf("read(%d) = -EAGAIN, then %s %s later, no answer read",
				q.fd, event.FormatSyscall(r.arch, &e.Syscall), units.Duration(e.Time-q.at))}
		}
	}
	if _, ok := r.conf[pid]; !ok && len(r.conf) < dnsKept && r.host.canRead() {
		r.conf[pid] = readResolvConf(pid)
	}
}

// udpDNSPeer reads, live, whether descriptor fd of process pid is a UDP
// socket connected to port 53 (its inode in the network namespace's udp
// tables), and returns its server ("" if not, or not live). An inode
// read once is remembered: a busy program's non-blocking reads fail with
// EAGAIN on the same sockets again and again.
func (r *resolver) udpDNSPeer(pid, fd uint32) string {
	if !r.host.canRead() {
		return ""
	}
	dir := "/proc/" + strconv.FormatUint(uint64(pid), 10)
	link, err := os.Readlink(dir + "/fd/" + strconv.FormatUint(uint64(fd), 10))
	if err != nil || !strings.HasPrefix(link, "socket:[") {
		return ""
	}
	inode := strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")
	if server, ok := r.udpPeer[inode]; ok {
		return server
	}
	server := ""
	for _, t := range []string{"udp", "udp6"} {
		scanTable(dir+"/net/"+t, func(fs []string) {
			if server == "" && len(fs) >= 10 && fs[9] == inode && strings.HasSuffix(fs[2], ":0035") {
				server = strings.TrimSuffix(hexAddr(fs[2]), ":53")
			}
		})
	}
	if len(r.udpPeer) >= dnsKept {
		clear(r.udpPeer)
	}
	r.udpPeer[inode] = server
	return server
}
