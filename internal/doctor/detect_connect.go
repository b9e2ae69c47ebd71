package doctor

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
	"github.com/sysray/sysray/internal/units"
)

// The finding it reports: a TCP connect that waited out the kernel's SYN
// retransmission timer, once or more, because its SYN (or the SYN-ACK)
// was lost: the "why do some requests take exactly 1 or 3 seconds?"
// incident.
const ConnectRetransmit ID = "connect-retransmit"

func init() {
	register(registration{ids: []ID{ConnectRetransmit},
		build: func(h *Host) Detector { return newConnRetx(h) }})
}

// Thresholds and constants. See docs/detectors/connect-retransmit.md.
const (
	// crRTO: TCP_TIMEOUT_INIT, the SYN's first retransmission timeout
	// (RFC 6298's 1 s). A connect that waited less lost no SYN.
	crRTO = 1_000_000_000
	// crEarly: a connect starts before its first SYN leaves and the
	// timers never fire early, so a wait shorter than a backoff sum by
	// more than the clocks' difference (a poll starts microseconds after
	// its connect) did not wait it out.
	crEarly = 10_000_000
	// crLateShare and crLate: the retransmit timer is a timer-wheel
	// timer, which the kernel rounds up to its level's granularity (an
	// eighth of the timeout at most: 32 ms of 1 s at HZ=250), and each
	// retransmission is timed from the last; then the round trip and the
	// wake-up. The scenario's 1 s connects took 1,008-1,024 ms, its 5 s
	// ones 5,128 ms (2.5% late).
	crLateShare = 0.125
	crLate      = 50_000_000
	// crWarnCount: three connects at a backoff sum are a pattern (the
	// incident is "some requests take 1 s"); one is a lost packet, which
	// any path has now and then.
	crWarnCount = 3
	// crWarnShare: the Internet loses a packet in a thousand or fewer,
	// so about that share of connects waits 1 s as a matter of course;
	// ten times that is a cause worth finding.
	crWarnShare = 0.01
	// crWarnTime: two waits that are a quarter of a process's thread
	// time are most of what it did, as for the other waits.
	crWarnTime = 0.25
	// crKept bounds the threads, peers and waits followed.
	crKept = 1 << 14
	// crScans: peers whose listener is looked for across the host's
	// network namespaces (each scan reads every process's ns link).
	crScans = 16
)

