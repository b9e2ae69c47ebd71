package doctor

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/event"
	hostfacts "github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/stat"
)

// The finding it reports.
const PortRangeExhausted ID = "port-range-exhausted"

func init() {
	register(registration{ids: []ID{PortRangeExhausted},
		build: func(h *Host) Detector { return newPortRange(h) }})
}

// portRange finds clients refused a local port: connect failing with
// EADDRNOTAVAIL ("Cannot assign requested address") because every port of
// net.ipv4.ip_local_port_range is held towards the server it connects to.
// A client that opens a connection per request and closes first holds each
// port in TIME_WAIT for 60 s (TCP_TIMEWAIT_LEN; tcp_fin_timeout does not
// shorten it), so a range of 28,232 ports (the default 32768–60999) lasts
// 470 connections a second to one server. The address named is the
// client's own; nothing is wrong with it.
//
// connect's EADDRNOTAVAIL has other causes (a source address bound that is
// no longer on the host), so the detector reads what explains it: live, at
// a process's first refusal, the TCP sockets of its network namespace by
// local address (proc.TCPByLocal) and that namespace's port range
// (proc.LocalPortRange); from a capture, the header's range and the
// process's connects that succeeded in the 60 s before its first refusal.
type portRange struct {
	arch  event.Arch
	meta  map[string]string
	read  func(pid uint32) *portFacts // nil offline; tests replace it
	procs map[uint32]*portProc
	// connects holds each process's successful connect times, from a
	// capture (live, connects are sampled), the last portWindow of them.
	connects map[uint32][]uint64
	reads    int
}

type portProc struct {
	comm        string
	fails       uint64 // from events
	exact       uint64 // the kernel's count
	first, last uint64
	example     string
	peers       map[string]uint64
	before      int // successful connects in the portWindow before the first refusal (capture)
	facts       *portFacts
}

// portFacts is what a process's network namespace held at its first
// refusal.
type portFacts struct {
	Lo, Hi    uint16
	RangeRead bool
	// The local address holding most sockets that are not listening, and
	// its sockets by state.
	Addr             string
	TimeWait, Other  int
	MinPort, MaxPort uint16
	// NetNS is the process's network namespace ("net:[N]", "" unread);
	// HostNS says it is the host's (sysray's). The range, tcp_tw_reuse and
	// the sockets are each namespace's own, so a container's are changed
	// and counted in it, not on the host.
	NetNS  string
	HostNS bool
	Err    string
}

// Thresholds. See docs/detectors/port-range-exhausted.md.
const (
	// connect gives EADDRNOTAVAIL for want of a port only after trying
	// every port of the range, so at the refusal the sockets on the
	// client's address fill it. A read a few milliseconds later sees the
	// same sockets (TIME_WAIT lasts 60 s); half the range leaves room for
	// reserved ports (ip_local_reserved_ports) and ports held towards
	// other servers that do not count, while a source address that is
	// simply gone holds a handful. Below it the errno has another cause.
	portFullShare = 0.5
	// TIME_WAIT's length in Linux (TCP_TIMEWAIT_LEN), the window over
	// which a capture's successful connects still hold their ports.
	portWindow = 60e9
	// Processes whose namespace is read at their first refusal, at most.
	portReadProcs = 16
	// Successful connect times kept per process from a capture: enough to
	// fill the largest range, 64,511 ports.
	portKeep = 65536
)

const eaddrnotavail = 99

func newPortRange(h *Host) *portRange {
	x := &portRange{arch: h.Arch, meta: h.Meta, procs: map[uint32]*portProc{}, connects: map[uint32][]uint64{}}
	if h.Live {
		x.read = func(pid uint32) *portFacts {
			if !h.canRead() {
				return nil
			}
			return readPortFacts(pid)
		}
	}
	return x
}

func (x *portRange) Observe(e *event.Event) {
	if e.Kind != event.KindSyscall {
		return
	}
	s := &e.Syscall
	if s.Unfinished || s.Refused || event.SyscallName(x.arch, s.Nr) != "connect" {
		return
	}
	if !s.Failed() {
		if x.read == nil {
			c := append(x.connects[e.PID], e.Time)
			if len(c) > portKeep {
				c = c[len(c)-portKeep:]
			}
			x.connects[e.PID] = c
		}
		return
	}
	if s.Ret != -eaddrnotavail {
		return
	}
	p := x.procs[e.PID]
	if p == nil {
		p = &portProc{comm: e.Comm, peers: map[string]uint64{}, first: e.Time}
		for _, t := range x.connects[e.PID] {
			if t <= e.Time && e.Time-t < portWindow {
				p.before++
			}
		}
		x.procs[e.PID] = p
	}
	p.fails++
	p.first, p.last = min(p.first, e.Time), max(p.last, e.Time)
	if p.example == "" {
		p.example = event.FormatSyscall(x.arch, s)
	}
	if peer := sockPeer(s.Data[1]); peer != "" {
		p.peers[peer]++
	}
	if p.facts == nil && x.read != nil && x.reads < portReadProcs {
		x.reads++
		p.facts = x.read(e.PID)
	}
}

