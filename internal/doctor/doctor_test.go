package doctor

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/stat"
)

const (
	nrMmap   = 9
	nrOpenat = 257
	nrClone  = 56
)

var host = Host{Arch: event.ArchAMD64, Kernel: "test", VsyscallMode: "xonly"}

func sys(tid uint32, t uint64, nr uint32, ret int64, lat uint64, args ...uint64) event.Event {
	e := event.Event{Kind: event.KindSyscall, Time: t, PID: tid, TID: tid, Comm: "prog"}
	e.Syscall.Nr, e.Syscall.Ret, e.Syscall.Latency = nr, ret, lat
	copy(e.Syscall.Args[:], args)
	return e
}

func findings(evs []event.Event) []Finding {
	d := New(host, nil)
	for i := range evs {
		d.Observe(&evs[i])
	}
	return checked(d.Report()).Findings
}

func byID(fs []Finding, id ID) *Finding {
	for i := range fs {
		if fs[i].ID == id {
			return &fs[i]
		}
	}
	return nil
}

const (
	protRW      = 3
	mapPrivAnon = 0x22
	map32bit    = 0x40
	enomem      = -12
)

func TestRetryMAP32BIT(t *testing.T) {
	var evs []event.Event
	tm := uint64(1e9)
	for i := range 50 {
		tm += 10000
		evs = append(evs, sys(7, tm, nrMmap, enomem, 3000, 0, 1<<20, protRW, mapPrivAnon|map32bit, ^uint64(0), 0))
		tm += 10000
		evs = append(evs, sys(7, tm, nrMmap, 0x7f0000000000+int64(i)<<20, 2000, 0, 1<<20, protRW, mapPrivAnon, ^uint64(0), 0))
	}
	f := byID(findings(evs), "failed-syscall-retry")
	if f == nil {
		t.Fatal("no failed-syscall-retry finding")
	}
	if f.Severity != Warning || f.Evidence["count"] != uint64(50) || f.Evidence["errno"] != "ENOMEM" {
		t.Errorf("finding %+v", f)
	}
	if r := f.Evidence["flags_removed"].([]string); len(r) != 1 || r[0] != "MAP_32BIT" {
		t.Errorf("flags removed %v", r)
	}
	if !strings.Contains(f.Fix, "MAP_STACK") {
		t.Errorf("fix does not mention MAP_STACK: %s", f.Fix)
	}
}

// A path search fails on one path and tries the next: not a retry.
func TestPathSearchIsNotARetry(t *testing.T) {
	var evs []event.Event
	tm := uint64(1e9)
	for i := range 100 {
		tm += 10000
		evs = append(evs, sys(7, tm, nrOpenat, -2, 1000, ^uint64(99), uint64(0x1000+i*64), 0))
		tm += 10000
		evs = append(evs, sys(7, tm, nrOpenat, 3, 1000, ^uint64(99), uint64(0x8000+i*64), 0))
	}
	if f := byID(findings(evs), "failed-syscall-retry"); f != nil {
		t.Errorf("a path search reported as a retry: %+v", f)
	}
}

func TestFatalSegvNullPage(t *testing.T) {
	evs := []event.Event{
		sys(9, 100, nrOpenat, 3, 1000, ^uint64(99), 0x1000, 0),
		{Kind: event.KindPageFault, Time: 200, PID: 9, TID: 9, Comm: "crash", Fault: event.Fault{Addr: 0x10, IP: 0x401000, Error: 6}},
		{Kind: event.KindSignalGenerate, Time: 210, PID: 9, TID: 9, Comm: "crash",
			Signal: event.Signal{Sig: 11, Code: 1, Addr: 0x10, SenderPID: 9, TargetPID: 9, TargetTID: 9}},
		{Kind: event.KindExit, Time: 300, PID: 9, TID: 9, Comm: "crash", Proc: event.Proc{ExitCode: 11, GroupDead: true}},
	}
	f := byID(findings(evs), "fatal-signal")
	if f == nil || f.Severity != Critical {
		t.Fatalf("finding %+v", f)
	}
	if f.Evidence["address_is"] != whatIs(&event.Fault{Addr: 0x10, Error: 6}, 11, 0) || !strings.Contains(f.Evidence["address_is"].(string), "NULL") {
		t.Errorf("address_is %v", f.Evidence["address_is"])
	}
	if f.Evidence["si_code"] != "SEGV_MAPERR" || f.Evidence["exit_status"] != 139 {
		t.Errorf("evidence %+v", f.Evidence)
	}
	if last := f.Evidence["last_syscalls"].([]string); len(last) != 1 || !strings.HasPrefix(last[0], "openat(") {
		t.Errorf("last syscalls %v", last)
	}
}

