package doctor

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
	"github.com/sysray/sysray/internal/units"
)

// The finding it reports.
const NagleDelayedAck ID = "nagle-delayed-ack"

func init() {
	register(registration{ids: []ID{NagleDelayedAck},
		build: func(h *Host) Detector { return newNagle(h) }})
}

// The delayed-ACK timer's bounds on Linux: a receiver acknowledges a lone
// segment after at least TCP_DELACK_MIN (HZ/25) and at most TCP_DELACK_MAX
// (HZ/5), its ACK timeout growing between them with the connection's
// round trips.
const (
	delackMin = 40_000_000
	delackMax = 200_000_000
)

// A reply read that waited within [nagleWaitMin, nagleWaitMax] waited as
// long as the peer's delayed-ACK timer. The timer is armed when the
// request's first segment arrives, before the client starts to wait, so
// the wait can fall short of 40 ms by the client's own work between its
// first write and its read: 4 ms (a jiffy at HZ=250) allows that. Above,
// a tenth over the timer's maximum allows for the round trip and the
// scheduler; here the waits were 44–47 ms (the timer is counted in
// jiffies).
const (
	nagleWaitMin = delackMin - 4_000_000
	nagleWaitMax = delackMax + delackMax/10
)

// nagleRepeat: a single reply 40 ms late is a slow reply; Nagle's hold
// recurs on every split request once the peer leaves quick-ACK mode (Linux
// acknowledges a connection's first segments at once: the scenario's
// first reply came in 0.5 ms), so five in the band are a timer, not chance.
const nagleRepeat = 5

// nagleShare: of a connection's requests, the share whose reply waited in
// the band. Nagle with delayed ACK holds every split request alike; a
// server whose time only sometimes falls in the band is slow for its own
// reasons.
const nagleShare = 0.5

// nagleSmall: Nagle holds a write only while it is smaller than a segment
// (the MSS: 1448 bytes on Ethernet, 65,483 on loopback). The largest MSS
// bounds it: a larger write goes out at once. And the receiver delays its
// ACK only while it holds less than two full segments (it acknowledges
// every second one at once), so the writes before the held one must come
// to less than two.
const nagleSmall = 65483

// nagleConnsMax bounds the descriptors followed at once, the closed ones
// kept for their stalls, and the threads' pending writes, each: about 200
// bytes an entry, so some 10 MiB at most. A host with more sockets in use
// at once than this is far from this pattern's one request at a time on
// each.
const nagleConnsMax = 1 << 14

// nagleWaitsKept: the median is taken over at most this many waits in all
// (512 KiB); the counts and the totals stay exact past it.
const nagleWaitsKept = 1 << 16

type nagleKey struct{ pid, fd uint32 }

// nagleConn is what the calls said of one socket of one process.
type nagleConn struct {
	pid, fd   uint32
	peer      string // from a connect or accept: an IPv4 or IPv6 address and port
	notTCP    bool   // made by a socket() call of another type, or connected to another family
	socket    bool   // known to be a socket: made by socket() or accept, connected, or used by a call only sockets take
	accepted  bool   // the server's end: its reads after its writes wait for the client's next request
	fixed     string // the setsockopt that rules Nagle's hold out (TCP_NODELAY, TCP_CORK)
	comm      string
	requests  uint64 // reads that ended a request: writes before them, or a wait in the band
	split     uint64 // requests seen whole, written in two or more small writes in a row
	splitSlow uint64 // of those, the ones whose reply waited in the band
	stalls    uint64
	waited    uint64 // ns the stalled replies waited
	waits     []uint64
	writes    map[string]uint64 // the calls that wrote the split requests
	reads     map[string]uint64 // the calls that waited for the replies
	example   []string
}

// nagleBurst is a thread's writes on one socket since its last read there.
type nagleBurst struct {
	writes      int
	first, last uint64 // entry of the first write, exit of the last
	lastBytes   int64
	bytes       int64
	names       []string
	calls       []event.Syscall // the writes, formatted only for an example
	waited      uint64          // wait calls (poll…) since the writes
	waitName    string
	waitCall    event.Syscall // the last of those waits, for the example
}

