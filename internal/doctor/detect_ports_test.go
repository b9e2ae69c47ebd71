package doctor

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
)

const (
	ptNrConnect     = 42
	ptEADDRNOTAVAIL = -99
	ptECONNREFUSED  = -111
)

func portsRun(t *testing.T, evs []event.Event, meta map[string]string, read func(uint32) *portFacts, cells []stat.Cell) []Finding {
	t.Helper()
	h := host
	h.Meta = meta
	d := New(h, nil)
	found := false
	for _, det := range d.detectors {
		if x, ok := det.(*portRange); ok {
			x.read, found = read, true
		}
	}
	if !found {
		t.Fatal("port-range-exhausted is not registered in New")
	}
	for i := range evs {
		d.Observe(&evs[i])
	}
	if cells != nil {
		d.Counts(cells)
	}
	return checked(d.Report()).Findings
}

// connectTo is a connect to 10.200.0.1:8080.
func connectTo(pid uint32, t uint64, ret int64) event.Event {
	e := sys(pid, t, ptNrConnect, ret, 5000, 5, 0, 16)
	e.Syscall.Data[1] = []byte{2, 0, 0x1f, 0x90, 10, 200, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	return e
}

// Live: the namespace's range full of TIME_WAIT sockets makes a warning
// naming the peer, the range and the sockets, with the kernel's exact
// count; the fix names keep-alive, the range and tcp_tw_reuse.
func TestPortRangeLive(t *testing.T) {
	var evs []event.Event
	for i := range uint64(30) {
		evs = append(evs, connectTo(7, 1e9+i*10e6, ptEADDRNOTAVAIL))
	}
	reads := 0
	read := func(uint32) *portFacts {
		reads++
		return &portFacts{Lo: 50000, Hi: 50063, RangeRead: true, Addr: "10.200.0.1", TimeWait: 64, MinPort: 50000, MaxPort: 50063}
	}
	cells := []stat.Cell{{Key: stat.Key{PID: 7, Nr: ptNrConnect}, Count: 162, Errors: 98, Errnos: map[int]uint64{99: 98}}}
	f := byID(portsRun(t, evs, nil, read, cells), PortRangeExhausted)
	if f == nil || f.Severity != Warning {
		t.Fatalf("finding %+v", f)
	}
	wantWords(t, f, "98 connect", "EADDRNOTAVAIL", "10.200.0.1:8080", "64 of them in TIME_WAIT", "range of 64 ports")
	for _, w := range []string{"keep-alive", "ip_local_port_range", "tcp_tw_reuse=1"} {
		if !strings.Contains(f.Fix, w) {
			t.Errorf("fix lacks %q: %s", w, f.Fix)
		}
	}
	if reads != 1 || f.Key != "port-range-exhausted:prog|10.200.0.1:8080" {
		t.Errorf("reads %d key %q", reads, f.Key)
	}
}

// Live, a handful of sockets against a wide range: the errno has another
// cause, and the finding is info that says so.
func TestPortRangeNotFull(t *testing.T) {
	read := func(uint32) *portFacts {
		return &portFacts{Lo: 32768, Hi: 60999, RangeRead: true, Addr: "10.0.0.5", TimeWait: 3, Other: 2}
	}
	f := byID(portsRun(t, []event.Event{connectTo(7, 1e9, ptEADDRNOTAVAIL)}, nil, read, nil), PortRangeExhausted)
	if f == nil || f.Severity != Info {
		t.Fatalf("finding %+v", f)
	}
	wantWords(t, f, "not shown to fill the range", "another cause")
}

// From a capture: the connects that succeeded in the 60 s before the first
// refusal, against the header's range. Connects older than 60 s hold no
// port and do not count.
func TestPortRangeCapture(t *testing.T) {
	meta := map[string]string{"net.ipv4.ip_local_port_range": "50000 50031"}
	var evs []event.Event
	for i := range uint64(40) {
		evs = append(evs, connectTo(7, 1e9+i*1e6, 0)) // 40 long before
	}
	for i := range uint64(32) {
		evs = append(evs, connectTo(7, 100e9+i*1e6, 0))
	}
	evs = append(evs, connectTo(7, 101e9, ptEADDRNOTAVAIL), connectTo(7, 101e9+1e7, ptEADDRNOTAVAIL))
	f := byID(portsRun(t, evs, meta, nil, nil), PortRangeExhausted)
	if f == nil || f.Severity != Warning {
		t.Fatalf("finding %+v", f)
	}
	wantWords(t, f, "2 connect", "made 32 successful connect", "range of 32 ports", "capture header's")
	f = byID(portsRun(t, evs[40:], map[string]string{"net.ipv4.ip_local_port_range": "32768 60999"}, nil, nil), PortRangeExhausted)
	if f == nil || f.Severity != Info {
		t.Errorf("32 connects against 28,232 ports: %+v", f)
	}
}

// Not this: a refused connect (ECONNREFUSED), and EADDRNOTAVAIL from bind.
func TestPortRangeBenign(t *testing.T) {
	var evs []event.Event
	for i := range uint64(50) {
		evs = append(evs, connectTo(7, 1e9+i*1e6, ptECONNREFUSED), sys(8, 1e9+i*1e6, 49, ptEADDRNOTAVAIL, 1000))
	}
	if f := byID(portsRun(t, evs, nil, func(uint32) *portFacts { t.Error("read"); return nil }, nil), PortRangeExhausted); f != nil {
		t.Errorf("%s", f.Title)
	}
}

// In a network namespace of its own (a container's), the range and the
// sockets are that namespace's: the finding says so, and the fix sets and
// counts them there, not with a sysctl on the host.
func TestPortRangeOwnNetNS(t *testing.T) {
	var evs []event.Event
	for i := range uint64(10) {
		evs = append(evs, connectTo(7, 1e9+i*10e6, ptEADDRNOTAVAIL))
	}
	facts := portFacts{Lo: 40000, Hi: 40063, RangeRead: true, Addr: "10.200.0.1", TimeWait: 64, MinPort: 40000, MaxPort: 40063}
	own, hostNS := facts, facts
	own.NetNS = "net:[4026532250]"
	hostNS.NetNS, hostNS.HostNS = "net:[4026531840]", true
	f := byID(portsRun(t, evs, nil, func(uint32) *portFacts { return &own }, nil), PortRangeExhausted)
	if f == nil || f.Severity != Warning {
		t.Fatalf("finding %+v", f)
	}
	wantWords(t, f, "net:[4026532250], not the host's", "range of 64 ports (40000–40063")
	for _, w := range []string{"nsenter -t 7 -n sysctl -w net.ipv4.ip_local_port_range", "securityContext.sysctls", "nsenter -t 7 -n ss -tan"} {
		if !strings.Contains(f.Fix, w) {
			t.Errorf("fix lacks %q: %s", w, f.Fix)
		}
	}
	if strings.Contains(f.Fix, "`sysctl net.ipv4") || f.Evidence["netns_host"] != false {
		t.Errorf("the host's sysctl for a namespace of its own: %s %v", f.Fix, f.Evidence)
	}
	g := byID(portsRun(t, evs, nil, func(uint32) *portFacts { return &hostNS }, nil), PortRangeExhausted)
	if g == nil || strings.Contains(g.Summary, "not the host's") || strings.Contains(g.Fix, "nsenter") ||
		!strings.Contains(g.Fix, "`sysctl net.ipv4.ip_local_port_range") {
		t.Errorf("in the host's namespace: %+v", g)
	}
}
