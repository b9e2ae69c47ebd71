package diff

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/event"
)

func side(by string, d time.Duration, groups map[string]Stats) *Side {
	s := NewSide("x", KindCapture, by)
	s.Duration = d
	for n, st := range groups {
		s.Group(n).Stats = st
	}
	return s
}

func row(t *testing.T, r *Result, name string) Row {
	t.Helper()
	for _, x := range r.Rows {
		if x.Name == name {
			return x
		}
	}
	t.Fatalf("no row %q in %+v", name, r.Rows)
	return Row{}
}

func TestCompareRows(t *testing.T) {
	a := side("syscall", 2*time.Second, map[string]Stats{
		"write":  {Calls: 100, TotalNS: 1000, P50NS: 10, P99NS: 20, MaxNS: 30},
		"openat": {Calls: 4, Errors: 1, TotalNS: 400, Errnos: map[string]uint64{"EACCES": 1}},
		"mmap":   {Calls: 3, TotalNS: 9000},
		"brk":    {Calls: 5, TotalNS: 50},
	})
	b := side("syscall", 4*time.Second, map[string]Stats{
		"write":  {Calls: 100, TotalNS: 1100, P50NS: 12, P99NS: 15, MaxNS: 60},
		"openat": {Calls: 7, Errors: 3, TotalNS: 700, Errnos: map[string]uint64{"ENOENT": 3}},
		"fsync":  {Calls: 100, TotalNS: 50000, MaxNS: 900},
		"brk":    {Calls: 5, TotalNS: 50},
	})
	r := Compare(a, b, 0.125)

	// Ordered by |Δ total time|: fsync +50000, mmap -9000, openat +300, write +100, brk 0.
	var names []string
	for _, x := range r.Rows {
		names = append(names, x.Name)
	}
	if got, want := strings.Join(names, " "), "fsync mmap openat write brk"; got != want {
		t.Errorf("order %q, want %q", got, want)
	}

	fs := row(t, r, "fsync")
	if fs.Status != StatusNew || fs.A != nil || fs.Delta.Calls != 100 || fs.Delta.TotalNS != 50000 || fs.Delta.P99NS != nil {
		t.Errorf("fsync: %+v", fs)
	}
	if fs.Delta.RatePerS == nil || *fs.Delta.RatePerS != 25 {
		t.Errorf("fsync Δrate %v, want 25/s (100 calls in 4 s, none in A)", fs.Delta.RatePerS)
	}
	mm := row(t, r, "mmap")
	if mm.Status != StatusVanished || mm.B != nil || mm.Delta.Calls != -3 || mm.Delta.TotalNS != -9000 {
		t.Errorf("mmap: %+v", mm)
	}

	w := row(t, r, "write")
	if w.Status != StatusSame || w.Delta.Calls != 0 || *w.Delta.P50NS != 2 || *w.Delta.P99NS != -5 || *w.Delta.MaxNS != 30 {
		t.Errorf("write: %+v", w)
	}
	// The same calls over twice the time: half the rate.
	if *w.A.RatePerS != 50 || *w.B.RatePerS != 25 || *w.Delta.RatePerS != -25 {
		t.Errorf("write rates %v → %v (Δ %v), want 50 → 25", *w.A.RatePerS, *w.B.RatePerS, *w.Delta.RatePerS)
	}

	op := row(t, r, "openat")
	if op.Status != StatusChanged || op.Delta.Calls != 3 || op.Delta.Errors != 2 {
		t.Errorf("openat: %+v", op)
	}
	if len(op.Errnos) != 2 || op.Errnos[0] != (Errno{"ENOENT", 0, 3, 3, StatusNew}) || op.Errnos[1] != (Errno{"EACCES", 1, 0, -1, StatusVanished}) {
		t.Errorf("openat errnos %+v", op.Errnos)
	}
	if br := row(t, r, "brk"); br.Status != StatusSame || len(br.Errnos) != 0 {
		t.Errorf("brk: %+v", br)
	}

	want := func(what string, got []Change, exp ...Change) {
		t.Helper()
		if len(got) != len(exp) {
			t.Errorf("%s: %+v, want %+v", what, got, exp)
			return
		}
		for i := range exp {
			if got[i] != exp[i] {
				t.Errorf("%s: %+v, want %+v", what, got, exp)
			}
		}
	}
	want("new", r.New, Change{Row: "fsync", B: 100})
	want("vanished", r.Vanished, Change{Row: "mmap", A: 3})
	want("new errnos", r.NewErrnos, Change{Row: "openat", Errno: "ENOENT", B: 3})
	want("vanished errnos", r.VanishedErrnos, Change{Row: "openat", Errno: "EACCES", A: 1})
}

