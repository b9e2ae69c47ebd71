package doctor

import (
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/stat"
	"github.com/sysray/sysray/internal/units"
)

// The finding it reports.
const PortInUse ID = "port-in-use"

func init() {
	register(registration{ids: []ID{PortInUse},
		build: func(h *Host) Detector { return newAddrInUse(h) }})
}

// addrInUse answers "Address already in use: who holds it?". bind fails
// with EADDRINUSE when a socket of the same network namespace holds the
// local port it names: another listener (or a socket bound to the port
// with SO_REUSEADDR on one side only), or, for a server restarted without
// SO_REUSEADDR, the connections its previous run closed first, which sit in
// TIME_WAIT for 60 s on the server's port (FIN_WAIT and the like while the
// peer has not closed). listen fails the same way when two sockets bound
// the port with SO_REUSEADDR and the other listened first. The port that
// failed is in bind's address; for listen, it is the socket's own (the
// process's earlier bind of that descriptor, or, live, getsockname on a
// copy of it).
//
// Who holds the port is read live, at a process's first failure on it,
// from the tables of the failing process's own network namespace
// (/proc/PID/net/tcp and tcp6), and each listener's process from the
// socket inodes in /proc/*/fd of that namespace's processes. A capture
// holds calls, not the kernel's tables: from one the detector names the
// processes the capture saw bind the port, and says that it inferred them.
//
// A port taken is trouble by what the program did next: it gave up (exited
// soon after), or it kept retrying the same address. A program that tried
// a port once and bound another is probing, which is benign.
type addrInUse struct {
	arch event.Arch
	// read reads the namespace's sockets on a port (nil offline; tests
	// replace it); sockname reads a live socket's bound address.
	read     func(pid uint32, port uint16) *inUseFacts
	sockname func(pid uint32, fd int) string
	procs    map[uint32]*inUseProc
	// bound is each process's descriptors' bound addresses, from its
	// successful binds (every one in a capture, a sample live).
	bound map[uint32]map[uint64]string
	// binders is, by port, the processes seen bind it, for a capture's
	// inference.
	binders map[uint16][]inUseBinder
	exits   map[uint32]inUseExit
	// accepted counts each process's accepted connections (a capture's
	// inference: an earlier run's connections are what TIME_WAIT holds).
	accepted map[uint32]uint64
	reads    int
}

type inUseBinder struct {
	pid  uint32
	comm string
	at   uint64
}

type inUseExit struct {
	at   uint64
	code int
	sig  int
}

type inUseProc struct {
	comm  string
	addrs map[string]*inUseAddr
	exact uint64 // the kernel's count of bind and listen EADDRINUSE
	last  uint64 // its last failure
	// After its last failure: a successful bind of another address, or of
	// a failed one (seen only among the calls recorded).
	movedTo string
	gotIt   bool
}

type inUseAddr struct {
	addr        string // "127.0.0.1:8080"; ":8080"-less when listen's socket was not read
	port        uint16
	fails       uint64
	calls       map[string]uint64
	first, last uint64
	example     string
	facts       *inUseFacts
}

// inUseFacts is what the failing process's network namespace held on the
// port at its first failure there.
type inUseFacts struct {
	NetNS   string // the failing process's, "net:[N]"
	HostNS  bool   // the same as the doctor's own
	Listen  []inUseHolder
	States  map[int]int // sockets on the port that do not listen, by state
	Orphans int         // listeners no process of the namespace holds a descriptor on
	Err     string
}

type inUseHolder struct {
	PID   uint32
	Comm  string
	Local string
}

// Thresholds. See docs/detectors/port-in-use.md.
const (
	// A program that gives up on a port it cannot bind exits from its
	// error path at once; 2 s holds that path's flush and cleanup on a
	// loaded host. An exit later than that followed other work, and is
	// not taken for giving up.
	inUseGiveUp = 2e9
	// A second failure on the same address is a retry by definition; a
	// program that handles a taken port moves to another after the first.
	inUseRetries = 2
	// (process, port) pairs whose namespace is read at the first failure,
	// at most: each read scans the namespace's processes' descriptors.
	inUseReads = 16
	// TIME_WAIT's length in Linux (TCP_TIMEWAIT_LEN): how long a closed
	// connection of a previous run can hold the port.
	inUseTimeWait = 60e9
	// The last binds of each port kept for a capture's inference: the
	// holder is among the latest binders; a host that binds one port over
	// and over (a restarting service) would otherwise grow without end.
	inUseBinders = 16
)