// counts takes the kernel's exact count of refusals.
func (x *portRange) counts(cells []stat.Cell) {
	for _, c := range cells {
		if event.SyscallName(x.arch, c.Nr) != "connect" {
			continue
		}
		if p := x.procs[c.PID]; p != nil {
			p.exact += c.Errnos[eaddrnotavail]
		}
	}
}

func (x *portRange) forget(pids, _ map[uint32]bool) {
	for pid := range pids {
		delete(x.procs, pid)
		delete(x.connects, pid)
	}
}

func (x *portRange) Findings(env *Env) []Finding {
	var out []Finding
	for pid, p := range x.procs {
		out = append(out, x.finding(env, pid, p))
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Score > out[j].Score || out[i].Score == out[j].Score && out[i].Title < out[j].Title
	})
	return out
}

func (x *portRange) finding(env *Env, pid uint32, p *portProc) Finding {
	n := max(p.fails, p.exact)
	name := env.ProcName(pid, p.comm)
	peer := ""
	if ps := byValue(p.peers); len(ps) > 0 {
		peer = ps[0]
	}
	ev := map[string]any{"errno": "EADDRNOTAVAIL", "refusals": n, "example": p.example}
	if peer != "" {
		ev["peer"] = peer
	}
	var lo, hi uint16
	rangeKnown, from := false, ""
	if f := p.facts; f != nil && f.RangeRead {
		lo, hi, rangeKnown, from = f.Lo, f.Hi, true, "its network namespace's, read at the first refusal"
	} else if l, h, ok := hostfacts.MetaPortRange(x.meta); ok {
		lo, hi, rangeKnown, from = l, h, true, "the capture header's, as the recorder's namespace had it when recording began"
	}
	size := 0
	if rangeKnown {
		size = int(hi) - int(lo) + 1
		ev["port_range"], ev["port_range_from"], ev["ports"] = fmt.Sprintf("%d-%d", lo, hi), from, size
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d connect call(s) failed with EADDRNOTAVAIL (\"Cannot assign requested address\")", name, n)
	if peer != "" {
		fmt.Fprintf(&b, ", to %s", peer)
	}
	b.WriteString(". For a TCP client that means no local port was free: connect tries every port of " +
		"net.ipv4.ip_local_port_range and each was held towards that server. ")
	held := 0
	ownNS := p.facts != nil && p.facts.NetNS != "" && !p.facts.HostNS
	if f := p.facts; f != nil && f.NetNS != "" {
		ev["netns"], ev["netns_host"] = f.NetNS, f.HostNS
		if ownNS {
			fmt.Fprintf(&b, "It runs in a network namespace of its own (%s, not the host's: a container's or a sandbox's), "+
				"which has its own port range, tcp_tw_reuse and sockets. ", f.NetNS)
		}
	}
	switch f := p.facts; {
	case f != nil && f.Addr != "":
		held = f.TimeWait + f.Other
		fmt.Fprintf(&b, "At the first refusal its network namespace held %d TCP sockets on %s, %d of them in TIME_WAIT, "+
			"ports %d to %d", held, f.Addr, f.TimeWait, f.MinPort, f.MaxPort)
		ev["local_addr"], ev["time_wait"], ev["sockets"] = f.Addr, f.TimeWait, held
		ev["port_min"], ev["port_max"] = f.MinPort, f.MaxPort
	case x.read == nil:
		held = p.before
		fmt.Fprintf(&b, "In the %d s before its first refusal (TIME_WAIT's length) it made %d successful connect(s) in the "+
			"capture, each holding its port for that long once it closed first", int(portWindow/1e9), held)
		ev["connects_in_60s_before"], ev["window_ns"] = held, uint64(portWindow)
	default:
		b.WriteString("Its sockets were not read at the refusal (opening /proc would have stalled, or the process was gone)")
	}
	if rangeKnown {
		fmt.Fprintf(&b, ", against a range of %d ports (%d–%d, %s). ", size, lo, hi, from)
	} else {
		b.WriteString("; the port range is not known. ")
	}
	full := rangeKnown && float64(held) >= portFullShare*float64(size)
	sev := Warning
	what := "its local port range held in TIME_WAIT"
	if p.facts == nil {
		what = fmt.Sprintf("its connections of the last %d s fill the local port range", int(portWindow/1e9))
	}
	title := fmt.Sprintf("%s: connect failed %d time(s) with EADDRNOTAVAIL, %s", name, n, what)
	if !full {
		sev = Info
		title = fmt.Sprintf("%s: connect failed %d time(s) with EADDRNOTAVAIL; the port range is not shown full", name, n)
		b.WriteString("That is not shown to fill the range: the refusal may have another cause (a source address bound " +
			"that is no longer on the host), or the ports were held before the trace. ")
	}
	ev["severity_because"] = map[bool]string{
		true:  "every refused connect is a request not sent, and the ports shown held fill the range",
		false: "the ports held are not shown to fill the range",
	}[full]
	fix := "Reuse connections (HTTP keep-alive, a connection pool) instead of one per request: that removes the TIME_WAIT " +
		"sockets. Or widen the range (`sysctl net.ipv4.ip_local_port_range=\"1024 65535\"`, persisted in /etc/sysctl.d), " +
		"and let outgoing connections reuse TIME_WAIT ports with timestamps on (`sysctl net.ipv4.tcp_tw_reuse=1`; " +
		"the default 2 does so only on loopback). Having the server close first moves TIME_WAIT to the server. " +
		"`ss -tan state time-wait | wc -l` counts them."
	if ownNS {
		// A sysctl or ss on the host reads and sets the host's namespace,
		// which is not the one that ran out.
		fix = fmt.Sprintf("Reuse connections (HTTP keep-alive, a connection pool) instead of one per request: that removes the "+
			"TIME_WAIT sockets. The range and the sockets are its network namespace's, not the host's: a sysctl on the host "+
			"changes neither. Widen the range in that namespace, now with `nsenter -t %d -n sysctl -w "+
			"net.ipv4.ip_local_port_range=\"1024 65535\"` (and tcp_tw_reuse=1 there to reuse TIME_WAIT ports with timestamps "+
			"on), and for good where the namespace is made: a Kubernetes pod's securityContext.sysctls (both are namespaced, "+
			"\"safe\" sysctls), `docker run --sysctl`. Having the server close first moves TIME_WAIT to the server. "+
			"`nsenter -t %d -n ss -tan state time-wait | wc -l` counts them.", pid, pid)
	}
	return Finding{ID: PortRangeExhausted, Severity: sev, Title: title, Summary: strings.TrimSpace(b.String()), Evidence: ev,
		Fix: fix, Score: float64(n), Key: keyOf(p.comm, peer), Syscalls: []string{"connect"}, Procs: env.refs(pid)}
}

// sockPeer renders an AF_INET or AF_INET6 socket address as addr:port.
func sockPeer(b []byte) string {
	if len(b) < 2 {
		return ""
	}
	switch binary.LittleEndian.Uint16(b) {
	case 2:
		if len(b) >= 8 {
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:])).String()
		}
	case 10:
		if len(b) >= 24 {
			return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), binary.BigEndian.Uint16(b[2:])).String()
		}
	}
	return ""
}

// readPortFacts reads a process's network namespace at its refusal: the
// port range and the local address holding most non-listening sockets.
func readPortFacts(pid uint32) *portFacts {
	f := &portFacts{}
	var errs []string
	if lo, hi, err := proc.LocalPortRange(pid); err == nil {
		f.Lo, f.Hi, f.RangeRead = lo, hi, true
	} else {
		errs = append(errs, err.Error())
	}
	if locals, err := proc.TCPByLocal(pid); err == nil {
		best := -1
		for _, l := range locals {
			n := 0
			for st, c := range l.States {
				if st != proc.TCPListen {
					n += c
				}
			}
			if n > best && n > 0 {
				best = n
				f.Addr, f.TimeWait, f.Other = l.Addr.String(), l.States[proc.TCPTimeWait], n-l.States[proc.TCPTimeWait]
				f.MinPort, f.MaxPort = l.MinPort, l.MaxPort
			}
		}
	} else {
		errs = append(errs, err.Error())
	}
	f.NetNS = netNSOf(pid)
	f.HostNS = f.NetNS != "" && f.NetNS == netNSOf(uint32(os.Getpid()))
	f.Err = strings.Join(errs, "; ")
	return f
}
