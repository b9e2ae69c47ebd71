package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/export/perfetto/pftest"
	"github.com/sysray/sysray/internal/host"
)

// exportRun records one shell running programs whose behaviour is known
// exactly, and returns the capture and what sysray read makes of it.
func exportRun(t *testing.T) (file, created string, truth []record) {
	t.Helper()
	dir := t.TempDir()
	file = filepath.Join(dir, "run.sysray")
	created = filepath.Join(dir, "created.txt")
	script := strings.Join([]string{prog("getppid") + " 500", prog("openat") + " " + created, prog("segv"), prog("exit7")}, "; ")
	r := run(t, "record", "--stacks", "--slow", "100us", "-w", file, "--", "/bin/sh", "-c", script)
	if r.code != 7 {
		t.Fatalf("record: exit %d, want exit7's 7: %s", r.code, r.stderr)
	}
	rd := run(t, "read", "--json", file)
	if rd.code != 0 {
		t.Fatalf("read: %s", rd.stderr)
	}
	return file, created, parseJSON(t, rd.stdout)
}

// procOf maps each process of the capture to the program it ran last.
func procOf(truth []record) map[uint32]string {
	m := map[uint32]string{}
	for _, e := range truth {
		if e.Exec != nil {
			m[e.PID] = filepath.Base(e.Exec.Filename)
		}
	}
	return m
}