// nagle finds request/response clients whose requests Nagle's algorithm
// holds back for the peer's delayed ACK: a small write, another at once,
// then a read of the reply that waits 40 ms or more, over and over.
type nagle struct {
	arch    event.Arch
	conns   map[nagleKey]*nagleConn
	bursts  map[uint32]map[uint32]*nagleBurst // by thread, then descriptor
	nBursts int
	cur     map[uint32]uint32 // per thread, the socket it last wrote
	closed  []*nagleConn      // connections closed with a stall, kept for the report
	// waitsKept counts the waits kept for medians (nagleWaitsKept).
	waitsKept int
	sampled   bool // the kernel counted calls: only a sample of the fast ones crossed over
	// writeCalls, when sampled, is each process's exact count of
	// nagleWrites calls.
	writeCalls map[uint32]uint64
	closest    *Near // the connection Findings found nearest the rule
}

func (n *nagle) near(*Env) *Near { return n.closest }

// miss keeps c as the nearest candidate if it is: its measure over the
// rule's bound it fell short of. Only a descriptor known to be the client's
// end of a TCP socket is a candidate.
func (n *nagle) miss(c *nagleConn, closeness float64, short string) {
	if closeness == 0 || !c.socket || c.notTCP || c.accepted || n.closest != nil && closeness <= n.closest.Closeness {
		return
	}
	n.closest = &Near{ID: NagleDelayedAck, Closeness: closeness, Short: short,
		Subject: fmt.Sprintf("descriptor %d of %s[%d], %d replies of %d requests waited as long as a delayed ACK", c.fd, c.comm, c.pid, c.stalls, c.requests)}
}

func newNagle(h *Host) *nagle {
	return &nagle{arch: h.Arch, conns: map[nagleKey]*nagleConn{},
		bursts: map[uint32]map[uint32]*nagleBurst{}, cur: map[uint32]uint32{}}
}

// counts: the fast calls were sampled; the kernel's exact counts say how
// many writes each process made in all.
func (n *nagle) counts(cells []stat.Cell) {
	n.sampled = true
	n.writeCalls = map[uint32]uint64{}
	for _, c := range cells {
		if nagleWrites[event.SyscallName(n.arch, c.Nr)] {
			n.writeCalls[c.PID] += c.Count
		}
	}
}

// tcpReadFrames: a read asleep under one of these waited for a TCP
// socket's data (in sk_wait_data, which other protocols share).
var tcpReadFrames = []string{"tcp_recvmsg", "tcp_recvmsg_locked"}

// nagleWrites are the calls that write a request to a socket.
var nagleWrites = map[string]bool{"write": true, "writev": true, "send": true, "sendto": true, "sendmsg": true}

func (n *nagle) conn(pid, fd uint32, comm string) *nagleConn {
	k := nagleKey{pid, fd}
	c := n.conns[k]
	if c == nil {
		if len(n.conns) >= nagleConnsMax {
			return nil
		}
		c = &nagleConn{pid: pid, fd: fd, comm: comm}
		n.conns[k] = c
	}
	return c
}