// An errno whose count changes, on a row whose calls do not, changes the row.
func TestCompareErrnoCountOnly(t *testing.T) {
	a := side("syscall", 0, map[string]Stats{"read": {Calls: 10, Errors: 2, Errnos: map[string]uint64{"EAGAIN": 1, "EINTR": 1}}})
	b := side("syscall", 0, map[string]Stats{"read": {Calls: 10, Errors: 2, Errnos: map[string]uint64{"EAGAIN": 2}}})
	r := Compare(a, b, 0)
	rd := row(t, r, "read")
	if rd.Status != StatusChanged {
		t.Errorf("status %s, want changed", rd.Status)
	}
	if rd.Delta.RatePerS != nil || rd.A.RatePerS != nil {
		t.Errorf("a rate without a duration: %+v", rd)
	}
	if len(r.VanishedErrnos) != 1 || r.VanishedErrnos[0].Errno != "EINTR" || len(r.NewErrnos) != 0 {
		t.Errorf("errno changes %+v %+v", r.NewErrnos, r.VanishedErrnos)
	}
}

// Grouped by process, a change is listed once, at its syscall; a process
// that came is listed whole.
func TestCompareNested(t *testing.T) {
	mk := func(groups map[string]map[string]Stats) *Side {
		s := NewSide("x", KindCapture, "process")
		for g, scs := range groups {
			grp := s.Group(g)
			grp.Syscalls = scs
			for _, st := range scs {
				grp.Calls += st.Calls
				grp.Errors += st.Errors
				grp.TotalNS += st.TotalNS
				for e, n := range st.Errnos {
					if grp.Errnos == nil {
						grp.Errnos = map[string]uint64{}
					}
					grp.Errnos[e] += n
				}
			}
		}
		return s
	}
	a := mk(map[string]map[string]Stats{"app": {"write": {Calls: 5, TotalNS: 10}}})
	b := mk(map[string]map[string]Stats{
		"app":    {"write": {Calls: 5, TotalNS: 10}, "openat": {Calls: 1, Errors: 1, TotalNS: 5, Errnos: map[string]uint64{"ENOENT": 1}}},
		"helper": {"read": {Calls: 2, TotalNS: 3}, "openat": {Calls: 1, Errors: 1, TotalNS: 1, Errnos: map[string]uint64{"ENOENT": 1}}},
	})
	r := Compare(a, b, 0)
	app := row(t, r, "app")
	if len(app.Syscalls) != 2 || app.Syscalls[0].Name != "openat" || app.Syscalls[0].Status != StatusNew {
		t.Errorf("app's syscalls %+v", app.Syscalls)
	}
	if len(r.New) != 2 || r.New[0] != (Change{Row: "app", Syscall: "openat", B: 1}) || r.New[1] != (Change{Row: "helper", B: 3}) {
		t.Errorf("new %+v", r.New)
	}
	if len(r.NewErrnos) != 1 || r.NewErrnos[0] != (Change{Row: "app", Syscall: "openat", Errno: "ENOENT", B: 1}) {
		t.Errorf("new errnos %+v", r.NewErrnos)
	}
}