// A kill sent by another process (the user's kill, a supervisor) is no failure.
func TestKillByAnotherProcessIsInfo(t *testing.T) {
	evs := []event.Event{
		{Kind: event.KindSignalGenerate, Time: 210, PID: 5, TID: 5, Comm: "kill",
			Signal: event.Signal{Sig: 15, SenderPID: 5, TargetPID: 9, TargetTID: 9}},
		{Kind: event.KindExit, Time: 300, PID: 9, TID: 9, Comm: "srv", Proc: event.Proc{ExitCode: 15, GroupDead: true}},
	}
	f := byID(findings(evs), "fatal-signal")
	if f == nil || f.Severity != Info {
		t.Fatalf("finding %+v", f)
	}
}

// A kernel thread's exit code is its function's return: audit's reply
// thread returning -EINTR ends with 0xfffffffc, whose low byte reads as
// "signal 124, core dumped". No signal is named so; no death is told.
func TestKernelThreadReturnIsNoDeath(t *testing.T) {
	evs := []event.Event{
		{Kind: event.KindExit, Time: 300, PID: 9, TID: 9, Comm: "audit_send_repl", Proc: event.Proc{ExitCode: -4, GroupDead: true}},
	}
	if f := byID(findings(evs), "fatal-signal"); f != nil {
		t.Fatalf("a kernel thread's -EINTR is a death: %s", f.Title)
	}
}

// poolClones is a process that starts n threads, one clone each: clone i
// (evs[2i+1]) comes after its thread i and takes lat(i).
func poolClones(n int, lat func(i int) uint64) []event.Event {
	var evs []event.Event
	tm := uint64(1e9)
	for i := range n {
		tm += 100000
		evs = append(evs, event.Event{Kind: event.KindFork, Time: tm, PID: 3, TID: 3, Comm: "pool",
			Proc: event.Proc{ChildPID: 3, ChildTID: uint32(100 + i), Thread: true}})
		evs = append(evs, sys(3, tm+1000, nrClone, int64(100+i), lat(i)))
	}
	return evs
}

func TestGrowthWithThreads(t *testing.T) {
	// clone latency = 20 µs + 1 µs per thread, with some noise
	evs := poolClones(400, func(i int) uint64 { return uint64(20000 + 1000*i + (i%7)*300) })
	f := byID(findings(evs), "latency-grows-with-count")
	if f == nil {
		t.Fatal("no latency-grows-with-count finding")
	}
	if f.Evidence["grows_with"] != "threads" || strings.Contains(f.Title, "mappings") {
		t.Errorf("grows with %v: %s", f.Evidence["grows_with"], f.Title)
	}
	if s := f.Evidence["slope_ns_per_unit"].(float64); s < 800 || s > 1200 {
		t.Errorf("slope %.0f ns per thread, want about 1000", s)
	}
}

// map32's shape: every thread brings a stack mapping and a guard, so threads
// and mappings grow in step, and a fork every 100 threads copies them all.
// The fit cannot tell the two apart, and must say both rather than pick
// one by noise (picking threads gave the thread-pool fix for a fork).
func TestGrowthTogetherNamesBoth(t *testing.T) {
	const nrClone3 = 435
	var evs []event.Event
	tm := uint64(1e9)
	for i := range 3000 {
		tm += 50_000
		maps := uint32(212 + 2*i)
		c := sys(3, tm, nrClone3, int64(100+i), 45_000+uint64(i%5)*1000)
		c.Syscall.Maps = maps
		evs = append(evs, c, event.Event{Kind: event.KindFork, Time: tm + 1, PID: 3, TID: 3, Comm: "prog",
			Proc: event.Proc{ChildPID: 3, ChildTID: uint32(100 + i), Thread: true}})
		if i%100 == 99 {
			f := sys(3, tm+2, nrClone, int64(9000+i), 300_000+2_500*uint64(maps)+uint64(i%3)*40_000, 17 /* SIGCHLD */)
			f.Syscall.Maps = maps + 2
			evs = append(evs, f)
		}
	}
	fs := findings(evs)
	f := byID(fs, "latency-grows-with-count")
	if f == nil {
		t.Fatalf("no growth finding in %+v", fs)
	}
	if f.Evidence["syscall"] != "clone" {
		t.Fatalf("growth in %v, want clone (clone3's latency is flat)", f.Evidence["syscall"])
	}
	for _, w := range []string{"threads", "memory mappings", "grew together", "posix_spawn", "fewer threads"} {
		if !strings.Contains(f.Title+" "+f.Summary+" "+f.Fix, w) {
			t.Errorf("no %q in %s / %s / %s", w, f.Title, f.Summary, f.Fix)
		}
	}
	if also := f.Evidence["fits_as_well"].([]string); len(also) != 1 {
		t.Errorf("fits as well: %v", also)
	}
}