func (n *nagle) Observe(e *event.Event) {
	if e.Kind == event.KindExit {
		n.nBursts -= len(n.bursts[e.TID])
		delete(n.bursts, e.TID)
		delete(n.cur, e.TID)
		return
	}
	if e.Kind != event.KindSyscall || e.Syscall.Unfinished {
		return
	}
	s := &e.Syscall
	name := event.SyscallName(n.arch, s.Nr)
	fd := uint32(s.Args[0])
	switch name {
	case "socket":
		const sockStream = 1
		if s.Ret >= 0 {
			n.retire(nagleKey{e.PID, uint32(s.Ret)})
			if c := n.conn(e.PID, uint32(s.Ret), e.Comm); c != nil {
				c.socket, c.notTCP = true, s.Args[1]&0xf != sockStream
			}
		}
	case "connect":
		// Options set before the connect (TCP_NODELAY often is) stay.
		if s.Ret == 0 || s.Ret == -115 { // EINPROGRESS: a non-blocking connect under way
			if c := n.conn(e.PID, fd, e.Comm); c != nil {
				c.peer, c.socket = sockaddrString(s.Data[1]), true
				c.notTCP = c.notTCP || c.peer == "" && len(s.Data[1]) >= 2
			}
		}
	case "accept", "accept4":
		if s.Ret >= 0 {
			n.retire(nagleKey{e.PID, uint32(s.Ret)})
			if c := n.conn(e.PID, uint32(s.Ret), e.Comm); c != nil {
				c.peer, c.socket, c.accepted = sockaddrString(s.Data[1]), true, true
			}
		}
	case "close":
		n.retire(nagleKey{e.PID, fd})
		n.dropBurst(e.TID, fd)
	case "setsockopt":
		const ipprotoTCP, tcpNodelay, tcpCork = 6, 1, 3
		if s.Ret == 0 && s.Args[1] == ipprotoTCP && (s.Args[2] == tcpNodelay || s.Args[2] == tcpCork) {
			if c := n.conn(e.PID, fd, e.Comm); c != nil {
				c.fixed = map[uint64]string{tcpNodelay: "TCP_NODELAY", tcpCork: "TCP_CORK"}[s.Args[2]]
			}
		}
	case "write", "writev", "send", "sendto", "sendmsg": // nagleWrites
		if s.Ret <= 0 {
			return
		}
		b := n.bursts[e.TID][fd]
		if b != nil && b.waited > 0 {
			// A wait (poll…) came after the writes and its read did not
			// cross over: the request ended there.
			n.close(e, fd, b, nil)
			n.dropBurst(e.TID, fd)
			b = nil
		}
		if b == nil {
			if b = n.newBurst(e.TID, fd); b == nil {
				return
			}
			b.first = e.Time
		}
		if name != "write" && name != "writev" {
			if c := n.conn(e.PID, fd, e.Comm); c != nil {
				c.socket = true
			}
		}
		b.writes++
		b.last, b.lastBytes = e.Time+s.Latency, s.Ret
		b.bytes += s.Ret
		if len(b.names) < 4 {
			b.names = append(b.names, name)
			b.calls = append(b.calls, *s)
		}
		n.cur[e.TID] = fd
	case "read", "readv", "recv", "recvfrom", "recvmsg":
		if s.Ret < 0 && !interrupted(s.Ret) {
			return
		}
		b := n.bursts[e.TID][fd]
		if b != nil || s.Latency >= nagleWaitMin {
			// Where the read slept names what it read: a TCP socket's
			// receive queue, another socket's, a terminal's.
			tcp, other := false, false
			for i := range s.Sleeps {
				tcp = tcp || hasFrame(s.Sleeps[i].Stack, tcpReadFrames)
				other = other || len(s.Sleeps[i].Stack) > 0 && !hasFrame(s.Sleeps[i].Stack, tcpReadFrames) && !preempted(&s.Sleeps[i])
			}
			if c := n.conn(e.PID, fd, e.Comm); c != nil {
				c.socket = c.socket || tcp || name != "read" && name != "readv"
				c.notTCP = c.notTCP || other && !tcp
			}
		}
		n.dropBurst(e.TID, fd)
		if b == nil {
			b = &nagleBurst{}
		}
		n.close(e, fd, b, s)
	default:
		if !event.Is(name, event.Polls) {
			return
		}
		// poll, select, epoll_wait: the descriptor is in memory the call
		// did not copy; the wait is the thread's last written socket's.
		// One that timed out (0) or failed was not ended by a reply.
		fd, ok := n.cur[e.TID]
		if !ok || s.Ret <= 0 {
			return
		}
		b := n.bursts[e.TID][fd]
		if b != nil && b.waited > 0 {
			// The read after the last wait did not cross over.
			n.close(e, fd, b, nil)
			n.dropBurst(e.TID, fd)
			b = nil
		}
		if b == nil {
			// Sampled, the writes before the wait may not have crossed over.
			if b = n.newBurst(e.TID, fd); b == nil {
				return
			}
		}
		b.waited += s.Latency - min(queued(s), s.Latency)
		b.waitName, b.waitCall = name, *s
	}
}

