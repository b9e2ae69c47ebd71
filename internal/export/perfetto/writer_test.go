package perfetto_test

import (
	"bytes"
	"testing"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/export"
	"github.com/sysray/sysray/internal/export/exporttest"
	"github.com/sysray/sysray/internal/export/perfetto"
	"github.com/sysray/sysray/internal/export/perfetto/pftest"
)

func write(t *testing.T, src export.Source) ([]byte, export.Stats) {
	t.Helper()
	var b bytes.Buffer
	st, err := export.Export(src, perfetto.NewWriter(&b), export.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), st
}

func TestFixtureDecodesWithPerfettoSchema(t *testing.T) {
	raw, st := write(t, exporttest.Source())
	tr, err := pftest.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	sl, err := tr.Slices()
	if err != nil {
		t.Fatal(err)
	}
	if st.Slices != exporttest.Syscalls || st.Lanes != exporttest.Lanes || st.WakeFlows != 1 || st.SignalFlows != 1 {
		t.Errorf("stats %+v", st)
	}

	// Tracks: processes with names and the container, threads under them.
	byTID := map[int64]*pftest.Track{}
	var server, client *pftest.Track
	var lanes []*pftest.Track
	for _, tk := range tr.Tracks {
		switch {
		case tk.IsProcess && tk.PID == exporttest.Server:
			server = tk
		case tk.IsProcess && tk.PID == exporttest.Client:
			client = tk
		case tk.IsThread:
			byTID[tk.TID] = tk
		case !tk.IsCounter && tk.Parent != 0:
			lanes = append(lanes, tk)
		}
	}
	if server == nil || server.ProcessName != "server [container web]" || len(server.Labels) != 1 || server.Labels[0] != "container web" {
		t.Fatalf("server process track %+v", server)
	}
	if got := server.Cmdline; len(got) != 3 || got[2] != "80" {
		t.Errorf("server cmdline %q", got)
	}
	if client == nil || client.ProcessName != "client" || len(client.Cmdline) != 2 {
		t.Fatalf("client process track %+v", client)
	}
	for tid, want := range map[int64]struct {
		name   string
		parent *pftest.Track
	}{exporttest.Server: {"server", server}, exporttest.Worker: {"worker", server}, exporttest.Client: {"client", client}} {
		tk := byTID[tid]
		if tk == nil || tk.ThreadName != want.name || tk.Parent != want.parent.UUID || tk.PID != want.parent.PID {
			t.Errorf("thread %d: %+v", tid, tk)
		}
	}
	if len(byTID) != 3 {
		t.Errorf("%d thread tracks, want 3", len(byTID))
	}
	if len(lanes) != exporttest.Lanes || lanes[0].Parent != byTID[exporttest.Client].UUID {
		t.Fatalf("lanes %+v", lanes)
	}

	// One slice per syscall, with its arguments.
	var calls int
	byName := map[string][]pftest.Slice{}
	for _, s := range sl {
		byName[s.Name] = append(byName[s.Name], s)
		if s.Cat == "syscall" {
			calls++
		}
	}
	if calls != exporttest.Syscalls {
		t.Errorf("%d syscall slices, want %d", calls, exporttest.Syscalls)
	}
	op := byName["openat"]
	if len(op) != 2 {
		t.Fatalf("openat slices %+v", op)
	}
	if a := op[0].Args; a["pathname"] != "/etc/app.conf" || a["dirfd"] != "AT_FDCWD" || a["ret"] != "3" || op[0].Dur != 500 || a["errno"] != "" {
		t.Errorf("first openat %d ns %v", op[0].Dur, a)
	}
	if a := op[1].Args; a["pathname"] != "/nonexistent" || a["ret"] != "-2" || a["errno"] != "ENOENT" {
		t.Errorf("second openat %v", a)
	}
	// The fault nests inside the failing openat; the signal inside the kill.
	if pf := byName["page_fault"]; len(pf) != 1 || pf[0].Depth != 1 || pf[0].Track != byTID[exporttest.Server].UUID || pf[0].Args["addr"] != "0x4000" {
		t.Errorf("page fault %+v", pf)
	}
	gen, del := byName["signal_generate SIGTERM"], byName["signal_deliver SIGTERM"]
	if len(gen) != 1 || len(del) != 1 || gen[0].Depth != 1 || gen[0].Args["target_pid"] != "100" {
		t.Fatalf("signal %+v %+v", gen, del)
	}
	if len(gen[0].Flows) != 1 || len(del[0].Ends) != 1 || gen[0].Flows[0] != del[0].Ends[0] {
		t.Errorf("no flow from the signal to its delivery: %v → %v", gen[0].Flows, del[0].Ends)
	}
	// The waker's write carries a flow to the futex it woke, ending on it.
	wr, fx := byName["write"], byName["futex"]
	if len(wr) != 1 || len(fx) != 2 || len(wr[0].Flows) != 1 {
		t.Fatalf("write %+v futex %+v", wr, fx)
	}
	if fx[0].Args["sleep0.woken_by"] != "server(100:100)" || len(fx[0].Ends) != 1 || fx[0].Ends[0] != wr[0].Flows[0] {
		t.Errorf("woken futex %+v", fx[0])
	}
	if fx[1].Args["unfinished"] != "true" || fx[1].Dur != 19000 {
		t.Errorf("unfinished futex %+v", fx[1])
	}
	// Overlapping reads: one on the thread, two on its lane.
	rd := byName["read"]
	if len(rd) != 3 || rd[0].Track != byTID[exporttest.Client].UUID || rd[1].Track != lanes[0].UUID || rd[2].Track != lanes[0].UUID {
		t.Errorf("reads %+v", rd)
	}
	if c := byName["clone3"]; len(c) != 1 || c[0].Dur != 0 || c[0].Args["refused_by_seccomp"] != "true" || c[0].Args["errno"] != "ENOSYS" {
		t.Errorf("refused clone3 %+v", c)
	}
	if x := byName["exit"]; len(x) != 2 || x[1].Args["status"] != "killed by SIGTERM (process)" {
		t.Errorf("exits %+v", x)
	}
	if x := byName["exec"]; len(x) != 1 || x[0].Args["argv"] != "server --port 80" || x[0].Depth != 1 {
		t.Errorf("exec %+v", x)
	}
	if d := byName["lost events"]; len(d) != 1 || d[0].Args["count"] != "7" {
		t.Errorf("drops %+v", d)
	}

	// The syscall-rate counters add up to each process's calls.
	perProc := map[int64]int64{}
	for _, e := range tr.Events {
		if e.Type == "COUNTER" {
			tk := tr.Tracks[e.Track]
			if tk.Unit != "calls/s" {
				t.Fatalf("counter track %+v", tk)
			}
			perProc[tr.Tracks[tk.Parent].PID] += e.Counter
		}
	}
	bucketsPerSec := int64(1e9 / export.DefaultRateBucket.Nanoseconds())
	if perProc[exporttest.Server] != exporttest.ServerSyscalls*bucketsPerSec || perProc[exporttest.Client] != exporttest.ClientSyscalls*bucketsPerSec {
		t.Errorf("rates add up to %v", perProc)
	}
	// Times are CLOCK_MONOTONIC and say so: the trace's clock, every event's
	// clock, and a snapshot that relates it to REALTIME by the capture's
	// boot time, claiming nothing about BOOTTIME, which the capture does not
	// record.
	if tr.Clock != pftest.ClockMonotonic {
		t.Errorf("trace clock %d, want MONOTONIC (%d)", tr.Clock, pftest.ClockMonotonic)
	}
	for _, e := range tr.Events {
		if e.Clock != pftest.ClockMonotonic {
			t.Fatalf("event %d (%s) timed in clock %d, want MONOTONIC", e.Index, e.Name, e.Clock)
		}
	}
	lo, hi := tr.Events[0].TS, tr.Events[0].TS
	for _, e := range tr.Events {
		lo, hi = min(lo, e.TS), max(hi, e.TS)
	}
	mono, inSnap := tr.Clocks[pftest.ClockMonotonic]
	if len(tr.Clocks) != 2 || !inSnap || mono < lo || mono > hi ||
		tr.Clocks[pftest.ClockRealtime] != mono+1_700_000_000_000_000_000 {
		t.Errorf("clock snapshot %v, want MONOTONIC within the events (%d to %d) and REALTIME the boot time later", tr.Clocks, lo, hi)
	}
}

// Names, argument names and short values are written once each, however
// many events use them.
func TestInterning(t *testing.T) {
	many := exporttest.Source()
	once := many.Events
	many.Events = func(fn func(*event.Event) error) error {
		for i := range 100 {
			if err := once(func(e *event.Event) error {
				c := *e
				c.Time += uint64(i) * 1_000_000
				return fn(&c)
			}); err != nil {
				return err
			}
		}
		return nil
	}
	raw, st := write(t, many)
	tr, err := pftest.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	sl, err := tr.Slices()
	if err != nil {
		t.Fatal(err)
	}
	var opens int
	for _, s := range sl {
		if s.Name == "openat" && s.Args["errno"] == "ENOENT" && s.Args["pathname"] == "/nonexistent" {
			opens++
		}
	}
	if opens != 100 || st.Slices != 100*exporttest.Syscalls {
		t.Errorf("%d failed opens of 100, %d slices", opens, st.Slices)
	}
	for _, s := range []string{"openat", "pathname", "refused_by_seccomp", "/nonexistent", "ENOENT", "sleep0.woken_by"} {
		if n := bytes.Count(raw, []byte(s)); n != 1 {
			t.Errorf("%q written %d times", s, n)
		}
	}
}