func TestExportPerfetto(t *testing.T) {
	requireBPF(t)
	before := host.Mono()
	file, created, truth := exportRun(t)
	after := host.Mono()
	out := filepath.Join(t.TempDir(), "run.pftrace")
	os.WriteFile(out, []byte("old"), 0o644) // an existing world-readable file
	r := run(t, "export", "--format", "perfetto", "-r", file, "-o", out)
	if r.code != 0 {
		t.Fatalf("export: exit %d: %s", r.code, r.stderr)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("output mode: %v %v", st.Mode(), err)
	}
	raw, _ := os.ReadFile(out)
	tr, err := pftest.Decode(raw)
	if err != nil {
		t.Fatalf("Perfetto's schema does not read the export: %v", err)
	}
	sl, err := tr.Slices()
	if err != nil {
		t.Fatalf("slices do not nest: %v", err)
	}

	// The times are CLOCK_MONOTONIC, taken while the run ran, and the trace
	// says so: its own clock and every packet's are MONOTONIC, related to
	// REALTIME by the capture's boot time and to nothing it does not record.
	c, err := capture.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	boot := c.Header().BootTime
	c.Close()
	if tr.Clock != pftest.ClockMonotonic {
		t.Errorf("the trace's clock is %d, want MONOTONIC", tr.Clock)
	}
	for _, e := range tr.Events {
		if e.Clock != pftest.ClockMonotonic {
			t.Fatalf("event %d (%s) is timed in clock %d, want MONOTONIC", e.Index, e.Name, e.Clock)
		}
	}
	mono, ok := tr.Clocks[pftest.ClockMonotonic]
	if _, boottime := tr.Clocks[pftest.ClockBoottime]; !ok || boottime || int64(tr.Clocks[pftest.ClockRealtime]-mono) != boot {
		t.Errorf("clock snapshot %v, want MONOTONIC and REALTIME %d ns apart (the capture's boot time), no BOOTTIME", tr.Clocks, boot)
	}
	for _, s := range sl {
		if s.Cat == "syscall" && (s.TS < before || s.TS+s.Dur > after) {
			t.Fatalf("%s at %d..%d, outside the run's CLOCK_MONOTONIC %d..%d", s.Name, s.TS, s.TS+s.Dur, before, after)
		}
	}

	// Ground truth from the capture: syscalls per process, and the programs.
	progOf := procOf(truth)
	pidOf := map[string]uint32{}
	for pid, p := range progOf {
		pidOf[p] = pid
	}
	calls := map[uint32]int{}
	var total int
	for _, e := range truth {
		if e.Type == "syscall" || e.Syscall != nil {
			calls[e.PID]++
			total++
		}
	}

	// Tracks: a process per program, named for it, threads under them.
	procTrack := map[uint64]*pftest.Track{}
	threadsOf := map[int64]int{}
	for _, tk := range tr.Tracks {
		if tk.IsProcess {
			procTrack[tk.UUID] = tk
		}
	}
	for _, tk := range tr.Tracks {
		if tk.IsThread {
			p := procTrack[tk.Parent]
			if p == nil || p.PID != tk.PID {
				t.Errorf("thread %d is not under its process: %+v", tk.TID, tk)
				continue
			}
			threadsOf[p.PID]++
		}
	}
	for _, p := range []string{"getppid", "openat", "segv", "exit7"} {
		pid := pidOf[p]
		var found bool
		for _, tk := range procTrack {
			if tk.PID == int64(pid) {
				found = true
				if tk.ProcessName != p {
					t.Errorf("process %d named %q, want %q", pid, tk.ProcessName, p)
				}
			}
		}
		if !found {
			t.Errorf("no process track for %s (%d)", p, pid)
		}
	}
	if n := threadsOf[int64(pidOf["exit7"])]; n != 4 {
		t.Errorf("exit7 has %d thread tracks, want 4 (main and three workers)", n)
	}

	// One slice per syscall, exactly, on the right process.
	trackPID := func(uuid uint64) int64 {
		for tk := tr.Tracks[uuid]; tk != nil; tk = tr.Tracks[tk.Parent] {
			if tk.IsThread || tk.IsProcess {
				return tk.PID
			}
		}
		return -1
	}
	got := map[int64]int{}
	var slicesTotal, getppid int
	var opened, failed, exits bool
	byUUID := map[uint64]*pftest.Track{}
	for uuid, tk := range tr.Tracks {
		byUUID[uuid] = tk
	}
	flowFrom := map[uint64]pftest.Slice{}
	for _, s := range sl {
		for _, id := range s.Flows {
			flowFrom[id] = s
		}
	}
	var joins int
	for _, s := range sl {
		pid := trackPID(s.Track)
		if s.Cat == "syscall" {
			slicesTotal++
			got[pid]++
		}
		switch {
		case s.Name == "getppid" && pid == int64(pidOf["getppid"]):
			getppid++
		case s.Name == "openat" && s.Args["pathname"] == created:
			opened = s.Args["ret"] != "" && !strings.HasPrefix(s.Args["ret"], "-") && s.Args["flags"] == "O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC"
		case s.Name == "openat" && s.Args["pathname"] == "/nonexistent/sysray":
			failed = s.Args["errno"] == "ENOENT" && s.Args["ret"] == "-2"
		case s.Name == "exit" && pid == int64(pidOf["exit7"]) && s.Args["group_dead"] == "true":
			exits = s.Args["code"] == "7" && s.Args["status"] == "status=7 (process)"
		case s.Name == "futex" && pid == int64(pidOf["exit7"]) && strings.HasPrefix(s.Args["sleep0.woken_by"], "exit7("):
			// pthread_join, woken by the worker it waited for, in its exit.
			waker := strings.TrimSuffix(s.Args["sleep0.woken_by"][strings.Index(s.Args["sleep0.woken_by"], ":")+1:], ")")
			if len(s.Ends) != 1 {
				t.Errorf("join woken by %s has flows %v", waker, s.Ends)
				continue
			}
			src := byUUID[flowFrom[s.Ends[0]].Track]
			if src == nil || strconv.FormatInt(src.TID, 10) != waker {
				t.Errorf("join woken by %s: its flow comes from %+v", waker, src)
			}
			joins++
		}
	}
	t.Logf("%d syscall slices, %d syscalls, %d getppid, %d joins, %d processes, %d tracks", slicesTotal, total, getppid, joins, len(calls), len(tr.Tracks))
	if slicesTotal != total {
		t.Errorf("%d syscall slices, the capture has %d syscalls", slicesTotal, total)
	}
	for pid, n := range calls {
		if got[int64(pid)] != n {
			t.Errorf("process %d (%s): %d slices, %d syscalls", pid, progOf[pid], got[int64(pid)], n)
		}
	}
	if getppid != 500 {
		t.Errorf("%d getppid slices, want 500", getppid)
	}
	if !opened || !failed || !exits {
		t.Errorf("openat %s %v, failed openat %v, exit 7 %v", created, opened, failed, exits)
	}
	if joins < 2 {
		t.Errorf("%d joins with a wakeup flow from their worker, want 2 or 3", joins)
	}
	// The segv program's child dies of SIGSEGV: generated, delivered,
	// linked by a flow, fatal. It is the only SIGSEGV of the run.
	var gen, del []pftest.Slice
	var killed bool
	for _, s := range sl {
		switch {
		case s.Name == "signal_generate SIGSEGV":
			gen = append(gen, s)
		case s.Name == "signal_deliver SIGSEGV":
			del = append(del, s)
		case s.Name == "exit" && s.Args["status"] == "killed by SIGSEGV (process)":
			killed = true
		}
	}
	if len(gen) != 1 || len(del) != 1 || len(gen[0].Flows) != 1 || len(del[0].Ends) != 1 || gen[0].Flows[0] != del[0].Ends[0] || !killed {
		t.Fatalf("SIGSEGV: generated %+v, delivered %+v, killed %v", gen, del, killed)
	}
	child := trackPID(gen[0].Track)
	if child == int64(pidOf["segv"]) || gen[0].Args["addr"] != "0x10" || gen[0].Args["code"] != "SEGV_MAPERR" {
		t.Errorf("SIGSEGV in process %d (the parent is %d): %v", child, pidOf["segv"], gen[0].Args)
	}
	var fault bool
	for _, s := range sl {
		if s.Name == "page_fault" && trackPID(s.Track) == child && s.Args["addr"] == "0x10" && s.TS <= gen[0].TS {
			fault = true
		}
	}
	if !fault {
		t.Error("no page fault at 0x10 before the SIGSEGV")
	}
}