// The syn_linear_timeouts sysctl (Linux 6.18, default 4) retransmits
// the first SYNs at the initial timeout's pace; older kernels (and 0)
// double it every time. crSums holds the sums of both schedules, in
// seconds, up to tcp_syn_retries' largest useful value: a connect that
// lost n SYNs waited one of them.
var crSums = func() []uint64 {
	seen := map[uint64]bool{}
	for _, linear := range []int{0, 4} {
		var sum, rto uint64 = 0, 1
		for n := 0; n < 8; n++ {
			sum += rto
			seen[sum] = true
			if n >= linear {
				rto *= 2
			}
		}
	}
	var out []uint64
	for s := range seen {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}()

// backoffSum: the sum of retransmission timeouts (seconds) a wait of
// lat ns matches, 0 if none.
func backoffSum(lat uint64) uint64 {
	for _, s := range crSums {
		ns := s * crRTO
		if lat+crEarly >= ns && lat <= ns+uint64(float64(ns)*crLateShare)+crLate {
			return s
		}
	}
	return 0
}

const (
	etimedout    = 110
	econnrefused = 111
	einprogress  = 115
)

// crWaitCalls: where a non-blocking connect's thread waits for the
// socket to become writable.
var crWaitCalls = map[string]bool{"poll": true, "ppoll": true, "select": true, "pselect6": true,
	"epoll_wait": true, "epoll_pwait": true, "epoll_pwait2": true}

type crPending struct {
	pid  uint32
	fd   uint32
	peer string
}

// crPeer is the finding's group: the connects to one peer.
type crPeer struct {
	peer       string
	procs      map[uint32]string
	byPID      map[uint32]uint64 // ns waited
	sums       map[uint64]uint64 // backoff sum (s) → connects
	waits      []uint64
	counted    uint64 // connects that waited at a backoff sum, or timed out
	timedOut   uint64 // of them, ETIMEDOUT
	blocking   uint64 // waited in connect itself
	polled     map[string]uint64
	waited     uint64
	fast       uint64 // connects seen that were not held up
	refused    uint64 // ECONNREFUSED: a RST at once
	example    string
	clientNS   string
	server     *crNS // the namespace holding the peer's listener, found live
	scanned    bool
	serverNote string
}

// crNS is one network namespace's TCP counters, first and last read.
type crNS struct {
	ino         string
	pid         uint32 // a process in it, to read it through
	first, last map[string]uint64
	read        uint64 // event time of the last read
	// held: its snmp and netstat files, open from a held-up connect on.
	// An open /proc/PID/net file holds its namespace, and reads it again
	// from the start, after every process in it has ended: a client that
	// exits at once after its last connect (a cron job, curl) is read at
	// the report as well as one that lives on, however late the doctor
	// is in reading its events.
	held []*os.File
}

// crHeld bounds the namespaces held open (two descriptors each, and the
// namespace's memory until the report): the ones of held-up connects,
// which a trace has a few of; past it they are read through a process.
const crHeld = 64

// hold opens the namespace's counter files through its process, if it is
// still in the namespace.
func (c *connRetx) hold(n *crNS) {
	if n.held != nil || c.held >= crHeld {
		return
	}
	dir := "/proc/" + strconv.FormatUint(uint64(n.pid), 10) + "/net/"
	var files []*os.File
	for _, name := range []string{"snmp", "netstat"} {
		if f, err := os.Open(dir + name); err == nil {
			files = append(files, f)
		}
	}
	// The pid may have gone to a process elsewhere since it was seen.
	if len(files) == 0 || netNSOf(n.pid) != n.ino {
		for _, f := range files {
			f.Close()
		}
		return
	}
	n.held = files
	c.held++
}

// counters reads the namespace's counters: through its held files, or
// through its process.
func (n *crNS) counters() map[string]uint64 {
	if n.held == nil {
		return tcpCounters(n.pid)
	}
	var texts []string
	for _, f := range n.held {
		if b, err := readFrom0(f); err == nil {
			texts = append(texts, string(b))
		}
	}
	return pickCounters(texts)
}

// release closes the held files.
func (c *connRetx) release(n *crNS) {
	for _, f := range n.held {
		f.Close()
	}
	if n.held != nil {
		n.held = nil
		c.held--
	}
}

// readFrom0 reads a proc file whole from its start: a seq file shows its
// lines afresh on each read from offset 0.
func readFrom0(f *os.File) ([]byte, error) {
	var out []byte
	buf := make([]byte, 8192)
	for off := int64(0); ; {
		n, err := f.ReadAt(buf, off)
		out = append(out, buf[:n]...)
		off += int64(n)
		if err == io.EOF || n == 0 {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// crReadGap: a namespace's counters are read again after a connect held
// up at most this often (event time): the processes in it may be gone
// when the report is made, and a host's many slow connects must not
// each cost two file reads.
const crReadGap = 100_000_000

// refresh reads a namespace's counters again, live, after a held-up
// connect: the last read the report's deltas end at.
func (c *connRetx) refresh(n *crNS, now uint64) {
	if n == nil || !c.host.canRead() || n.last != nil && now < n.read+crReadGap {
		return
	}
	c.hold(n)
	if m := n.counters(); m != nil {
		n.last, n.read = m, now
	}
}

type connRetx struct {
	host    *Host
	arch    event.Arch
	pending map[uint32]*crPending // by tid: a connect under way (EINPROGRESS)
	peers   map[string]*crPeer
	nsOf    map[uint32]string // pid → its netns
	ns      map[string]*crNS
	exact   map[uint32]uint64 // the kernel's count of each process's connects
	held    int               // namespaces held open
	scans   int
	kept    int
}

func newConnRetx(h *Host) *connRetx {
	c := &connRetx{host: h, arch: h.Arch, pending: map[uint32]*crPending{}, peers: map[string]*crPeer{},
		nsOf: map[uint32]string{}, ns: map[string]*crNS{}, exact: map[uint32]uint64{}}
	if h.canRead() {
		c.baseline()
	}
	return c
}

// crStartNS bounds the namespaces read when the trace starts: each costs
// two file reads.
const crStartNS = 256

// baseline reads, as the trace starts, the counters of the network
// namespaces the host's processes are in: a process whose trouble began
// before sysray (-p, the whole host) has its deltas from the trace's
// start, not from its first connect seen (events reach the doctor in
// batches, so that read may come as late as the report's). A namespace
// made after the start is read at its first connect seen.
func (c *connRetx) baseline() {
	for ino, pid := range namespaces() {
		// The pid listed may have gone, or its number gone to a process
		// elsewhere, since the list was made.
		if netNSOf(pid) != ino {
			continue
		}
		if m := tcpCounters(pid); m != nil {
			c.ns[ino] = &crNS{ino: ino, pid: pid, first: m}
		}
	}
}

// crListAge is how long a list of the host's network namespaces serves:
// making it walks every process (29 ms on a host of 3,163), and the agent
// builds a doctor for every window (10 s). Namespaces are made far more
// rarely than windows close, and one made since is read at its first
// connect seen, as one made after the start of a trace is.
const crListAge = time.Minute

var nsList struct {
	sync.Mutex
	at   time.Time
	pids map[string]uint32 // netns → a process in it
}

// namespaces lists up to crStartNS network namespaces with a process in
// each, as of at most crListAge ago.
func namespaces() map[string]uint32 {
	nsList.Lock()
	defer nsList.Unlock()
	if nsList.pids != nil && time.Since(nsList.at) < crListAge {
		return nsList.pids
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := map[string]uint32{}
	for _, e := range ents {
		pid, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			continue
		}
		if len(out) >= crStartNS {
			break
		}
		if ino := netNSOf(uint32(pid)); ino != "" {
			if _, ok := out[ino]; !ok {
				out[ino] = uint32(pid)
			}
		}
	}
	nsList.at, nsList.pids = time.Now(), out
	return out
}

func (c *connRetx) group(peer string) *crPeer {
	g := c.peers[peer]
	if g == nil {
		if len(c.peers) >= crKept {
			return nil
		}
		g = &crPeer{peer: peer, procs: map[uint32]string{}, byPID: map[uint32]uint64{}, sums: map[uint64]uint64{},
			polled: map[string]uint64{}}
		c.peers[peer] = g
	}
	return g
}

func (c *connRetx) Observe(e *event.Event) {
	if e.Kind == event.KindExit {
		delete(c.pending, e.TID)
		return
	}
	if e.Kind != event.KindSyscall || e.Syscall.Unfinished {
		return
	}
	s := &e.Syscall
	name := event.SyscallName(c.arch, s.Nr)
	if name == "connect" {
		c.connect(e, s)
		return
	}
	p := c.pending[e.TID]
	if p == nil {
		return
	}
	switch {
	case crWaitCalls[name]:
		// The first wait after the connect is for it: ready after a
		// backoff sum, the SYN was retransmitted until it got through.
		// A wait that timed out (0) is the program's own timer.
		delete(c.pending, e.TID)
		if s.Ret > 0 && backoffSum(s.Latency) > 0 {
			c.waitedOut(e, p.peer, name, s, false)
		} else if s.Ret > 0 {
			if g := c.peers[p.peer]; g != nil {
				g.fast++
			}
		}
	case name == "close" && uint32(s.Args[0]) == p.fd:
		delete(c.pending, e.TID)
	}
}

func (c *connRetx) connect(e *event.Event, s *event.Syscall) {
	delete(c.pending, e.TID)
	peer := sockaddrString(s.Data[1])
	if peer == "" {
		return // a unix socket, or an address not copied
	}
	c.netns(e.PID)
	switch {
	case s.Ret == -einprogress:
		// The listener is looked for only once a connect to the peer is
		// held up: a host's event loops connect to many peers, and each
		// look reads every process's namespace link.
		if len(c.pending) < crKept {
			c.pending[e.TID] = &crPending{pid: e.PID, fd: uint32(s.Args[0]), peer: peer}
		}
	case s.Ret == -etimedout && s.Latency+crEarly >= crRTO:
		c.waitedOut(e, peer, "connect", s, true)
	case s.Ret == 0 && backoffSum(s.Latency) > 0:
		c.waitedOut(e, peer, "connect", s, false)
	case s.Ret == 0:
		if g := c.peers[peer]; g != nil {
			g.fast++
		} else if g := c.group(peer); g != nil {
			g.fast++
		}
	case s.Ret == -econnrefused:
		if g := c.group(peer); g != nil {
			g.refused++
		}
	}
}

// waitedOut counts a connect that waited at a backoff sum (or failed
// after its retries).
func (c *connRetx) waitedOut(e *event.Event, peer, call string, s *event.Syscall, timedOut bool) {
	g := c.group(peer)
	if g == nil {
		return
	}
	g.procs[e.PID] = e.Comm
	g.counted++
	g.waited += s.Latency
	g.byPID[e.PID] += s.Latency
	if timedOut {
		g.timedOut++
	} else {
		g.sums[backoffSum(s.Latency)]++
	}
	if call == "connect" {
		g.blocking++
	} else {
		g.polled[call]++
	}
	if c.kept < crKept {
		g.waits = append(g.waits, s.Latency)
		c.kept++
	}
	if g.example == "" {
		g.example = event.FormatSyscall(c.arch, s) + " <" + units.Duration(s.Latency) + ">"
	}
	if g.clientNS == "" {
		g.clientNS = c.nsOf[e.PID]
	}
	c.scan(g, e.PID)
	c.refresh(c.ns[g.clientNS], e.Time)
	c.refresh(g.server, e.Time)
}

// netns reads, live, a process's network namespace and its TCP counters,
// the first time one of its connects is seen: the baseline the report's
// deltas start from.
func (c *connRetx) netns(pid uint32) {
	if _, ok := c.nsOf[pid]; ok || len(c.nsOf) >= crKept || !c.host.canRead() {
		return
	}
	ino := netNSOf(pid)
	c.nsOf[pid] = ino
	if n := c.ns[ino]; n != nil {
		n.pid = pid // read it through the client from now on
	} else if ino != "" && len(c.ns) < crKept {
		c.ns[ino] = &crNS{ino: ino, pid: pid, first: tcpCounters(pid)}
	}
}

// scan looks, live, for the namespace whose listener the peer is: a
// server on this host, whose accept queue the kernel counts overflows of
// in that namespace.
func (c *connRetx) scan(g *crPeer, pid uint32) {
	if g.scanned || c.scans >= crScans || !c.host.canRead() {
		return
	}
	g.scanned = true
	c.scans++
	spid, ino := listenerNS(g.peer)
	if ino == "" {
		g.serverNote = "no listener on " + g.peer + " in any network namespace of this host"
		return
	}
	n := c.ns[ino]
	if n == nil {
		n = &crNS{ino: ino, pid: spid, first: tcpCounters(spid)}
		c.ns[ino] = n
	} else if c.nsOf[pid] != ino {
		n.pid = spid
	}
	g.server = n
}

func (c *connRetx) counts(cells []stat.Cell) {
	for _, cell := range cells {
		if event.SyscallName(c.arch, cell.Nr) == "connect" {
			c.exact[cell.PID] += cell.Count
		}
	}
}

func (c *connRetx) forget(pids, tids map[uint32]bool) {
	for tid := range tids {
		delete(c.pending, tid)
	}
	for pid := range pids {
		delete(c.nsOf, pid)
	}
}

// crCounters are the TCP counters read: Tcp's from /proc/PID/net/snmp,
// TcpExt's from /proc/PID/net/netstat.
var crCounters = []string{"RetransSegs", "TCPSynRetrans", "ListenOverflows", "ListenDrops"}

// tcpCounters reads the counters of a live process's network namespace.
func tcpCounters(pid uint32) map[string]uint64 {
	dir := "/proc/" + strconv.FormatUint(uint64(pid), 10) + "/net/"
	var texts []string
	for _, name := range []string{"snmp", "netstat"} {
		if b, err := os.ReadFile(dir + name); err == nil {
			texts = append(texts, string(b))
		}
	}
	return pickCounters(texts)
}

// pickCounters takes crCounters from the texts of snmp and netstat.
func pickCounters(texts []string) map[string]uint64 {
	out := map[string]uint64{}
	for _, text := range texts {
		for _, prefix := range []string{"Tcp:", "TcpExt:"} {
			for k, v := range parseSNMP(text, prefix) {
				for _, want := range crCounters {
					if k == want {
						out[k] = v
					}
				}
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// parseSNMP reads /proc/net/snmp's and netstat's form: a line of names
// and a line of values, both starting with prefix.
func parseSNMP(text, prefix string) map[string]uint64 {
	out := map[string]uint64{}
	var names []string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != prefix {
			continue
		}
		if names == nil {
			names = f[1:]
			continue
		}
		for i, v := range f[1:] {
			if i < len(names) {
				if n, err := strconv.ParseUint(v, 10, 64); err == nil {
					out[names[i]] = n
				}
			}
		}
		names = nil
	}
	return out
}

// listenerNS finds the network namespace, among those of the host's
// processes, that has a TCP socket listening on peer (its address or
// the wildcard, its port), and a process in it: "" when none does.
func listenerNS(peer string) (uint32, string) {
	i := strings.LastIndex(peer, ":")
	if i < 0 {
		return 0, ""
	}
	addr, port := strings.Trim(peer[:i], "[]"), peer[i+1:]
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, ""
	}
	done := map[string]bool{}
	for _, e := range ents {
		pid, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			continue
		}
		ino := netNSOf(uint32(pid))
		if ino == "" || done[ino] {
			continue
		}
		done[ino] = true
		found := false
		for _, t := range []string{"tcp", "tcp6"} {
			scanTable("/proc/"+e.Name()+"/net/"+t, func(fs []string) {
				if found || len(fs) < 4 || fs[3] != "0A" {
					return
				}
				local := hexAddr(fs[1])
				j := strings.LastIndex(local, ":")
				if j < 0 || local[j+1:] != port {
					return
				}
				la := strings.Trim(local[:j], "[]")
				found = la == addr || isAnyAddr(fs[1])
			})
		}
		if found {
			return uint32(pid), ino
		}
	}
	return 0, ""
}

// delta: how much a counter grew between a namespace's reads; ok false
// when it was not read twice.
func (n *crNS) delta(k string) (uint64, bool) {
	if n == nil || n.first == nil || n.last == nil {
		return 0, false
	}
	a, ok1 := n.first[k]
	b, ok2 := n.last[k]
	if !ok1 || !ok2 || b < a {
		return 0, false
	}
	return b - a, true
}

func (n *crNS) evidence() map[string]any {
	ev := map[string]any{"netns": n.ino}
	grew := map[string]uint64{}
	for _, k := range crCounters {
		if d, ok := n.delta(k); ok {
			grew[k] = d
		}
	}
	if len(grew) > 0 {
		ev["grew_over_trace"] = grew
	}
	if n.last != nil {
		ev["at_end"] = n.last
	}
	return ev
}

func (c *connRetx) Findings(env *Env) []Finding {
	threadNS, _ := env.threadTime()
	if env.Host.Live && c.host.canRead() {
		for _, n := range c.ns {
			if m := n.counters(); m != nil {
				n.last = m
			}
			c.release(n)
		}
	}
	var out []Finding
	for _, g := range c.peers {
		if g.counted == 0 {
			continue
		}
		out = append(out, c.finding(env, g, threadNS))
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Score > out[j].Score || out[i].Score == out[j].Score && out[i].Key < out[j].Key
	})
	return out
}

func (c *connRetx) finding(env *Env, g *crPeer, threadNS map[uint32]uint64) Finding {
	var procs []string
	for pid, comm := range g.procs {
		procs = append(procs, env.ProcName(pid, comm))
	}
	sort.Strings(procs)
	who := strings.Join(procs, ", ")
	if len(procs) > 1 {
		who = fmt.Sprintf("%d processes (%s)", len(procs), who)
	}
	share := 0.0
	for pid, w := range g.byPID {
		if t := threadNS[pid]; t > 0 {
			share = max(share, float64(w)/float64(t))
		}
	}
	// Connects made: those seen, or the kernel's count of the processes'
	// connects (to every peer: a share of it is a lower bound).
	var exact uint64
	for pid := range g.procs {
		exact += c.exact[pid]
	}
	made := max(g.counted+g.fast+g.refused, exact)
	madeIs := "seen"
	if exact > g.counted+g.fast+g.refused {
		madeIs = "the kernel's count of these processes' connect calls, to any peer"
	}
	connShare := float64(g.counted) / float64(max(made, 1))
	sev := Info
	why := fmt.Sprintf("%d connect(s) held up: fewer than %d, or under %.0f%% of the connects made, and under %.0f%% of a process's thread time",
		g.counted, crWarnCount, 100*crWarnShare, 100*crWarnTime)
	switch {
	case g.counted >= crWarnCount && connShare >= crWarnShare:
		sev = Warning
		why = fmt.Sprintf("%d connects held up (%d or more), %.1f%% of the connects made (%.0f%% or more)", g.counted, crWarnCount, 100*connShare, 100*crWarnShare)
	case g.counted >= 2 && share >= crWarnTime:
		sev = Warning
		why = fmt.Sprintf("the waits are %.0f%% of a process's thread time (%.0f%% or more)", 100*share, 100*crWarnTime)
	}
	var sums []uint64
	for s := range g.sums {
		sums = append(sums, s)
	}
	sort.Slice(sums, func(i, j int) bool { return sums[i] < sums[j] })
	var at []string
	bySum := map[string]uint64{}
	for _, s := range sums {
		at = append(at, fmt.Sprintf("%d at ≈%d s", g.sums[s], s))
		bySum[strconv.FormatUint(s, 10)] = g.sums[s]
	}
	if g.timedOut > 0 {
		at = append(at, fmt.Sprintf("%d failed with ETIMEDOUT after every retry", g.timedOut))
	}
	var calls []string
	if g.blocking > 0 {
		calls = append(calls, fmt.Sprintf("%d in a blocking connect", g.blocking))
	}
	polled := byValue(g.polled)
	for _, p := range polled {
		calls = append(calls, fmt.Sprintf("%d in the %s after a non-blocking connect (EINPROGRESS)", g.polled[p], p))
	}
	med := medianU(g.waits)
	ev := map[string]any{"peer": g.peer, "processes": procs, "connects_held_up": g.counted, "by_backoff_sum_s": bySum,
		"timed_out": g.timedOut, "waited_ns": g.waited, "median_wait_ns": med, "blocking_connects": g.blocking,
		"wait_calls": g.polled, "connects_made": made, "connects_made_are": madeIs, "fast_connects_seen": g.fast,
		"refused_seen": g.refused, "share_of_thread_time": share, "severity_because": why}
	if g.example != "" {
		ev["example"] = g.example
	}
	ev["initial_rto_ns"], ev["backoff_sums_seen_s"] = uint64(crRTO), sums
	count := strconv.FormatUint(g.counted, 10)
	if env.Host.Live && env.Host.slowBar() > crRTO {
		count = "at least " + count
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s connect(s) to %s waited out the kernel's SYN retransmission timer (%s; %s), median %s, %s in all. "+
		"A SYN or its SYN-ACK was lost and the kernel resent the SYN after 1 s (TCP_TIMEOUT_INIT), then by tcp_syn_linear_timeouts "+
		"and tcp_syn_retries: a connect that lost n SYNs takes the sum of n timeouts, and fails with ETIMEDOUT when every retry is lost. ",
		who, count, g.peer, strings.Join(at, ", "), strings.Join(calls, ", "), units.Duration(med), units.Duration(g.waited))
	cause, fix := c.cause(env, g, ev, &b)
	ev["cause"] = cause
	title := fmt.Sprintf("%s connect(s) to %s took a SYN retransmission timeout (%s), %s lost", count, g.peer,
		strings.Join(at, ", "), units.Duration(g.waited))
	return Finding{
		ID:       ConnectRetransmit,
		Key:      keyOf(g.peer),
		Procs:    env.refs(pidsOf(g.procs)...),
		Syscalls: append([]string{"connect"}, polled...),
		Severity: sev,
		Title:    title,
		Summary:  strings.TrimSpace(b.String()),
		Evidence: ev,
		Fix:      fix,
		Score:    float64(g.waited),
	}
}

// cause tells apart, from the kernel's counters read live, a full accept
// queue on this host from SYNs lost on the way, and says what a capture
// cannot know.
func (c *connRetx) cause(env *Env, g *crPeer, ev map[string]any, b *strings.Builder) (string, string) {
	client := c.ns[g.clientNS]
	server := g.server
	if client != nil {
		ev["client_netns"] = client.evidence()
	}
	if server != nil {
		ev["server_netns"] = server.evidence()
	}
	clientFix := "In the client, bound the cost meanwhile: a connect timeout of a few hundred milliseconds with a retry " +
		"(or TCP_SYNCNT / net.ipv4.tcp_syn_retries lowered) fails over sooner than the kernel's 1 s, 2 s ... schedule."
	queueFix := "The server's accept queue is full: raise its listen backlog (the listen() argument, capped by " +
		"net.core.somaxconn) and accept faster (more acceptor threads, less work before accept). " +
		"`ss -ltn` shows Recv-Q (queued) against Send-Q (the backlog); `nstat -az TcpExtListenOverflows` counts the drops. "
	pathFix := "SYNs are dropped on the way: find the rule or device that drops them without a RST (`nft list ruleset`, " +
		"`iptables -L -v -n` counters on the server and on firewalls between; conntrack tables full: `conntrack -S`; " +
		"a SYN flood limit), or the loss on the path (`mtr`, interface drops). "
	if !env.Host.Live {
		b.WriteString("Why the SYNs were lost cannot be known from a capture: the kernel's counters that tell a full accept " +
			"queue (ListenOverflows, ListenDrops in the server's namespace) from SYNs dropped on the way (TCPSynRetrans " +
			"without them) are read live only. Run `sysray doctor` live, or `nstat -az` on both hosts.")
		return "unknown from a capture", queueFix + pathFix + clientFix
	}
	overflows, ok1 := server.delta("ListenOverflows")
	drops, ok2 := server.delta("ListenDrops")
	synRetx, ok3 := client.delta("TCPSynRetrans")
	switch {
	case (ok1 || ok2) && overflows+drops > 0:
		fmt.Fprintf(b, "Its listener is on this host (network namespace %s), and there ListenOverflows grew by %d and ListenDrops by %d between the doctor's reads "+
			"(while traced): its accept queue was full, and the kernel dropped the SYNs it could not queue.", server.ino, overflows, drops)
		return "accept queue full", queueFix + clientFix
	case ok3 && synRetx > 0:
		fmt.Fprintf(b, "TCPSynRetrans grew by %d in the client's network namespace between the doctor's first and last reads of it", synRetx)
		if server != nil && ok1 {
			fmt.Fprintf(b, ", and the listener's namespace on this host (%s) counted no accept-queue overflow: ", server.ino)
		} else {
			fmt.Fprintf(b, "; %s, so no accept-queue overflow was seen: ", orStr(g.serverNote, "the listener's namespace was not read"))
		}
		b.WriteString("the SYNs (or the SYN-ACKs) were dropped on the way, by a rule that drops without a RST or by loss, not refused.")
		return "SYNs dropped on the way", pathFix + clientFix
	default:
		b.WriteString("The kernel's counters did not say why: ")
		if client == nil {
			b.WriteString("the client's network namespace could not be read (the process had ended, or reads would stall).")
		} else {
			b.WriteString("they were read once only, or did not grow between the reads (the waits came before the first).")
		}
		return "not shown", queueFix + pathFix + clientFix
	}
}

func orStr(s, def string) string {
	if s != "" {
		return s
	}
	return def
}