// newBurst starts a thread's writes on fd; nil when nagleConnsMax are
// followed already.
func (n *nagle) newBurst(tid, fd uint32) *nagleBurst {
	if n.nBursts >= nagleConnsMax {
		return nil
	}
	m := n.bursts[tid]
	if m == nil {
		m = map[uint32]*nagleBurst{}
		n.bursts[tid] = m
	}
	b := &nagleBurst{}
	m[fd] = b
	n.nBursts++
	return b
}

func (n *nagle) dropBurst(tid, fd uint32) {
	m := n.bursts[tid]
	if _, ok := m[fd]; !ok {
		return
	}
	delete(m, fd)
	n.nBursts--
	if len(m) == 0 {
		delete(n.bursts, tid)
	}
}

// forget lets go of ended processes and threads (Doctor.forget): their
// sockets are closed, so they are retired as a close retires one, and
// what they stalled stays for the report.
func (n *nagle) forget(pids, tids map[uint32]bool) {
	for k := range n.conns {
		if pids[k.pid] {
			n.retire(k)
		}
	}
	for tid := range tids {
		n.nBursts -= len(n.bursts[tid])
		delete(n.bursts, tid)
		delete(n.cur, tid)
	}
}

// retire ends a connection: its descriptor is closed, and may be reused.
func (n *nagle) retire(k nagleKey) {
	if c := n.conns[k]; c != nil && c.stalls > 0 && len(n.closed) < nagleConnsMax {
		n.closed = append(n.closed, c)
	}
	delete(n.conns, k)
}

// close ends a request on fd: the writes b, and the read s that took the
// reply (nil when it did not cross over and a wait stood for it).
func (n *nagle) close(e *event.Event, fd uint32, b *nagleBurst, s *event.Syscall) {
	wait, readName := b.waited, b.waitName
	if s != nil {
		wait += s.Latency - min(queued(s), s.Latency)
		readName = event.SyscallName(n.arch, s.Nr)
		if b.waitName != "" {
			readName = b.waitName + "+" + readName
		}
	}
	stalled := wait >= nagleWaitMin && wait <= nagleWaitMax
	if b.writes == 0 && !stalled {
		return
	}
	c := n.conn(e.PID, fd, e.Comm)
	if c == nil || c.fixed != "" {
		return
	}
	c.requests++
	split := b.writes >= 2 && b.last-b.first < nagleWaitMin && b.lastBytes < nagleSmall && b.bytes-b.lastBytes < 2*nagleSmall
	if split {
		c.split++
		for _, w := range b.names {
			if c.writes == nil {
				c.writes = map[string]uint64{}
			}
			c.writes[w]++
		}
	}
	if !stalled {
		return
	}
	c.stalls++
	c.waited += wait
	if n.waitsKept < nagleWaitsKept {
		c.waits = append(c.waits, wait)
		n.waitsKept++
	}
	if c.reads == nil {
		c.reads = map[string]uint64{}
	}
	c.reads[readName]++
	if split {
		c.splitSlow++
		if c.example == nil && s != nil {
			for i := range b.calls {
				c.example = append(c.example, event.FormatSyscall(n.arch, &b.calls[i]))
			}
			if b.waitName != "" {
				c.example = append(c.example, event.FormatSyscall(n.arch, &b.waitCall)+" <"+units.Duration(b.waitCall.Latency)+">")
			}
			c.example = append(c.example, event.FormatSyscall(n.arch, s)+" <"+units.Duration(s.Latency)+">")
		}
	}
}

// naglePeer is the finding's group: the connections to one peer.
type naglePeer struct {
	peer                            string
	procs                           map[uint32]string
	requests, split, stalls, waited uint64
	waits                           []uint64
	writes, reads                   map[string]uint64
	example                         []string
	byPID                           map[uint32]uint64
}