func TestFlatLatencyDoesNotGrow(t *testing.T) {
	evs := poolClones(400, func(i int) uint64 { return uint64(200000 + (i%13)*5000) })
	if f := byID(findings(evs), "latency-grows-with-count"); f != nil {
		t.Errorf("flat latency reported as growing: %+v", f)
	}
}

func TestBinnedFit(t *testing.T) {
	var pts []point
	for x := range 1000 {
		y := 5 + 2*float64(x)
		if x%50 == 0 {
			y += 100000 // outliers must not move a fit through medians
		}
		pts = append(pts, point{x: float64(x), y: y})
	}
	a, b, r2, _ := binnedFit(pts)
	if b < 1.9 || b > 2.1 || r2 < 0.99 || a < -50 || a > 60 {
		t.Errorf("fit a=%.1f b=%.2f r2=%.3f", a, b, r2)
	}
}

func TestExecFailure(t *testing.T) {
	const nrExecve = 59
	enoent := int64(-2)
	failedRun := []event.Event{
		sys(20, 100, nrExecve, enoent, 5000, 0x1000),
		{Kind: event.KindExit, Time: 200, PID: 20, TID: 20, Comm: "sh", Proc: event.Proc{ExitCode: 127 << 8, GroupDead: true}},
	}
	f := byID(findings(failedRun), "exec-failure")
	if f == nil || f.Severity != Warning {
		t.Fatalf("finding %+v", f)
	}
	// A $PATH search: two misses, then the program runs.
	search := []event.Event{
		sys(21, 100, nrExecve, enoent, 5000, 0x1000),
		sys(21, 110, nrExecve, enoent, 5000, 0x2000),
		{Kind: event.KindExec, Time: 120, PID: 21, TID: 21, Comm: "ls"},
		sys(21, 120, nrExecve, 0, 5000, 0x3000),
		{Kind: event.KindExit, Time: 200, PID: 21, TID: 21, Comm: "ls", Proc: event.Proc{ExitCode: 2 << 8, GroupDead: true}},
	}
	if f := byID(findings(search), "exec-failure"); f != nil {
		t.Errorf("a PATH search that found its program reported: %+v", f)
	}
}

// The kernel's list of a thread's last calls is shown with arguments where
// the same call also came as an event.
func TestRecentList(t *testing.T) {
	var r ring
	open := sys(1, 200, nrOpenat, 3, 10)
	open.Syscall.Args[0] = uint64(0xffffff9c) // AT_FDCWD
	open.Syscall.Data[1] = []byte("/etc/hosts")
	r.add(&open.Syscall, open.Time)
	got := recentList(host.Arch, []event.RecentCall{
		{Time: 100, Nr: nrMmap, Ret: -12},
		{Time: 200, Nr: nrOpenat, Ret: 3},
	}, &r)
	if len(got) != 2 || got[0] != "mmap(…) = -1 ENOMEM (Cannot allocate memory)" || !strings.Contains(got[1], `"/etc/hosts"`) {
		t.Fatalf("recent list %q", got)
	}
}

// SIGPIPE from writing to stdout after the reader left is a pipeline's
// normal end; from writing to a socket it is a server bug.
func TestSIGPIPE(t *testing.T) {
	const nrWrite = 1
	for fd, want := range map[uint64]Severity{1: Info, 5: Warning} {
		write := sys(9, 100, nrWrite, -32, 1000, fd, 0x1000, 4096)
		evs := []event.Event{
			write,
			{Kind: event.KindSignalGenerate, Time: 150, PID: 9, TID: 9, Signal: event.Signal{Sig: 13, TargetPID: 9, TargetTID: 9}},
			{Kind: event.KindExit, Time: 200, PID: 9, TID: 9, Comm: "yes", Proc: event.Proc{ExitCode: 13, GroupDead: true}},
		}
		f := byID(findings(evs), "fatal-signal")
		if f == nil || f.Severity != want {
			t.Fatalf("fd %d: finding %+v, want severity %v", fd, f, want)
		}
	}
}

