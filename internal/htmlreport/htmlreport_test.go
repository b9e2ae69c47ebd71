package htmlreport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/event"
)

const arch = event.ArchAMD64

func nr(t *testing.T, name string) uint32 {
	t.Helper()
	n, ok := event.SyscallByName(arch, name)
	if !ok {
		t.Fatalf("no syscall %s", name)
	}
	return n
}

func call(pid, tid uint32, comm string, nr uint32, at, lat uint64, ret int64) *event.Event {
	return &event.Event{Kind: event.KindSyscall, Time: at, PID: pid, TID: tid, Comm: comm,
		Syscall: event.Syscall{Nr: nr, Latency: lat, Ret: ret}}
}

// Counts, errors by errno, maximum and percentiles per process and syscall
// add up exactly, and every process lands in its container.
func TestTables(t *testing.T) {
	openat, getppid := nr(t, "openat"), nr(t, "getppid")
	b := New(arch, Names{
		Container: func(pid uint32, _ uint64) string {
			if pid == 20 {
				return "web"
			}
			return ""
		},
		Command: func(pid uint32) string { return map[uint32]string{10: "./a -x", 20: "./b"}[pid] },
	}, Limits{})
	at := uint64(1e9)
	for i := range 1000 {
		// 1 µs to 1000 µs, one of each: p50 ≈ 500 µs, p99 ≈ 990 µs.
		b.Observe(call(10, 10, "a", getppid, at, uint64(i+1)*1000, 10))
		at += 2000
	}
	for i := range 30 {
		ret := int64(3)
		if i%3 == 0 {
			ret = -2 // ENOENT
		} else if i%3 == 1 {
			ret = -13 // EACCES
		}
		b.Observe(call(20, 21, "b", openat, at, 5000, ret))
		at += 10000
	}
	d := b.Data(Meta{}, nil)
	if len(d.Containers) != 2 {
		t.Fatalf("containers %+v", d.Containers)
	}
	var host, web *Container
	for i := range d.Containers {
		switch d.Containers[i].Name {
		case "":
			host = &d.Containers[i]
		case "web":
			web = &d.Containers[i]
		}
	}
	if host == nil || web == nil {
		t.Fatalf("containers %+v", d.Containers)
	}
	if len(host.Procs) != 1 || host.Procs[0].PID != 10 || host.Procs[0].Cmd != "./a -x" || host.Procs[0].Comm != "a" {
		t.Fatalf("host processes %+v", host.Procs)
	}
	g := host.Procs[0].Syscalls[0]
	if g.Name != "getppid" || g.Count != 1000 || g.Errors != 0 || g.Max != 1000000 || g.Time != 500500000 {
		t.Errorf("getppid row %+v", g)
	}
	if rel(g.P50, 500000) > 0.125 || rel(g.P99, 990000) > 0.125 {
		t.Errorf("getppid p50 %d p99 %d", g.P50, g.P99)
	}
	o := web.Procs[0]
	if o.Threads != 1 || o.Count != 30 || o.Errors != 20 || o.Errnos["ENOENT"] != 10 || o.Errnos["EACCES"] != 10 {
		t.Errorf("web process %+v", o)
	}
	if web.Count != 30 || host.Count != 1000 || host.Time != 500500000 {
		t.Errorf("container sums: web %+v host %+v", web.Stats, host.Stats)
	}
	// The busiest container first.
	if d.Containers[0].Name != "" {
		t.Errorf("containers not ordered by time: %q first", d.Containers[0].Name)
	}
}

func rel(got, want uint64) float64 {
	d := float64(got) - float64(want)
	if d < 0 {
		d = -d
	}
	return d / float64(want)
}