const eaddrinuse = 98

func newAddrInUse(h *Host) *addrInUse {
	x := &addrInUse{arch: h.Arch, procs: map[uint32]*inUseProc{}, bound: map[uint32]map[uint64]string{},
		binders: map[uint16][]inUseBinder{}, exits: map[uint32]inUseExit{}, accepted: map[uint32]uint64{}}
	if h.Live {
		x.read = func(pid uint32, port uint16) *inUseFacts {
			if !h.canRead() {
				return nil
			}
			return readInUse(pid, port)
		}
		x.sockname = func(pid uint32, fd int) string {
			if !h.canRead() {
				return ""
			}
			return boundAddr(pid, fd)
		}
	}
	return x
}

func (x *addrInUse) Observe(e *event.Event) {
	if e.Kind == event.KindExit && e.Proc.GroupDead && (x.procs[e.PID] != nil || x.bound[e.PID] != nil) {
		code, sig, _ := e.Proc.Status()
		x.exits[e.PID] = inUseExit{at: e.Time, code: code, sig: sig}
		return
	}
	if e.Kind != event.KindSyscall {
		return
	}
	s := &e.Syscall
	if s.Unfinished || s.Refused {
		return
	}
	name := event.SyscallName(x.arch, s.Nr)
	if (name == "accept" || name == "accept4") && !s.Failed() && x.bound[e.PID] != nil {
		x.accepted[e.PID]++
		return
	}
	if name != "bind" && name != "listen" {
		return
	}
	fd := s.Args[0]
	if !s.Failed() {
		if name != "bind" {
			return
		}
		a := sockaddrString(s.Data[1])
		if a == "" {
			return
		}
		if x.bound[e.PID] == nil {
			x.bound[e.PID] = map[uint64]string{}
		}
		x.bound[e.PID][fd] = a
		port := addrPort(a)
		if port != 0 {
			bs := append(x.binders[port], inUseBinder{pid: e.PID, comm: e.Comm, at: e.Time})
			if len(bs) > inUseBinders {
				bs = bs[len(bs)-inUseBinders:]
			}
			x.binders[port] = bs
		}
		if p := x.procs[e.PID]; p != nil && e.Time >= p.last {
			if _, failed := p.addrs[a]; failed {
				p.gotIt = true
			} else if port != 0 {
				p.movedTo = a
			}
		}
		return
	}
	if s.Ret != -eaddrinuse {
		return
	}
	a := ""
	if name == "bind" {
		a = sockaddrString(s.Data[1])
	} else if a = x.bound[e.PID][fd]; a == "" && x.sockname != nil {
		a = x.sockname(e.PID, int(fd))
	}
	port := addrPort(a)
	if a != "" && port == 0 {
		// Port 0 asks for any free port: its EADDRINUSE is the local
		// port range exhausted, not a port someone holds.
		return
	}
	p := x.procs[e.PID]
	if p == nil {
		p = &inUseProc{comm: e.Comm, addrs: map[string]*inUseAddr{}}
		x.procs[e.PID] = p
	}
	p.last = max(p.last, e.Time)
	p.movedTo, p.gotIt = "", false
	ad := p.addrs[a]
	if ad == nil {
		ad = &inUseAddr{addr: a, port: port, calls: map[string]uint64{}, first: e.Time,
			example: event.FormatSyscall(x.arch, s)}
		p.addrs[a] = ad
		if x.read != nil && port != 0 && x.reads < inUseReads {
			x.reads++
			ad.facts = x.read(e.PID, port)
		}
	}
	ad.fails++
	ad.calls[name]++
	ad.first, ad.last = min(ad.first, e.Time), max(ad.last, e.Time)
}

// addrPort is the port of "addr:port"; 0 if none.
func addrPort(a string) uint16 {
	ap, err := netip.ParseAddrPort(a)
	if err != nil {
		return 0
	}
	return ap.Port()
}