func (n *nagle) Findings(env *Env) []Finding {
	n.closest = nil
	groups := map[string]*naglePeer{}
	conns := slices.Clone(n.closed)
	open := map[*nagleConn]bool{}
	for _, c := range n.conns {
		conns = append(conns, c)
		open[c] = true
	}
	sort.SliceStable(conns, func(i, j int) bool {
		return conns[i].pid < conns[j].pid || conns[i].pid == conns[j].pid && conns[i].fd < conns[j].fd
	})
	var kept []*nagleConn
	stalledByPID := map[uint32]uint64{}
	for _, c := range conns {
		// Seen whole, the stalls must be split requests; sampled, the
		// fast writes mostly did not cross over, so the connection must
		// have shown the split at least once and its replies wait in the
		// band as a rule.
		stalls := c.splitSlow
		if n.sampled && c.split > 0 {
			stalls = c.stalls
		}
		if stalls < nagleRepeat {
			n.miss(c, float64(stalls)/nagleRepeat, fmt.Sprintf("%d of them after a request seen written in small writes in a row; "+
				"nagle-delayed-ack reports from %d", stalls, nagleRepeat))
			continue
		}
		if share := float64(c.stalls) / float64(c.requests); share < nagleShare {
			n.miss(c, share/nagleShare, fmt.Sprintf("%.0f%% of the requests; nagle-delayed-ack reports when half or more of a connection's replies wait so long", 100*share))
			continue
		}
		stalledByPID[c.pid] += c.stalls
		kept = append(kept, c)
	}
	for _, c := range kept {
		// Sampled, the kernel's count must leave two writes for every
		// stalled request: a process that made fewer wrote some of them
		// in one call, and its waits are the server's. One request may
		// have been written before sysray attached.
		if w, ok := n.writeCalls[c.pid]; ok {
			stalled := stalledByPID[c.pid]
			if w+2 < 2*stalled {
				continue
			}
			// And the share: the process made at most w/2 split
			// requests, the events having seen only a sample of the
			// fast ones.
			if share := float64(stalled) / max(float64(w)/2, float64(stalled)); share < nagleShare {
				n.miss(c, share/nagleShare, fmt.Sprintf("%d replies that waited against %d writes the kernel counted in %s[%d] (%.0f%% of the requests it could have written in two); "+
					"nagle-delayed-ack reports when half or more of a connection's replies wait so long", stalled, w, c.comm, c.pid, 100*share))
				continue
			}
		}
		// Nagle's algorithm is TCP's: a descriptor not known to be a
		// socket (a terminal a program writes to and reads from) is one
		// only if /proc says so, and a unix or UDP socket is none.
		if c.notTCP {
			continue
		}
		if c.peer == "" && env.Host.canRead() {
			if c.peer, c.accepted = tcpPeer(c.pid, int(c.fd)); c.peer != "" {
				c.socket = true
			}
		}
		// A server that answers in two writes and then reads waits for the
		// client's next request, however long the client takes: its waits
		// say nothing about a timer. Nagle's hold of the answer shows as
		// the client's wait.
		if !c.socket || c.accepted {
			continue
		}
		// An option set before sysray started has no setsockopt in the
		// events; live, the socket says (while it is open: a closed one's
		// number may be another's now). Its replies that waited are then
		// the server's time, not a timer's.
		if c.fixed == "" && open[c] && env.Host.canRead() {
			if opt, _ := tcpHoldOff(c.pid, int(c.fd)); opt != "" {
				n.miss(c, 0, fmt.Sprintf("the socket has %s set (read from the socket: set before sysray started), so Nagle's algorithm holds nothing back; "+
					"its replies that waited are the server's time", opt))
				continue
			}
		}
		peer := c.peer
		if peer == "" {
			peer = "an unknown peer"
		}
		g := groups[peer]
		if g == nil {
			g = &naglePeer{peer: peer, procs: map[uint32]string{}, writes: map[string]uint64{}, reads: map[string]uint64{}, byPID: map[uint32]uint64{}}
			groups[peer] = g
		}
		g.procs[c.pid] = c.comm
		g.requests += c.requests
		g.split += c.split
		g.stalls += c.stalls
		g.waited += c.waited
		g.byPID[c.pid] += c.waited
		g.waits = append(g.waits, c.waits...)
		for w, x := range c.writes {
			g.writes[w] += x
		}
		for r, x := range c.reads {
			g.reads[r] += x
		}
		if g.example == nil {
			g.example = c.example
		}
	}
	threadNS, _ := env.threadTime()
	var out []Finding
	peers := make([]string, 0, len(groups))
	for p := range groups {
		peers = append(peers, p)
	}
	sort.Strings(peers)
	for _, peer := range peers {
		g := groups[peer]
		sev, share := Info, 0.0
		for pid, w := range g.byPID {
			if t := threadNS[pid]; t > 0 {
				share = max(share, float64(w)/float64(t))
			}
		}
		if share >= warnShare && g.waited >= warnWaitNS {
			sev = Warning
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
		med := medianU(g.waits)
		writes, reads := byValue(g.writes), byValue(g.reads)
		seen := "Every call was seen."
		if n.sampled {
			seen = fmt.Sprintf("The kernel sent only a sample of the fast calls; requests seen whole, each written in two or more small writes: %d.", g.split)
		}
		if env.Host.Live && env.Host.slowBar() > nagleWaitMin {
			seen += fmt.Sprintf(" Replies that waited less than the slow bar (%s) were not seen.", units.Duration(env.Host.slowBar()))
		}
		count := fmt.Sprintf("%d", g.stalls)
		if env.Host.Live && env.Host.slowBar() > nagleWaitMin {
			count = fmt.Sprintf("at least %d", g.stalls)
		}
		f := Finding{
			ID:       NagleDelayedAck,
			Key:      keyOf(peer),
			Procs:    env.refs(pidsOf(g.procs)...),
			Syscalls: nagleSyscalls(writes, reads),
			Severity: sev,
			Title: fmt.Sprintf("%s requests to %s waited %s each for a delayed ACK (Nagle's algorithm held the request's last write)",
				count, peer, units.Duration(med)),
			Summary: fmt.Sprintf("%s wrote each request to %s in small writes one after another (%s) and then waited for the reply (%s). "+
				"The socket does not set TCP_NODELAY, so Nagle's algorithm kept the second write back until the first was acknowledged, "+
				"and the peer, waiting for the rest of the request, acknowledged it only when its delayed-ACK timer fired "+
				"(40 ms at least on Linux, up to 200 ms). %s of %d requests waited for their reply as long as that timer (%s to %s), median %s; "+
				"that is %s in all, which bounds the time lost from above (the reply itself takes a round trip). %s",
				who, peer, strings.Join(writes, ", "), strings.Join(reads, ", "),
				count, g.requests, units.Duration(nagleWaitMin), units.Duration(nagleWaitMax), units.Duration(med),
				units.Duration(g.waited), seen),
			Evidence: map[string]any{"peer": peer, "processes": procs, "requests": g.requests, "requests_stalled": g.stalls,
				"requests_split_seen": g.split, "stalled_ns": g.waited, "stalled_ns_is": "an upper bound on the time lost",
				"median_wait_ns": med, "write_calls": writes, "read_calls": reads,
				"share_of_thread_time": share, "sampled": n.sampled, "wait_band_ns": []uint64{nagleWaitMin, nagleWaitMax}},
			Fix: "Set TCP_NODELAY on the socket (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one)), or write each request " +
				"in one call: build it in one buffer, use writev/sendmsg with the header and body as separate iovecs, or send the " +
				"first part with MSG_MORE (or set TCP_CORK around the writes and clear it after the last).",
			Score: float64(g.waited),
		}
		if g.example != nil {
			f.Evidence["example"] = g.example
		}
		out = append(out, f)
	}
	return out
}

// nagleSyscalls names the finding's syscalls: the writes, then the waits
// and reads ("poll+read" is a poll and a read), each once.
func nagleSyscalls(writes, reads []string) []string {
	var out []string
	for _, r := range append(slices.Clone(writes), reads...) {
		for _, name := range strings.Split(r, "+") {
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}