// Processes past the limit share one row that keeps their counts.
func TestProcessLimit(t *testing.T) {
	getppid := nr(t, "getppid")
	b := New(arch, Names{}, Limits{Processes: 3})
	for pid := uint32(1); pid <= 10; pid++ {
		for range pid {
			b.Observe(call(pid, pid, "p", getppid, uint64(pid)*1000, uint64(pid)*100, 0))
		}
	}
	c := b.Data(Meta{}, nil).Containers[0]
	if len(c.Procs) != 4 || c.Omitted != 7 {
		t.Fatalf("%d rows, %d omitted", len(c.Procs), c.Omitted)
	}
	if c.Procs[0].PID != 10 || c.Procs[3].PID != 0 || c.Procs[3].Count != 1+2+3+4+5+6+7 {
		t.Errorf("rows %+v", c.Procs)
	}
}

// The heatmap keeps every call as its columns widen, each in the row of
// its latency.
func TestHeatmap(t *testing.T) {
	read := nr(t, "read")
	b := New(arch, Names{}, Limits{})
	start := uint64(5e9)
	var n uint64
	for i := range 10000 {
		lat := uint64(1000) // 1 µs
		if i%10 == 0 {
			lat = 1e6 // 1 ms
		}
		b.Observe(call(1, 1, "r", read, start+uint64(i)*1e6, lat, 1)) // over 10 s
		n++
	}
	h := b.Data(Meta{}, nil).Heatmap
	if h.BinNS*uint64(h.Cols) < 10e9 || h.BinNS > 2*10e9/uint64(h.Cols)+heatMinNS {
		t.Errorf("bin %d ns for 10 s over %d columns", h.BinNS, h.Cols)
	}
	if len(h.Series) != 2 || h.Series[0].Name != "all syscalls" || h.Series[1].Name != "read" {
		t.Fatalf("series %+v", h.Series)
	}
	byRow := map[uint64]uint64{}
	var sum uint64
	c := h.Series[1].Cells
	for i := 0; i < len(c); i += 3 {
		if c[i] >= uint64(h.Cols) {
			t.Fatalf("column %d of %d", c[i], h.Cols)
		}
		byRow[c[i+1]] += c[i+2]
		sum += c[i+2]
	}
	if sum != n {
		t.Errorf("cells hold %d calls, want %d", sum, n)
	}
	r1us, r1ms := uint64(row(1000)), uint64(row(1e6))
	if byRow[r1us] != 9000 || byRow[r1ms] != 1000 {
		t.Errorf("rows %v, want 9000 in %d and 1000 in %d", byRow, r1us, r1ms)
	}
	if lo := h.RowNS[r1us]; lo > 1000 || h.RowNS[r1us+1] <= 1000 {
		t.Errorf("row %d covers [%d, %d), not 1000", r1us, lo, h.RowNS[r1us+1])
	}
}

// The timeline keeps the slowest calls and every rare event, and says how
// many it left out; a pool of parked threads takes a few lanes, not all.
func TestTimeline(t *testing.T) {
	futex := nr(t, "futex")
	b := New(arch, Names{}, Limits{SlowCalls: 10, Lanes: 16})
	for i := range 100 {
		b.Observe(call(1, 1, "w", futex, uint64(i)*1e6, uint64(i)*1000, 0))
	}
	b.Observe(&event.Event{Kind: event.KindSignalDeliver, Time: 2e8, PID: 1, TID: 2, Comm: "w", Signal: event.Signal{Sig: 11}})
	b.Observe(&event.Event{Kind: event.KindExit, Time: 3e8, PID: 1, TID: 2, Comm: "w"})
	// Twenty threads of another process, parked until the end.
	for tid := uint32(3); tid < 23; tid++ {
		parked := call(3, tid, "x", futex, 0, 3e8, 0)
		parked.Syscall.Unfinished = true
		b.Observe(parked)
		b.Observe(&event.Event{Kind: event.KindExit, Time: 3e8, PID: 3, TID: tid, Comm: "x"})
	}
	tl := b.Data(Meta{}, nil).Timeline
	// The ten slowest finished calls, and one of the cut-off ones.
	if tl.Total["syscall"] != 120 || tl.Shown["syscall"] != 11 || tl.SlowFloor != 90000 {
		t.Errorf("syscalls: total %d shown %d floor %d", tl.Total["syscall"], tl.Shown["syscall"], tl.SlowFloor)
	}
	for _, it := range tl.Items {
		if it.Kind == "syscall" && it.D < 90000 {
			t.Errorf("kept a call of %d ns", it.D)
		}
	}
	var lanes []uint32
	for _, th := range tl.Threads {
		lanes = append(lanes, th.TID)
	}
	// The process with a crash first; the parked pool has two lanes of
	// the sixteen.
	if fmt.Sprint(lanes) != "[1 2 3 4]" || tl.ThreadsOmitted != 18 {
		t.Errorf("lanes %v, omitted %d", lanes, tl.ThreadsOmitted)
	}
	if tl.Shown["signal"] != 1 || tl.Total["exit"] != 21 {
		t.Errorf("shown %v total %v", tl.Shown, tl.Total)
	}
}