// Live, a thread's last syscall events are staged per CPU and may arrive
// after its exit event: the EPIPE write that explains a SIGPIPE still
// counts (the benign corpus once saw `find | head` as a warning).
func TestSIGPIPEWriteAfterExit(t *testing.T) {
	const nrWrite = 1
	evs := []event.Event{
		{Kind: event.KindSignalGenerate, Time: 150, PID: 9, TID: 9, Signal: event.Signal{Sig: 13, TargetPID: 9, TargetTID: 9}},
		{Kind: event.KindExit, Time: 200, PID: 9, TID: 9, Comm: "find", Proc: event.Proc{ExitCode: 13, GroupDead: true,
			Recent: []event.RecentCall{{Time: 100, Nr: nrWrite, Ret: -32, Latency: 1000}}}},
		sys(9, 100, nrWrite, -32, 1000, 1, 0x1000, 4096),
	}
	f := byID(findings(evs), "fatal-signal")
	if f == nil || f.Severity != Info {
		t.Fatalf("finding %+v, want info", f)
	}
	if l := f.Evidence["last_syscalls"].([]string); len(l) != 1 || !strings.HasPrefix(l[0], "write(1,") {
		t.Errorf("last syscalls %q lack the write's arguments", l)
	}
}

// A process that started fine and then execs a missing program in place
// (a shell's `exec "$@"`) and exits 127 could not run its program; the
// failure's event may come after the exit's.
func TestExecFailureInPlace(t *testing.T) {
	const nrExecve = 59
	evs := []event.Event{
		{Kind: event.KindExec, Time: 100, PID: 30, TID: 30, Comm: "sh"},
		sys(30, 100, nrExecve, 0, 5000, 0x1000),
		{Kind: event.KindExit, Time: 300, PID: 30, TID: 30, Comm: "sh", Proc: event.Proc{ExitCode: 127 << 8, GroupDead: true}},
		sys(30, 200, nrExecve, -2, 5000, 0x2000),
	}
	f := byID(findings(evs), "exec-failure")
	if f == nil || f.Severity != Warning || !strings.Contains(f.Summary, "ENOENT") {
		t.Fatalf("finding %+v", f)
	}
}

// O_CREAT|O_EXCL fails with EEXIST, then a plain open of the same path:
// the modes differ (the retry's is whatever the register held), which the
// kernel ignores without O_CREAT. A retry all the same.
func TestRetryExclusiveCreate(t *testing.T) {
	var evs []event.Event
	tm := uint64(1e9)
	for range 30 {
		tm += 10000
		evs = append(evs, sys(8, tm, nrOpenat, -17, 3000, ^uint64(99), 0x1000, 0o100|0o200|1, 0o644))
		tm += 10000
		evs = append(evs, sys(8, tm, nrOpenat, 3, 2000, ^uint64(99), 0x1000, 1, 0))
	}
	f := byID(findings(evs), "failed-syscall-retry")
	if f == nil || f.Evidence["errno"] != "EEXIST" {
		t.Fatalf("finding %+v", f)
	}
	if r := strings.Join(f.Evidence["flags_removed"].([]string), "|"); !strings.Contains(r, "O_CREAT") || !strings.Contains(r, "O_EXCL") {
		t.Errorf("flags removed %q", r)
	}
}

// A poller failing all of its 20,000 stats next to a sibling whose 60,000
// succeed: the storm is the poller's (the rule once summed every process's
// calls and stayed silent). The sibling's success hides nothing.
func TestErrorStormBusyNeighbour(t *testing.T) {
	const nrNewfstatat = 262
	d := New(host, nil)
	for i := range 20000 {
		e := sys(40, uint64(1e9+i*1000), nrNewfstatat, -2, 1000)
		d.Observe(&e)
	}
	d.Counts([]stat.Cell{{Key: stat.Key{PID: 40, Nr: nrNewfstatat}, Count: 20000},
		{Key: stat.Key{PID: 41, Nr: nrNewfstatat}, Count: 60000}})
	f := byID(checked(d.Report()).Findings, "error-storm")
	if f == nil || f.Evidence["failures"] != uint64(20000) || f.Evidence["calls"] != uint64(20000) {
		t.Fatalf("finding %+v", f)
	}
}