// counts takes the kernel's exact count of EADDRINUSE from bind and listen.
func (x *addrInUse) counts(cells []stat.Cell) {
	for _, c := range cells {
		if n := event.SyscallName(x.arch, c.Nr); n != "bind" && n != "listen" {
			continue
		}
		if p := x.procs[c.PID]; p != nil {
			p.exact += c.Errnos[eaddrinuse]
		}
	}
}

func (x *addrInUse) forget(pids, _ map[uint32]bool) {
	for pid := range pids {
		delete(x.procs, pid)
		delete(x.bound, pid)
		delete(x.exits, pid)
		delete(x.accepted, pid)
	}
}

func (x *addrInUse) Findings(env *Env) []Finding {
	var out []Finding
	for pid, p := range x.procs {
		out = append(out, x.finding(env, pid, p))
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Score > out[j].Score || out[i].Score == out[j].Score && out[i].Title < out[j].Title
	})
	return out
}

func (x *addrInUse) finding(env *Env, pid uint32, p *inUseProc) Finding {
	// The address it failed on most; the others are listed.
	var main *inUseAddr
	var total uint64
	var addrs []string
	for a, ad := range p.addrs {
		total += ad.fails
		addrs = append(addrs, a)
		if main == nil || ad.fails > main.fails || ad.fails == main.fails && ad.first < main.first {
			main = ad
		}
	}
	sort.Strings(addrs)
	n := max(total, p.exact)
	name := env.ProcName(pid, p.comm)
	calls := byValue(main.calls)
	call := calls[0]
	where := main.addr
	if where == "" {
		where = "its socket's address (not read)"
	}
	ev := map[string]any{"errno": "EADDRINUSE", "failures": n, "example": main.example, "syscall": call}
	if main.addr != "" {
		ev["address"], ev["port"] = main.addr, main.port
	}
	ev["failures_on_address"] = main.fails
	if len(addrs) > 1 {
		ev["addresses"] = addrs
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d %s call(s) failed with EADDRINUSE (\"Address already in use\")", name, n, strings.Join(calls, "/"))
	if main.fails == n && len(addrs) == 1 {
		fmt.Fprintf(&b, ", on %s", where)
	} else {
		fmt.Fprintf(&b, ", %d of them on %s", main.fails, where)
	}
	if len(addrs) > 1 {
		fmt.Fprintf(&b, " (addresses tried: %s)", strings.Join(addrs, ", "))
	}
	b.WriteString(". ")
	if call == "listen" {
		b.WriteString("listen fails so when another socket bound the same port with SO_REUSEADDR (both sides) and listened first. ")
	}

	// Who holds it.
	holder, holderWords, fix := x.holders(env, pid, p, main, ev, &b)

	// What the failure cost.
	ex, exited := x.exits[pid]
	gaveUp := exited && ex.at >= p.last && ex.at-p.last <= inUseGiveUp && !p.gotIt && p.movedTo == ""
	retried := main.fails >= inUseRetries
	probe := !gaveUp && !retried && p.movedTo != ""
	sev := Info
	var outcome string
	switch {
	case gaveUp:
		sev = Warning
		how := fmt.Sprintf("exit status %d", ex.code)
		if ex.sig != 0 {
			how = fmt.Sprintf("signal %d", ex.sig)
			ev["exit_signal"] = ex.sig
		} else {
			ev["exit_status"] = ex.code
		}
		ev["exit_after_ns"] = ex.at - p.last
		outcome = fmt.Sprintf("it gave up: it exited (%s) %s after its last failure", how, units.Duration(ex.at-p.last))
		if retried {
			outcome = fmt.Sprintf("it retried (%d failures on %s over %s) and gave up: it exited (%s) %s after the last",
				main.fails, where, units.Duration(main.last-main.first), how, units.Duration(ex.at-p.last))
			ev["retry_span_ns"] = main.last - main.first
		}
	case retried:
		sev = Warning
		outcome = fmt.Sprintf("it kept retrying: %d failures on %s over %s", main.fails, where, units.Duration(main.last-main.first))
		ev["retry_span_ns"] = main.last - main.first
		if p.gotIt {
			outcome += ", then bound it"
		}
	case probe:
		outcome = "it tried the port once and then bound " + p.movedTo + ": a probe it handled"
		ev["moved_to"] = p.movedTo
	default:
		outcome = "it failed once; no retry, exit or other bind of it was seen after"
	}
	ev["outcome"] = outcome
	ev["severity_because"] = map[Severity]string{
		Warning: "the program gave up or kept retrying: the port it was meant to serve is not served",
		Info:    "one failure the program did not retry nor exit on",
	}[sev]
	b.WriteString("Consequence: " + outcome + ".")
	title := fmt.Sprintf("%s: %s on %s failed %d time(s) with EADDRINUSE, %s", name, call, where, n, holderWords)
	return Finding{ID: PortInUse, Severity: sev, Title: title, Summary: strings.TrimSpace(b.String()), Evidence: ev,
		Fix: fix, Score: float64(n), Key: keyOf(p.comm, main.addr, holder), Syscalls: calls, Procs: env.refs(pid)}
}

// holders writes who holds the port into b and ev, and returns the kind of
// holder (for the key), the title's words and the fix.
func (x *addrInUse) holders(env *Env, pid uint32, p *inUseProc, ad *inUseAddr, ev map[string]any, b *strings.Builder) (string, string, string) {
	portArg := "PORT"
	if ad.port != 0 {
		portArg = fmt.Sprint(ad.port)
	}
	ssCmd := fmt.Sprintf("`nsenter -t %d -n ss -tanp 'sport = :%s'`", pid, portArg)
	reuseFix := "Set SO_REUSEADDR on the listening socket before bind (`setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one)`; " +
		"Go's net.Listen, nginx and most frameworks do): it lets a listener bind a port that only TIME_WAIT connections " +
		"of an earlier run hold, never one another socket listens on. Waiting 60 s (TIME_WAIT's length) also frees it. "
	otherFix := "Stop the other holder or give one of the two another port; " + ssCmd + " shows the port's sockets in the failing " +
		"process's network namespace with their processes. Two instances of one service started at once fail this way, the second one losing."
	f := ad.facts
	if f != nil {
		ns := f.NetNS
		if ns == "" {
			ns = "its network namespace"
		}
		if f.HostNS {
			fmt.Fprintf(b, "In the failing process's network namespace (%s, the host's), read at its first failure: ", ns)
		} else {
			fmt.Fprintf(b, "In the failing process's own network namespace (%s, not the host's), read at its first failure: ", ns)
		}
		ev["netns"], ev["netns_host"], ev["read"] = ns, f.HostNS, "live, at the first failure"
		tw := f.States[proc.TCPTimeWait]
		closing := 0
		for st, c := range f.States {
			if st != proc.TCPEstablished && st != proc.TCPListen {
				closing += c
			}
		}
		switch {
		case len(f.Listen) > 0 || f.Orphans > 0:
			var hs []string
			var pids []any
			var locals []string
			self := false
			for _, h := range f.Listen {
				if h.PID == pid {
					self = true
				}
				hs = append(hs, fmt.Sprintf("%s[%d] on %s", h.Comm, h.PID, h.Local))
				pids = append(pids, h.PID)
				locals = append(locals, h.Local)
			}
			if f.Orphans > 0 {
				hs = append(hs, fmt.Sprintf("%d listener(s) no process of the namespace holds a descriptor on", f.Orphans))
				ev["listeners_unowned"] = f.Orphans
			}
			ev["holder_state"], ev["holders"], ev["holder_addresses"] = "LISTEN", pids, locals
			fmt.Fprintf(b, "port %d is held in LISTEN by %s. ", ad.port, strings.Join(hs, ", "))
			who := "another process"
			if len(f.Listen) > 0 {
				who = fmt.Sprintf("%s[%d]", f.Listen[0].Comm, f.Listen[0].PID)
			}
			if self {
				who = "itself"
				b.WriteString("The process already listens there itself: a second bind of its own port. ")
			}
			return "listen", "held in LISTEN by " + who, otherFix
		case tw+closing > 0:
			ev["holder_state"], ev["time_wait"], ev["closing"] = "TIME_WAIT", tw, closing
			fmt.Fprintf(b, "no socket listens on port %d; %d connection(s) on it are closing, %d of them in TIME_WAIT. "+
				"Those are an earlier run's connections that closed first: the program restarted and bound the port without "+
				"SO_REUSEADDR, which is what makes them count. ", ad.port, closing, tw)
			return "time-wait", "held only by closing connections (restart without SO_REUSEADDR)", reuseFix
		case f.States[proc.TCPEstablished] > 0:
			ev["holder_state"], ev["established"] = "ESTABLISHED", f.States[proc.TCPEstablished]
			fmt.Fprintf(b, "no socket listens on port %d, but %d established connection(s) still use it as their local port "+
				"(an earlier run's accepted connections, kept by a process that inherited them). ", ad.port, f.States[proc.TCPEstablished])
			return "established", "held by live connections of an earlier run", otherFix
		default:
			if f.Err != "" {
				ev["read_error"] = f.Err
			}
			fmt.Fprintf(b, "no TCP socket was on port %d when it was read: the holder was gone by then, it is a socket only "+
				"bound (bound sockets are in no /proc table), or it is UDP. ", ad.port)
			return "unknown", "its holder gone or only bound", otherFix + " " + reuseFix
		}
	}
	if x.read != nil {
		b.WriteString("Its namespace was not read at the failure (opening /proc would have stalled, reads were spent, or the process was gone). ")
		return "unknown", "its holder not read", otherFix
	}
	// From a capture: what the calls say, inferred.
	ev["read"] = "inferred from the capture's calls; a capture holds no socket tables"
	b.WriteString("A capture holds calls, not the kernel's socket tables, so who held the port is inferred from the calls only: ")
	var alive, ended []string
	var acc uint64
	for _, bd := range x.binders[ad.port] {
		if bd.pid == pid || bd.at > ad.first {
			continue
		}
		ex, gone := x.exits[bd.pid]
		switch {
		case !gone || ex.at > ad.first:
			alive = append(alive, fmt.Sprintf("%s[%d]", bd.comm, bd.pid))
		case ad.first-ex.at < inUseTimeWait:
			ended = append(ended, fmt.Sprintf("%s[%d]", bd.comm, bd.pid))
			acc += x.accepted[bd.pid]
		}
	}
	switch {
	case len(alive) > 0:
		ev["bound_before_by"] = alive
		fmt.Fprintf(b, "%s bound port %d earlier in the capture and had not exited: it likely holds it. ", strings.Join(alive, ", "), ad.port)
		return "listen", "likely held by " + alive[0] + " (inferred)", otherFix
	case len(ended) > 0:
		ev["bound_before_by_ended"], ev["accepted_by_ended"] = ended, acc
		fmt.Fprintf(b, "%s bound port %d, accepted %d connection(s) and exited less than 60 s before the first failure; the "+
			"connections it closed first stay in TIME_WAIT that long and hold the port against a bind without SO_REUSEADDR. ",
			strings.Join(ended, ", "), ad.port, acc)
		return "time-wait", "likely held by an earlier run's TIME_WAIT connections (inferred)", reuseFix
	}
	b.WriteString("no other process bound the port in the capture; it was held from before it began. ")
	return "unknown", "held from before the capture", otherFix + " " + reuseFix
}

// readInUse reads, live, what the network namespace of pid holds on port.
func readInUse(pid uint32, port uint16) *inUseFacts {
	f := &inUseFacts{States: map[int]int{}}
	f.NetNS = netNSOf(pid)
	f.HostNS = f.NetNS != "" && f.NetNS == netNSOf(uint32(os.Getpid()))
	socks, err := tcpOnPort(pid, port)
	if err != nil {
		f.Err = err.Error()
		return f
	}
	inodes := map[string]bool{}
	for _, s := range socks {
		if s.State == proc.TCPListen {
			inodes[s.Inode] = true
		} else {
			f.States[s.State]++
		}
	}
	owners := socketOwners(inodes, f.NetNS)
	for _, s := range socks {
		if s.State != proc.TCPListen {
			continue
		}
		if len(owners[s.Inode]) == 0 {
			f.Orphans++
		}
		for _, o := range owners[s.Inode] {
			f.Listen = append(f.Listen, inUseHolder{PID: o, Comm: commOf(o), Local: s.Local})
		}
	}
	return f
}