func TestPrintText(t *testing.T) {
	a := side("syscall", time.Second, map[string]Stats{"write": {Calls: 4, TotalNS: 4000}})
	b := side("syscall", time.Second, map[string]Stats{"write": {Calls: 4, TotalNS: 4000},
		"fsync": {Calls: 4, TotalNS: 8_000_000}, "openat": {Calls: 2, Errors: 2, Errnos: map[string]uint64{"ENOENT": 2}}})
	var buf bytes.Buffer
	if err := PrintText(&buf, Compare(a, b, 0.125)); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"+8.00ms", "fsync (new)", "openat (new)  [ENOENT +2 new]", "new: fsync (4 calls), openat (2 calls)",
		"new errnos: openat ENOENT (2)", "vanished: none", "within 12.5%"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	// fsync, the most time at stake, comes first.
	if strings.Index(out, "fsync (new)") > strings.Index(out, "openat (new)") {
		t.Errorf("fsync is not first:\n%s", out)
	}
	buf.Reset()
	if err := PrintJSON(&buf, Compare(a, b, 0.125)); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rows []struct {
			Name  string `json:"name"`
			A     *Stats `json:"a"`
			Delta struct {
				Calls int64 `json:"calls"`
			} `json:"delta"`
		} `json:"rows"`
		Sort string `json:"sort"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Sort != SortKey || len(doc.Rows) != 3 || doc.Rows[0].Name != "fsync" || doc.Rows[0].A != nil || doc.Rows[0].Delta.Calls != 4 {
		t.Errorf("JSON %s", buf.String())
	}
}

func write(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSniff(t *testing.T) {
	for _, c := range []struct{ content, kind string }{
		{captureMagic + "\x01\x00\x00\x00rest", KindCapture},
		{"SYSRAY", KindCapture}, // cut inside its magic: the reader says so
		{"\n  {\"by\":\"syscall\",\"rows\":[]}", KindStat},
		{"app[12];main;write_[k] 42\napp[12];main 3\n", KindFolded},
		{"root:x:0:0:root:/root:/bin/bash\n", ""},
		{"", ""},
		{"\x7fELF\x02\x01\x01\x00", ""},
	} {
		k, err := Sniff(write(t, "f", c.content))
		if k != c.kind || (c.kind == "") != (err != nil) {
			t.Errorf("Sniff(%q) = %q, %v; want %q", c.content, k, err, c.kind)
		}
	}
	if _, err := Sniff(filepath.Join(t.TempDir(), "missing")); err == nil || !os.IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
}

func TestReadStat(t *testing.T) {
	p := write(t, "s.json", `{"by":"process","drops":2,"rows":[
 {"name":"sh[10]","calls":3,"errors":1,"total_ns":30,"p50_ns":5,"p99_ns":9,"max_ns":10,"errnos":{"ENOENT":1}},
 {"name":"sh[11]","calls":2,"errors":0,"total_ns":20,"p50_ns":7,"p99_ns":8,"max_ns":12},
 {"name":"[99]","calls":1,"total_ns":1}]}`)
	s, err := ReadStat(p)
	if err != nil {
		t.Fatal(err)
	}
	sh := s.Groups["sh"]
	if s.By != "process" || s.Drops != 2 || len(s.Groups) != 2 || sh == nil || s.Groups["[99]"] == nil {
		t.Fatalf("%+v", s)
	}
	if sh.Calls != 5 || sh.Errors != 1 || sh.TotalNS != 50 || sh.P50NS != 7 || sh.P99NS != 9 || sh.MaxNS != 12 ||
		sh.Errnos["ENOENT"] != 1 || len(sh.PIDs) != 2 {
		t.Errorf("sh merged to %+v", sh)
	}
	for _, bad := range []string{`{"rows":[]}`, `{"by":"syscall"}`, `{"by":"thread","rows":[]}`, `{"by":"syscall","rows":[{"calls":1}]}`, `{"by":`} {
		if _, err := ReadStat(write(t, "b.json", bad)); err == nil {
			t.Errorf("ReadStat(%s) took it", bad)
		}
	}
}

func TestReadFolded(t *testing.T) {
	st, err := ReadFolded(write(t, "f.folded", "app[12];main;write_[k] 42\napp[13];main;write_[k] 8\nidle 5\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 || st["app;main;write_[k]"] != 50 || st["idle"] != 5 || st.Total() != 55 {
		t.Errorf("%v", st)
	}
	if _, err := ReadFolded(write(t, "g.folded", "a;b 1\nno count here\n")); err == nil || !strings.Contains(err.Error(), ":2:") {
		t.Errorf("a bad line: %v", err)
	}
}

func TestStacks(t *testing.T) {
	e := &event.Event{Kind: event.KindSyscall, PID: 7, Syscall: event.Syscall{
		Latency:   1000,
		UserStack: []event.Frame{{Name: "fsync+0x1b (libc.so.6)"}, {Name: "main+0x40 (app)"}},
		Sleeps: []event.Sleep{
			{Duration: 600, Stack: []event.Frame{{Name: "schedule+0x2"}, {Name: "io_schedule+0x10"}}},
			{Duration: 100, Preempted: true, Stack: []event.Frame{{Name: "preempt_schedule+0x1"}}},
		},
	}}
	off := Stacks{}
	if !off.AddSyscall(e, "app", "fsync", true) {
		t.Fatal("a call with stacks was not folded")
	}
	if len(off) != 2 || off["app;main (app);fsync (libc.so.6);fsync_[k];io_schedule_[k];schedule_[k]"] != 600 ||
		off["app;main (app);fsync (libc.so.6);fsync_[k];preempt_schedule_[k];[preempted]"] != 100 {
		t.Errorf("off CPU: %v", off)
	}
	on := Stacks{}
	on.AddSyscall(e, "app", "fsync", false)
	if len(on) != 1 || on["app;main (app);fsync (libc.so.6);fsync_[k]"] != 300 {
		t.Errorf("on CPU: %v", on)
	}
	bare := &event.Event{Kind: event.KindSyscall, Syscall: event.Syscall{Latency: 5}}
	if on.AddSyscall(bare, "app", "read", false) {
		t.Error("a call without stacks was folded")
	}
}

// Rows by process or container are named by what the processes and
// runtimes chose: printed, their control bytes are escaped.
func TestPrintTextEscapesNames(t *testing.T) {
	evil, esc := "\x1b[31mapp[7]", `\x1b[31mapp[7]`
	a := side("process", time.Second, map[string]Stats{evil: {Calls: 4, TotalNS: 4000}})
	b := side("process", time.Second, map[string]Stats{})
	var buf bytes.Buffer
	if err := PrintText(&buf, Compare(a, b, 0.125)); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.ContainsRune(out, 0x1b) {
		t.Fatalf("raw ESC in:\n%q", out)
	}
	for _, want := range []string{" " + esc + " (vanished)\n", "vanished: " + esc + " (4 calls)"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}