// A thread divides by zero: SIGFPE from the CPU, named by its si_code at
// its instruction; the thread's last page fault (a new stack's) is not it.
func TestSIGFPE(t *testing.T) {
	evs := []event.Event{
		{Kind: event.KindPageFault, Time: 100, PID: 50, TID: 51, Fault: event.Fault{Addr: 0x7f0000001000, IP: 0x401000, Error: 6}},
		{Kind: event.KindSignalGenerate, Time: 150, PID: 50, TID: 51, Signal: event.Signal{Sig: 8, Code: 1, SenderPID: 50,
			TargetPID: 50, TargetTID: 51, Addr: 0x401234}},
		{Kind: event.KindExit, Time: 200, PID: 50, TID: 51, Comm: "calc", Proc: event.Proc{ExitCode: 8, GroupDead: true}},
	}
	f := byID(findings(evs), "fatal-signal")
	if f == nil || f.Severity != Critical || !strings.Contains(f.Summary, "divide by zero") || f.Evidence["fault_ip"] != "0x401234" {
		t.Fatalf("finding %+v", f)
	}
	if _, ok := f.Evidence["fault_addr"]; ok {
		t.Errorf("an unrelated page fault was taken for the cause: %v", f.Evidence)
	}
}

func frames(names ...string) []event.Frame {
	var fs []event.Frame
	for _, n := range names {
		fs = append(fs, event.Frame{Name: n})
	}
	return fs
}

// Slow calls as the sleep tracking sees them: a vfork parent waiting for
// its child is waiting by design; a read that never switched out ran on the
// CPU (64 MiB of /dev/urandom), once the report knows tracking was on; a
// stack taken inside the tracepoint is named past its frames.
func TestSlowClassification(t *testing.T) {
	const nrRead, nrFsync = 0, 74
	vfork := sys(60, 100, nrClone, 61, 150_000_000, 0x4111)
	vfork.Syscall.Sleeps = []event.Sleep{{Duration: 149_000_000, Stack: frames("__traceiter_sched_switch+0x41", "__schedule",
		"schedule", "schedule_timeout", "__wait_for_common", "wait_for_completion_state", "kernel_clone", "__do_sys_clone")}}
	fsync := sys(60, 200, nrFsync, 0, 1_200_000_000, 3)
	fsync.Syscall.Sleeps = []event.Sleep{{Duration: 1_190_000_000, Stack: frames("__traceiter_sched_switch+0x41", "__schedule",
		"schedule", "io_schedule", "folio_wait_bit", "folio_wait_writeback")}}
	read := sys(60, 300, nrRead, 64<<20, 210_000_000, 3, 0x1000, 64<<20)
	fs := findings([]event.Event{vfork, fsync, read})
	var titles []string
	for _, f := range fs {
		if f.ID == "slow-syscall" {
			titles = append(titles, f.Title)
			// The storage device's latency, however long, is not the program's doing.
			if strings.Contains(f.Title, "fsync") && f.Severity != Info {
				t.Errorf("a 1.2 s wait for the storage device is %s, want info", f.Severity)
			}
		}
	}
	got := strings.Join(titles, "\n")
	if strings.Contains(got, "clone") {
		t.Errorf("a vfork wait reported as slow:\n%s", got)
	}
	if !strings.Contains(got, "slow fsync, up to 1.20s, waiting for the storage device in folio_wait_bit ← folio_wait_writeback") {
		t.Errorf("fsync not named past the tracepoint's frames:\n%s", got)
	}
	if !strings.Contains(got, "1 slow read, up to 210.00ms, running in the kernel") {
		t.Errorf("a read that never switched out is not running:\n%s", got)
	}
}

// A futex wait interrupted by a signal (Go's preemption) is emitted from
// the thread's next call, without its sleeps: still a wait, not a call
// running 190 ms in the kernel.
func TestSlowInterruptedWait(t *testing.T) {
	const nrFutex, nrRead = 202, 0
	fut := sys(70, 100, nrFutex, -512, 190_000_000, 0x1000, 0x80, 0)
	sleepy := sys(70, 300, nrRead, 10, 20_000_000, 3, 0x1000, 10)
	sleepy.Syscall.Sleeps = []event.Sleep{{Duration: 5_000_000, Stack: frames("__schedule", "schedule", "pipe_read")}}
	for _, f := range findings([]event.Event{fut, sleepy}) {
		if f.ID == "slow-syscall" && strings.Contains(f.Title, "futex") {
			t.Errorf("interrupted futex wait reported: %s", f.Title)
		}
	}
}

