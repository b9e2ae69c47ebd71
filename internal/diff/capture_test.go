package diff

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/session"
)

const start = 1_700_000_000_000_000_000

// dbContainer is the capture's container table (session.MetaContainers):
// pid 20, in cgroup 900, runs in container db.
const dbContainer = `[{"ID":"9f3e2d1c0b4a59687766554433221100ffeeddccbbaa99887766554433221100",` +
	`"Name":"db","Image":"postgres:16","Runtime":"docker","cgroups":[900],"pids":[20]}]`

func call(t *testing.T, at uint64, pid uint32, cg uint64, name string, lat uint64, ret int64) *event.Event {
	t.Helper()
	nr, ok := event.SyscallByName(event.HostArch(), name)
	if !ok {
		t.Fatalf("no syscall %s", name)
	}
	return &event.Event{Kind: event.KindSyscall, Time: at, PID: pid, TID: pid, Cgroup: cg,
		Syscall: event.Syscall{Nr: nr, Latency: lat, Ret: ret}}
}

// writeCapture writes a capture as record would; closed false cuts it
// short before its trailer.
func writeCapture(t *testing.T, command []string, evs []*event.Event, closed bool) string {
	t.Helper()
	h := &capture.Header{Arch: event.HostArch(), Hostname: "h", Kernel: "6.1", Start: start, Command: command,
		Procs: []proc.Info{{PID: 20, Comm: "postgres", Cgroup: 900}, {PID: 30, Comm: "web", Cgroup: 1},
			{PID: 31, Comm: "web", Cgroup: 1}, {PID: 32, Comm: "web", Cgroup: 1}},
		Meta: map[string]string{session.MetaContainers: dbContainer}}
	path := filepath.Join(t.TempDir(), "c.sysray")
	w, err := capture.Create(path, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if closed {
		err = w.Close(&capture.Trailer{Drops: []uint64{3, 4}, End: start + int64(500*time.Millisecond)})
	} else {
		err = w.Flush()
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func calls(t *testing.T) []*event.Event {
	unfinished := call(t, 5000, 32, 1, "openat", 9999, 0)
	unfinished.Syscall.Unfinished = true
	return []*event.Event{
		call(t, 1000, 20, 900, "read", 1000, 10),
		call(t, 2000, 20, 900, "read", 3000, -int64(syscall.ENOENT)),
		call(t, 3000, 30, 1, "openat", 500, -int64(syscall.EACCES)),
		call(t, 4000, 31, 1, "openat", 700, 3),
		unfinished, // neither counted nor a process that made a call
		{Kind: event.KindDrop, Time: 6000, Drop: event.Drop{Count: 7}},
	}
}

type want struct {
	calls, errors, total, max uint64
	errnos                    map[string]uint64
}

func check(t *testing.T, what string, got Stats, w want) {
	t.Helper()
	if got.Calls != w.calls || got.Errors != w.errors || got.TotalNS != w.total || got.MaxNS != w.max ||
		!maps.Equal(got.Errnos, w.errnos) {
		t.Errorf("%s: %d calls, %d errors %v, %d ns, max %d; want %d, %d %v, %d, %d", what,
			got.Calls, got.Errors, got.Errnos, got.TotalNS, got.MaxNS, w.calls, w.errors, w.errnos, w.total, w.max)
	}
}

func TestReadCaptureBySyscall(t *testing.T) {
	path := writeCapture(t, []string{"sysray", "record", "-w", "c.sysray"}, calls(t), true)
	s, st, err := ReadCapture(path, "syscall", false, false)
	if err != nil {
		t.Fatal(err)
	}
	if st != nil {
		t.Errorf("stacks %v, none asked for", st)
	}
	if s.Path != path || s.Kind != KindCapture || s.By != "syscall" {
		t.Errorf("side %q %s by %s", s.Path, s.Kind, s.By)
	}
	// The trailer's: the capture's own span, and what the kernel lost.
	if s.Duration != 500*time.Millisecond || s.Drops != 7 {
		t.Errorf("duration %v, drops %d; want 500ms and 3+4", s.Duration, s.Drops)
	}
	if got := slices.Sorted(maps.Keys(s.Groups)); !slices.Equal(got, []string{"openat", "read"}) {
		t.Fatalf("groups %v", got)
	}
	check(t, "read", s.Groups["read"].Stats, want{2, 1, 4000, 3000, map[string]uint64{"ENOENT": 1}})
	check(t, "openat", s.Groups["openat"].Stats, want{2, 1, 1200, 700, map[string]uint64{"EACCES": 1}})
	for name, g := range s.Groups {
		if g.Syscalls != nil || g.PIDs != nil {
			t.Errorf("%s: by syscall, yet syscalls %v, pids %v", name, g.Syscalls, g.PIDs)
		}
	}
}

func TestReadCaptureByProcess(t *testing.T) {
	path := writeCapture(t, nil, calls(t), true)
	s, _, err := ReadCapture(path, "process", false, false)
	if err != nil {
		t.Fatal(err)
	}
	// Named by comm alone, so that runs match: pids 30 and 31 are one row.
	if got := slices.Sorted(maps.Keys(s.Groups)); !slices.Equal(got, []string{"postgres", "web"}) {
		t.Fatalf("groups %v", got)
	}
	pg, web := s.Groups["postgres"], s.Groups["web"]
	check(t, "postgres", pg.Stats, want{2, 1, 4000, 3000, map[string]uint64{"ENOENT": 1}})
	check(t, "web", web.Stats, want{2, 1, 1200, 700, map[string]uint64{"EACCES": 1}})
	check(t, "postgres read", pg.Syscalls["read"], want{2, 1, 4000, 3000, map[string]uint64{"ENOENT": 1}})
	check(t, "web openat", web.Syscalls["openat"], want{2, 1, 1200, 700, map[string]uint64{"EACCES": 1}})
	if len(pg.Syscalls) != 1 || len(web.Syscalls) != 1 {
		t.Errorf("syscalls %v and %v", pg.Syscalls, web.Syscalls)
	}
	// 32 only died inside a call.
	if !slices.Equal(pg.PIDs, []uint32{20}) || !slices.Equal(web.PIDs, []uint32{30, 31}) {
		t.Errorf("pids %v and %v; want [20] and [30 31]", pg.PIDs, web.PIDs)
	}
}

func TestReadCaptureByContainer(t *testing.T) {
	path := writeCapture(t, nil, calls(t), true)
	s, _, err := ReadCapture(path, "container", false, false)
	if err != nil {
		t.Fatal(err)
	}
	const db = "db (image postgres:16)"
	if got := slices.Sorted(maps.Keys(s.Groups)); !slices.Equal(got, []string{db, "host"}) {
		t.Fatalf("groups %v", got)
	}
	check(t, db, s.Groups[db].Stats, want{2, 1, 4000, 3000, map[string]uint64{"ENOENT": 1}})
	check(t, "host", s.Groups["host"].Stats, want{2, 1, 1200, 700, map[string]uint64{"EACCES": 1}})
	check(t, "host openat", s.Groups["host"].Syscalls["openat"], want{2, 1, 1200, 700, map[string]uint64{"EACCES": 1}})
	if s.Groups[db].PIDs != nil {
		t.Errorf("pids %v by container", s.Groups[db].PIDs)
	}
}

// A capture cut short has no trailer: it lasted as long as its events
// span, to the end of the last call (even one that never returned).
func TestReadCaptureCutShort(t *testing.T) {
	path := writeCapture(t, nil, calls(t), false)
	s, _, err := ReadCapture(path, "syscall", false, false)
	if err != nil {
		t.Fatal(err)
	}
	if s.Duration != time.Duration(5000+9999-1000) || s.Drops != 0 {
		t.Errorf("duration %v, drops %d; want %v and 0", s.Duration, s.Drops, time.Duration(5000+9999-1000))
	}
	check(t, "read", s.Groups["read"].Stats, want{2, 1, 4000, 3000, map[string]uint64{"ENOENT": 1}})
}

func TestReadCaptureStacks(t *testing.T) {
	slow := call(t, 1000, 30, 1, "nanosleep", 1000, 0)
	slow.Syscall.UserStack = []event.Frame{{Addr: 0x401010, Name: "work+0x1d"}, {Addr: 0x400100, Name: "main+0x10"}}
	slow.Syscall.Sleeps = []event.Sleep{{Duration: 400, Count: 1,
		Stack: []event.Frame{{Name: "schedule+0x5"}, {Name: "do_nanosleep+0x20"}}}}
	evs := append(calls(t), slow)
	path := writeCapture(t, []string{"sysray", "record", "--stacks", "-w", "c.sysray"}, evs, true)

	_, on, err := ReadCapture(path, "syscall", true, false)
	if err != nil {
		t.Fatal(err)
	}
	// On CPU: its latency less its sleeps, under process, caller, syscall.
	if w := (Stacks{"web;main;work;nanosleep_[k]": 600}); !maps.Equal(on, w) {
		t.Errorf("on CPU %v, want %v", on, w)
	}
	_, off, err := ReadCapture(path, "syscall", true, true)
	if err != nil {
		t.Fatal(err)
	}
	if w := (Stacks{"web;main;work;nanosleep_[k];do_nanosleep_[k];schedule_[k]": 400}); !maps.Equal(off, w) {
		t.Errorf("off CPU %v, want %v", off, w)
	}
}

// Stacks asked of a capture without any: an error, unless it was recorded
// with --stacks and no call was slow enough to keep one.
func TestReadCaptureNoStacks(t *testing.T) {
	path := writeCapture(t, []string{"sysray", "record", "-w", "c.sysray", "--", "app", "--stacks"}, calls(t), true)
	_, _, err := ReadCapture(path, "syscall", true, false)
	if err == nil || !strings.Contains(err.Error(), path+" has no stacks: only sysray record --stacks keeps them") {
		t.Errorf("err %v", err)
	}
	path = writeCapture(t, []string{"sysray", "record", "--stacks=true", "-w", "c.sysray"}, calls(t), true)
	s, st, err := ReadCapture(path, "syscall", true, true)
	if err != nil {
		t.Fatal(err)
	}
	if st == nil || st.Total() != 0 || s.Groups["read"] == nil {
		t.Errorf("stacks %v, groups %v", st, s.Groups)
	}
}

func TestReadCaptureBadInput(t *testing.T) {
	path := writeCapture(t, nil, calls(t), true)
	if _, _, err := ReadCapture(path, "thread", false, false); err == nil || !strings.Contains(err.Error(), "thread") {
		t.Errorf("by thread: err %v", err)
	}
	missing := filepath.Join(t.TempDir(), "none.sysray")
	_, _, err := ReadCapture(missing, "syscall", false, false)
	if err == nil || !strings.HasPrefix(err.Error(), missing+": ") || !errors.Is(err, syscall.ENOENT) {
		t.Errorf("missing file: err %v", err)
	}
	if _, _, err := ReadCapture(writeNotCapture(t), "syscall", false, false); err == nil {
		t.Error("a file that is no capture read as one")
	}
}

func writeNotCapture(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "x.sysray")
	if err := os.WriteFile(path, []byte("SYSRAY\x89\nnot a header"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRecordedWithStacks(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want bool
	}{
		{[]string{"sysray", "record", "--stacks", "-w", "x"}, true},
		{[]string{"sysray", "record", "--stacks=true", "-w", "x"}, true},
		{[]string{"sysray", "record", "--stacks=false", "-w", "x"}, false},
		{[]string{"sysray", "record", "-w", "x", "--", "app", "--stacks"}, false}, // the command's own flag
		{[]string{"sysray", "record", "-w", "x"}, false},
		{nil, false},
	} {
		if got := recordedWithStacks(tc.argv); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.argv, got, tc.want)
		}
	}
}