// On-CPU time is latency less sleeps; off-CPU time is the sleeps, by stack.
func TestFlames(t *testing.T) {
	read := nr(t, "read")
	b := New(arch, Names{}, Limits{})
	e := call(7, 7, "db", read, 1e9, 50e6, 10)
	e.Syscall.UserStack = []event.Frame{{Name: "read_page"}, {Name: "main"}}
	e.Syscall.Sleeps = []event.Sleep{{Duration: 40e6, Stack: []event.Frame{{Name: "io_schedule"}, {Name: "ksys_read"}}}}
	b.Observe(e)
	b.Observe(call(7, 7, "db", read, 2e9, 1e6, 10))
	// As slow as a recorded call, yet without a record: the probe did not
	// say where it slept, so its time on CPU is not even bounded.
	b.Observe(call(7, 7, "db", read, 3e9, 100e6, 10))
	f := b.Data(Meta{}, nil).Flame
	// 10 ms known on CPU, and 1 ms at most: the second call's sleeps, if
	// any, were not recorded.
	if f.OnCPU == nil || f.OnCPU.Value != 10e6+1e6 || f.OnCPU.Bound != 1e6 {
		t.Fatalf("on-CPU root %+v", f.OnCPU)
	}
	if f.OffCPU == nil || f.OffCPU.Value != 40e6 {
		t.Fatalf("off-CPU root %+v", f.OffCPU)
	}
	path := []string{"db[7]", "main", "read_page", "ksys_read_[k]", "io_schedule_[k]"}
	n := f.OffCPU
	for _, want := range path {
		if len(n.Children) != 1 || n.Children[0].Name != want {
			t.Fatalf("off-CPU: under %s want %s, have %+v", n.Name, want, n.Children)
		}
		n = n.Children[0]
	}
	if n.Value != 40e6 {
		t.Errorf("leaf %d ns", n.Value)
	}
}