// A finding carries the processes its text names, with their containers;
// a number list in its evidence is not a process.
func TestFindingsNameTheirContainers(t *testing.T) {
	h := host
	h.Container = func(pid uint32, cg uint64) string {
		if cg == 77 {
			return "web"
		}
		return ""
	}
	d := New(h, nil)
	// Two processes die of SIGSEGV, one in a container.
	for _, pid := range []uint32{12, 40} {
		e := event.Event{Kind: event.KindSignalDeliver, Time: uint64(pid), PID: pid, TID: pid, Comm: "crash", Cgroup: uint64(pid) / 40 * 77,
			Signal: event.Signal{Sig: 11, Code: 1, Addr: 0x10, TargetPID: pid, TargetTID: pid}}
		d.Observe(&e)
		x := event.Event{Kind: event.KindExit, Time: uint64(pid) + 1, PID: pid, TID: pid, Comm: "crash", Cgroup: e.Cgroup,
			Proc: event.Proc{ExitCode: 11, GroupDead: true}}
		d.Observe(&x)
	}
	fs := checked(d.Report()).Findings
	for _, f := range fs {
		t.Logf("%s %q containers %v procs %v", f.ID, f.Title, f.Containers, f.Procs)
	}
	var byPID = map[uint32]Finding{}
	for _, f := range fs {
		for _, p := range f.Procs {
			byPID[p.PID] = f
		}
	}
	if f, ok := byPID[40]; !ok || len(f.Containers) != 1 || f.Containers[0] != "web" {
		t.Errorf("the crash in container web: %+v", fs)
	}
	if f, ok := byPID[12]; !ok || len(f.Containers) != 0 || len(f.Procs) != 1 || f.Procs[0].Cgroup != 0 {
		t.Errorf("the crash on the host: %+v", fs)
	}
}

// Kernel symbols hidden from the reader (no CAP_SYSLOG): a timed futex
// wait's sleep has a stack of addresses without names. That stack cannot
// tell a wait from a stall, so the call is judged as one without a stack
// (futex waits by design), not reported as 71 slow futex.
func TestSlowUnnamedStackIsNoStack(t *testing.T) {
	const nrFutex = 202
	var evs []event.Event
	for i := range 71 {
		e := sys(80, uint64(100+i), nrFutex, -110, 850_000_000, 0x1000, 0x80, 0)
		e.Syscall.Sleeps = []event.Sleep{{Duration: 849_000_000, Stack: []event.Frame{{Addr: 0xffffffff81000000}, {Addr: 0xffffffff81000100}}}}
		evs = append(evs, e)
	}
	for _, f := range findings(evs) {
		if f.ID == "slow-syscall" {
			t.Errorf("futex waits with unnamed stacks reported: %s", f.Title)
		}
	}
}

// A doctor whose caller keeps the process table (a session) only reads it.
func TestProcsKeptByCaller(t *testing.T) {
	exec := &event.Event{Kind: event.KindExec, PID: 40, TID: 40, Comm: "srv", Proc: event.Proc{Argv: []string{"srv", "-v"}}}
	for _, kept := range []bool{false, true} {
		procs := proc.NewTable(nil)
		d := New(host, procs)
		if kept {
			d.ProcsKeptByCaller()
		}
		d.Observe(exec)
		if _, ok := procs.Get(40); ok == kept {
			t.Errorf("kept by caller %v: the doctor updated the table: %v", kept, ok)
		}
	}
}

// Ended processes' counts summed under pid 0 (stat.KeptMax) reach no
// detector: each counts per process.
func TestAttributed(t *testing.T) {
	cells := []stat.Cell{{Key: stat.Key{PID: 0, Nr: 1}, Count: 9}, {Key: stat.Key{PID: 5, Nr: 1}, Count: 2}}
	got := attributed(cells)
	if len(got) != 1 || got[0].PID != 5 || len(cells) != 2 || cells[0].PID != 0 {
		t.Errorf("attributed(%v) = %v, want pid 5's cell alone, the input intact", cells, got)
	}
}