func TestExportChromeJSON(t *testing.T) {
	requireBPF(t)
	file, _, truth := exportRun(t)
	out := filepath.Join(t.TempDir(), "run.json")
	r := run(t, "export", "--format", "chrome-json", "-r", file, "-o", out)
	if r.code != 0 {
		t.Fatalf("export: exit %d: %s", r.code, r.stderr)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("output mode: %v %v", st.Mode(), err)
	}
	raw, _ := os.ReadFile(out)
	var doc struct {
		TraceEvents []struct {
			Ph   string         `json:"ph"`
			Name string         `json:"name"`
			Cat  string         `json:"cat"`
			PID  uint32         `json:"pid"`
			TID  uint64         `json:"tid"`
			ID   uint64         `json:"id"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	progOf := procOf(truth)
	var total, getppid int
	for _, e := range truth {
		if e.Syscall != nil {
			total++
		}
	}
	names := map[uint32]string{}
	flows := map[uint64]int{}
	var slices int
	var failed bool
	for _, e := range doc.TraceEvents {
		switch {
		case e.Ph == "M" && e.Name == "process_name":
			names[e.PID] = e.Args["name"].(string)
		case e.Cat == "syscall":
			slices++
			if e.Name == "getppid" && progOf[e.PID] == "getppid" {
				getppid++
			}
			if e.Name == "openat" && e.Args["pathname"] == "/nonexistent/sysray" {
				failed = e.Args["errno"] == "ENOENT"
			}
		case e.Ph == "s":
			flows[e.ID]++
		case e.Ph == "f":
			flows[e.ID] += 10
		}
	}
	if slices != total || getppid != 500 || !failed {
		t.Errorf("%d syscall events for %d syscalls, %d getppid (want 500), failed openat %v", slices, total, getppid, failed)
	}
	for pid, p := range progOf {
		if names[pid] != p {
			t.Errorf("process %d named %q, want %q", pid, names[pid], p)
		}
	}
	var linked int
	for id, n := range flows {
		if n == 11 {
			linked++
		} else if n != 1 { // a flow may leave and never arrive (an ignored signal), never the reverse
			t.Errorf("flow %d: %d departures and %d arrivals", id, n%10, n/10)
		}
	}
	if linked < 3 { // two joins and the SIGSEGV
		t.Errorf("%d complete flows", linked)
	}
}

func TestExportBadInput(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	notCapture := filepath.Join(dir, "passwd")
	os.WriteFile(notCapture, []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-r", filepath.Join(dir, "missing"), "-o", out}, "no such file"},
		{[]string{"-r", notCapture, "-o", out}, "not a sysray capture"},
		{[]string{"--format", "svg", "-r", notCapture, "-o", out}, `unknown format "svg"`},
		{[]string{"-o", out}, "-r FILE"},
		{[]string{"-r", notCapture}, "-o FILE"},
	} {
		r := run(t, append([]string{"export"}, c.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "panic") {
			t.Errorf("export %v: exit %d, stderr %q, want %q", c.args, r.code, r.stderr, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("export %v left %s behind", c.args, out)
			os.Remove(out)
		}
	}
	// Exporting a capture over itself is refused before anything is written.
	file := filepath.Join(dir, "c.sysray")
	w, err := capture.Create(file, &capture.Header{Arch: event.ArchAMD64})
	if err != nil {
		t.Fatal(err)
	}
	w.Close(&capture.Trailer{})
	before, _ := os.ReadFile(file)
	r := run(t, "export", "-r", file, "-o", filepath.Join(dir, ".", "c.sysray"))
	after, _ := os.ReadFile(file)
	if r.code == 0 || !strings.Contains(r.stderr, "is also an input of this command") || !bytes.Equal(before, after) {
		t.Errorf("export over its capture: exit %d, stderr %q, capture kept %v", r.code, r.stderr, bytes.Equal(before, after))
	}
}

// A capture cut short exports what it holds up to its last whole block, with
// the warning sysray read gives. No BPF needed: the capture is written here.
func TestExportTruncated(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.sysray")
	w, err := capture.Create(file, &capture.Header{Arch: event.ArchAMD64})
	if err != nil {
		t.Fatal(err)
	}
	const blocks, per = 3, 1000
	var ends [blocks]int64 // file size after each block
	for b := range blocks {
		for i := range per {
			e := event.Event{Kind: event.KindSyscall, Time: uint64(1_000_000 + (b*per+i)*1000), PID: 42, TID: 42, Comm: "loop"}
			e.Syscall.Nr, e.Syscall.Latency, e.Syscall.Ret = 110, 300, 1 // getppid
			if err := w.Write(&e); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		ends[b] = st.Size()
	}
	if err := w.Close(&capture.Trailer{}); err != nil {
		t.Fatal(err)
	}
	whole, _ := os.ReadFile(file)
	for _, c := range []struct {
		cut   int
		calls int
	}{{len(whole), blocks * per}, {len(whole) - 10, blocks * per}, {int(ends[1]+ends[2]) / 2, 2 * per}} {
		cut := filepath.Join(dir, "cut.sysray")
		os.WriteFile(cut, whole[:c.cut], 0o600)
		out := filepath.Join(dir, "cut.pftrace")
		r := run(t, "export", "-r", cut, "-o", out)
		if r.code != 0 {
			t.Fatalf("export of %d bytes: exit %d: %s", c.cut, r.code, r.stderr)
		}
		if truncated := c.cut < len(whole); truncated != strings.Contains(r.stderr, "truncated") || strings.Count(r.stderr, "truncated") > 1 {
			t.Errorf("export of %d of %d bytes: stderr %q", c.cut, len(whole), r.stderr)
		}
		raw, _ := os.ReadFile(out)
		tr, err := pftest.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		sl, err := tr.Slices()
		if err != nil {
			t.Fatal(err)
		}
		var n int
		for _, s := range sl {
			if s.Name == "getppid" && s.Dur == 300 && s.Args["ret"] == "1" {
				n++
			}
		}
		if n != c.calls {
			t.Errorf("export of %d bytes: %d getppid slices, want %d", c.cut, n, c.calls)
		}
	}
}