// Names, paths and argv are the traced programs': they reach the page as
// JSON inside one script element that they cannot close, and the page
// parses back to exactly what was written.
func TestWriteEscapes(t *testing.T) {
	evil := `</script><img src=x onerror=alert(1)><!--` + "\u2028"
	b := New(arch, Names{Command: func(uint32) string { return evil }}, Limits{})
	b.Observe(call(1, 1, evil, nr(t, "getppid"), 1, 1, 0))
	d := b.Data(Meta{File: evil, Command: []string{evil}}, &doctor.Report{Findings: []doctor.Finding{{ID: "x", Title: evil, Summary: evil, Fix: evil,
		Evidence: map[string]any{"k": evil}}}, Near: []doctor.Near{{ID: "slow-syscall", Subject: evil, Short: evil, Closeness: 0.5}}})
	var out bytes.Buffer
	if err := Write(&out, d, evil); err != nil {
		t.Fatal(err)
	}
	page := out.String()
	for _, bad := range []string{"<img", "alert(1)><!--"} {
		if i := strings.Index(page, bad); i >= 0 {
			t.Fatalf("untrusted text reached the page unescaped: %q", page[max(0, i-40):i+len(bad)])
		}
	}
	if n := strings.Count(page, "</script>"); n != 2 {
		t.Errorf("%d </script> in the page, want 2", n)
	}
	m := regexp.MustCompile(`(?s)<script id="sysray-data" type="application/json">(.*?)</script>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no data element")
	}
	if strings.Contains(m[1], "\u2028") {
		t.Errorf("a raw U+2028 in the data")
	}
	var back Data
	if err := json.Unmarshal([]byte(m[1]), &back); err != nil {
		t.Fatal(err)
	}
	if back.Findings[0].Title != evil || back.Meta.File != evil || back.Containers[0].Procs[0].Cmd != evil ||
		back.Containers[0].Procs[0].Comm != evil {
		t.Errorf("text changed on the way: %q", back.Findings[0].Title)
	}
	for _, bad := range []string{"<link", "<script src", "<iframe", "<object", "url(", "@import", "http://", "https://"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page refers to something outside it: %q", bad)
		}
	}
}

// A thousand threads exiting together do not crowd out a crash, nor the
// exit of the process at the end.
func TestTimelineKeepsRare(t *testing.T) {
	b := New(arch, Names{}, Limits{Marks: 100, Lanes: 10})
	for tid := uint32(2); tid < 3000; tid++ {
		b.Observe(&event.Event{Kind: event.KindSignalDeliver, Time: uint64(tid), PID: 1, TID: tid, Signal: event.Signal{Sig: 9}})
		b.Observe(&event.Event{Kind: event.KindExit, Time: uint64(tid), PID: 1, TID: tid})
	}
	b.Observe(&event.Event{Kind: event.KindSignalDeliver, Time: 5000, PID: 7, TID: 7, Comm: "crash", Signal: event.Signal{Sig: 11}})
	b.Observe(&event.Event{Kind: event.KindExit, Time: 6000, PID: 8, TID: 8, Comm: "last", Proc: event.Proc{GroupDead: true}})
	for tid := uint32(3000); tid < 4000; tid++ {
		b.Observe(&event.Event{Kind: event.KindExit, Time: uint64(tid) + 7000, PID: 1, TID: tid})
	}
	tl := b.Data(Meta{}, nil).Timeline
	if tl.Total["signal"] != 2999 || tl.Total["exit"] != 3999 || tl.Shown["signal"] < 1 || tl.Shown["exit"] > 20 {
		t.Errorf("total %v shown %v", tl.Total, tl.Shown)
	}
	var crash, last bool
	for _, it := range tl.Items {
		th := tl.Threads[it.Lane]
		crash = crash || th.TID == 7 && it.Kind == "signal"
		last = last || th.TID == 8 && it.Kind == "exit"
	}
	if !crash || !last {
		t.Errorf("the crash (%v) or the process's exit (%v) is not drawn: lanes %+v", crash, last, tl.Threads)
	}
}

// Long text is cut at a character boundary, and says so.
func TestClip(t *testing.T) {
	s := strings.Repeat("é", 300) // 600 bytes
	c := clip(s, 201)
	if len(c) > 201+len("…") || !strings.HasSuffix(c, "…") || !utf8.ValidString(c) {
		t.Errorf("clip: %d bytes, valid %v", len(c), utf8.ValidString(c))
	}
	if clip("short", 10) != "short" {
		t.Errorf("clip changed a short string")
	}
	b := New(arch, Names{Command: func(uint32) string { return s }}, Limits{})
	b.Observe(call(1, 1, "p", nr(t, "getppid"), 1, 1, 0))
	if cmd := b.Data(Meta{}, nil).Containers[0].Procs[0].Cmd; len(cmd) > maxCmd+len("…") {
		t.Errorf("a command line of %d bytes in the table", len(cmd))
	}
}

func TestFrameName(t *testing.T) {
	for in, want := range map[string]string{
		"schedule+0x23":          "schedule",
		"time+0xd (libc.so.6)":   "time (libc.so.6)",
		"nvme_poll+0x1f0 [nvme]": "nvme_poll [nvme]",
		"main":                   "main",
		"":                       "0x10",
	} {
		if got := frameName(event.Frame{Addr: 0x10, Name: in}); got != want {
			t.Errorf("frameName(%q) = %q, want %q", in, got, want)
		}
	}
}
