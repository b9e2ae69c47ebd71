package doctor

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/event"
)

// fakeFS is a host's files as the tests set them, changed between events
// as the kernel's counters would be.
type fakeFS map[string]string

func (f fakeFS) ReadFile(path string) ([]byte, error) {
	if s, ok := f[path]; ok {
		return []byte(s), nil
	}
	return nil, errors.New("no such file")
}

func (f fakeFS) ReadDir(dir string) ([]string, error) {
	seen := map[string]bool{}
	for p := range f {
		if rest, ok := strings.CutPrefix(p, dir+"/"); ok {
			name, _, _ := strings.Cut(rest, "/")
			seen[name] = true
		}
	}
	var names []string
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

func (f fakeFS) remove(prefix string) {
	for p := range f {
		if strings.HasPrefix(p, prefix) {
			delete(f, p)
		}
	}
}

const (
	cgWrite  = 1
	cgClone3 = 435
	ms       = 1_000_000
)

// cgFindings runs the detector alone over events, with fs as the host; a
// step may change fs before its event.
type cgStep struct {
	before func()
	tick   bool // the watch's clock ticks after before
	e      event.Event
}

func cgRun(fs fakeFS, live bool, steps []cgStep) []Finding {
	c := newCgroupLimit(event.ArchAMD64, live, nil)
	c.fs = fs
	c.watchEvery = 0 // the steps change fs: the watch reads it only when a step ticks it
	for i := range steps {
		if steps[i].before != nil {
			steps[i].before()
		}
		if steps[i].tick && c.watch != nil {
			c.watch.tick()
		}
		c.Observe(&steps[i].e)
	}
	return c.Findings(&Env{Host: Host{Arch: event.ArchAMD64, Live: live}})
}

func at(e event.Event) cgStep { return cgStep{e: e} }

func rootProc(pid string, fs fakeFS) {
	fs["/proc/"+pid+"/limits"] = "Limit                     Soft Limit           Hard Limit           Units\n" +
		"Max processes             96365                96365                processes\n"
	fs["/proc/"+pid+"/status"] = "Name:\tprog\nUid:\t0\t0\t0\t0\nThreads:\t1\n"
	fs["/proc/sys/kernel/threads-max"] = "192730\n"
	fs["/proc/loadavg"] = "0.10 0.20 0.30 2/163 4242\n"
}

// A fork bomb in a v1 pids cgroup: EAGAIN while pids.events max grows.
func TestCgroupPidsMax(t *testing.T) {
	fs := fakeFS{
		"/proc/7/cgroup":                       "8:pids:/ctr\n4:memory:/\n1:cpu:/\n0::/\n",
		"/sys/fs/cgroup/pids/ctr/pids.max":     "16\n",
		"/sys/fs/cgroup/pids/ctr/pids.current": "3\n",
		"/sys/fs/cgroup/pids/ctr/pids.events":  "max 2\n",
	}
	rootProc("7", fs)
	full := func() {
		fs["/sys/fs/cgroup/pids/ctr/pids.current"] = "16\n"
		fs["/sys/fs/cgroup/pids/ctr/pids.events"] = "max 7\n"
	}
	steps := []cgStep{at(sys(7, 1*ms, nrClone, 8, 50_000, 0x1200011))}
	for i := 0; i < 5; i++ {
		s := at(sys(7, uint64(200+i*5)*ms, nrClone, eagain, 30_000, 0x1200011))
		if i == 0 {
			s.before = full
		}
		steps = append(steps, s)
	}
	fs2 := cgRun(fs, true, steps)
	if len(fs2) != 1 {
		t.Fatalf("want 1 finding, got %+v", fs2)
	}
	f := fs2[0]
	if f.Severity != Warning || f.Title != "5 clone call(s) failed with EAGAIN: the cgroup /sys/fs/cgroup/pids/ctr is at its pids.max (16)" {
		t.Errorf("got %s %q", f.Severity, f.Title)
	}
	for _, w := range []string{"allows 16 tasks (pids.max) and held 16", "7 refusals (max), 5 of them during this run",
		"the user is root, whom RLIMIT_NPROC does not limit", "163 tasks of kernel.threads-max 192730"} {
		if !strings.Contains(f.Summary, w) {
			t.Errorf("summary lacks %q:\n%s", w, f.Summary)
		}
	}
	if f.Evidence["pids.events_max_during_run"] != int64(5) || f.Evidence["count"] != uint64(5) {
		t.Errorf("evidence %v", f.Evidence)
	}
}

// The same errno from the other two limits, and from none the facts show.
func TestCgroupForkOtherLimits(t *testing.T) {
	user := func(fs fakeFS, nproc string) {
		fs["/proc/7/cgroup"] = "0::/user.slice\n"
		fs["/sys/fs/cgroup/user.slice/pids.max"] = "max\n"
		fs["/sys/fs/cgroup/user.slice/pids.current"] = "40\n"
		fs["/sys/fs/cgroup/user.slice/pids.events"] = "max 0\n"
		fs["/proc/7/limits"] = "Max processes             " + nproc + "                " + nproc + "                processes\n"
		fs["/proc/7/status"] = "Uid:\t1000\t1000\t1000\t1000\nThreads:\t6\n"
		fs["/proc/8/status"] = "Uid:\t1000\t1000\t1000\t1000\nThreads:\t4\n"
		fs["/proc/9/status"] = "Uid:\t0\t0\t0\t0\nThreads:\t30\n"
		fs["/proc/sys/kernel/threads-max"] = "1000\n"
		fs["/proc/loadavg"] = "0.10 0.20 0.30 2/163 4242\n"
	}
	// Three failures: past a probe and its fallback.
	fail := []cgStep{at(sys(7, 1*ms, cgClone3, eagain, 30_000)), at(sys(7, 6*ms, cgClone3, eagain, 30_000)),
		at(sys(7, 11*ms, cgClone3, eagain, 30_000))}

	fs := fakeFS{}
	user(fs, "10")
	fs["/etc/passwd"] = "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\n"
	fs["/proc/meminfo"] = "MemTotal:       32000000 kB\nMemAvailable:   20971520 kB\n"
	f := byID(cgRun(fs, true, fail), "cgroup-limit")
	if f == nil || f.Severity != Warning || f.Title != "3 clone3 call(s) failed with EAGAIN: the user's RLIMIT_NPROC (10) is reached, not a cgroup limit" {
		t.Fatalf("RLIMIT_NPROC: %+v", f)
	}
	for _, w := range []string{`"Resource temporarily unavailable"`, "uid 1000 (alice) runs 10 tasks (threads included)",
		"soft RLIMIT_NPROC of the process is 10 (hard 10)", "per user, not per process or cgroup", "other programs' included",
		"20480.0 MiB of memory available", "no cgroup of the process sets pids.max"} {
		if !strings.Contains(f.Summary, w) {
			t.Errorf("summary lacks %q:\n%s", w, f.Summary)
		}
	}
	for _, w := range []string{"`ulimit -u 64`", "`ulimit -H -u 64`", "LimitNPROC=64", "`alice soft nproc 64`", "/etc/security/limits.conf"} {
		if !strings.Contains(f.Fix, w) {
			t.Errorf("fix lacks %q:\n%s", w, f.Fix)
		}
	}
	if f.Evidence["user_tasks"] != int64(10) || f.Evidence["rlimit_nproc"] != int64(10) || f.Evidence["user"] != "alice" {
		t.Errorf("evidence %v", f.Evidence)
	}

	// One failure and the program carries on: a probe it handled, info.
	f = byID(cgRun(fs, true, fail[:1]), "cgroup-limit")
	if f == nil || f.Severity != Info || !strings.Contains(f.Summary, "Handled") {
		t.Errorf("one failure, handled: %+v", f)
	}
	// One failure and an exit 1: it gave up, a warning.
	gaveUp := append(fail[:1:1], at(event.Event{Kind: event.KindExit, Time: 2 * ms, PID: 7, TID: 7, Comm: "prog",
		Proc: event.Proc{ExitCode: 1 << 8, GroupDead: true}}))
	f = byID(cgRun(fs, true, gaveUp), "cgroup-limit")
	if f == nil || f.Severity != Warning || !strings.Contains(f.Summary, "1 of the processes gave up") {
		t.Errorf("one failure, then exit 1: %+v", f)
	}
	// Gone before its limits were read: unknown, not unlimited.
	delete(fs, "/proc/7/limits")
	f = byID(cgRun(fs, true, gaveUp), "cgroup-limit")
	if f == nil || f.Severity != Info || !strings.Contains(f.Summary, "ended before its RLIMIT_NPROC could be read") ||
		strings.Contains(f.Summary, "unlimited") || f.Evidence["rlimit_nproc"] != nil {
		t.Errorf("limits unread: %+v", f)
	}

	fs = fakeFS{}
	user(fs, "unlimited")
	fs["/proc/loadavg"] = "0.10 0.20 0.30 2/1000 4242\n"
	f = byID(cgRun(fs, true, fail), "cgroup-limit")
	if f == nil || f.Severity != Warning || !strings.Contains(f.Title, "the host is at kernel.threads-max (1000)") {
		t.Errorf("threads-max: %+v", f)
	}

	fs = fakeFS{}
	user(fs, "100")
	f = byID(cgRun(fs, true, fail), "cgroup-limit")
	if f == nil || f.Severity != Info || f.Title != "3 clone3 call(s) failed with EAGAIN" || !strings.Contains(f.Summary, "kernel.pid_max") {
		t.Errorf("no limit reached: %+v", f)
	}

	// From a capture: nothing is read, so nothing is known.
	f = byID(cgRun(fakeFS{}, false, fail), "cgroup-limit")
	if f == nil || f.Severity != Info || !strings.Contains(f.Summary, "read only live") {
		t.Errorf("offline: %+v", f)
	}
}

var reclaimStack = frames("__traceiter_sched_switch+0x41", "__schedule+0x618", "schedule+0x23", "schedule_timeout+0x77",
	"reclaim_throttle+0x184", "shrink_lruvec+0xc84", "shrink_node+0x2ff", "do_try_to_free_pages+0xbd",
	"try_to_free_mem_cgroup_pages+0x101", "try_charge_memcg+0x1b0", "charge_memcg+0x2f", "__mem_cgroup_charge+0x2c",
	"filemap_add_folio+0x7a", "__filemap_get_folio+0x1d9", "ext4_da_write_begin+0xde", "generic_perform_write+0x9e",
	"vfs_write+0x22f", "ksys_write+0x66")

func reclaimWrite(tid uint32, t, lat, slept uint64) event.Event {
	e := sys(tid, t, cgWrite, 1<<20, lat, 3, 0x4c2420, 1<<20)
	e.Syscall.Sleeps = []event.Sleep{{Duration: slept, Count: 3, Stack: reclaimStack}}
	return e
}

// Writes asleep in reclaim under a v2 parent's memory.max, named by the
// parent's memory.events; slow-syscall leaves them to cgroup-limit.
func TestCgroupMemoryMax(t *testing.T) {
	fs := fakeFS{
		"/proc/7/cgroup":                        "0::/ctr/app\n",
		"/sys/fs/cgroup/ctr/app/memory.max":     "max\n",
		"/sys/fs/cgroup/ctr/app/memory.high":    "max\n",
		"/sys/fs/cgroup/ctr/app/memory.current": "60000000\n",
		"/sys/fs/cgroup/ctr/app/memory.events":  "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
		"/sys/fs/cgroup/ctr/memory.max":         "67108864\n",
		"/sys/fs/cgroup/ctr/memory.high":        "max\n",
		"/sys/fs/cgroup/ctr/memory.current":     "60000000\n",
		"/sys/fs/cgroup/ctr/memory.events":      "low 0\nhigh 0\nmax 3\noom 0\noom_kill 0\n",
	}
	steps := []cgStep{
		at(sys(7, 1*ms, nrOpenat, 3, 20_000)),
		{before: func() {
			fs["/sys/fs/cgroup/ctr/memory.events"] = "low 0\nhigh 0\nmax 43\noom 0\noom_kill 0\n"
			fs["/sys/fs/cgroup/ctr/memory.current"] = "67100000\n"
		}, e: reclaimWrite(7, 300*ms, 150*ms, 140*ms)},
		at(reclaimWrite(7, 500*ms, 30*ms, 25*ms)),
	}
	got := cgRun(fs, true, steps)
	if len(got) != 1 {
		t.Fatalf("want 1 finding, got %+v", got)
	}
	f := got[0]
	if f.Severity != Warning || f.Title != "2 write call(s) slept 165.00ms in memory-cgroup reclaim: /sys/fs/cgroup/ctr is at its memory limit" {
		t.Errorf("got %s %q", f.Severity, f.Title)
	}
	if !strings.Contains(f.Summary, "memory.events during this run: high 0, max 40, oom 0 (in all: high 0, max 43, oom 0)") ||
		!strings.Contains(f.Summary, "memory.high is max and memory.max 64.0 MiB") {
		t.Errorf("summary: %s", f.Summary)
	}
	if st, _ := f.Evidence["stack"].([]string); len(st) == 0 || st[0] != "__schedule+0x618" {
		t.Errorf("stack not past the tracepoint: %v", f.Evidence["stack"])
	}

	// The whole doctor: the calls are cgroup-limit's, not slow-syscall's.
	all := findings([]event.Event{reclaimWrite(7, 300*ms, 150*ms, 140*ms)})
	if byID(all, "slow-syscall") != nil {
		t.Errorf("slow-syscall reports memcg reclaim too: %+v", all)
	}
	if f := byID(all, "cgroup-limit"); f == nil || f.Severity != Warning ||
		f.Title != "1 write call(s) slept 140.00ms in memory-cgroup reclaim: a memory cgroup is at its memory limit" {
		t.Errorf("offline: %+v", f)
	}
}

// Short reclaim sleeps are info; a call mostly waiting for the disk keeps
// slow-syscall's name; a write to memory.reclaim asked for its reclaim.
func TestCgroupMemoryNotWarned(t *testing.T) {
	short := findings([]event.Event{reclaimWrite(7, 300*ms, 30*ms, 25*ms), reclaimWrite(7, 400*ms, 20*ms, 15*ms)})
	if f := byID(short, "cgroup-limit"); f == nil || f.Severity != Info {
		t.Errorf("40 ms of reclaim: %+v", f)
	}

	disk := reclaimWrite(7, 300*ms, 250*ms, 12*ms)
	disk.Syscall.Sleeps = append(disk.Syscall.Sleeps, event.Sleep{Duration: 230 * ms, Stack: frames("__schedule", "schedule",
		"io_schedule", "folio_wait_bit_common", "filemap_get_pages", "filemap_read")})
	got := findings([]event.Event{disk})
	if byID(got, "cgroup-limit") != nil || byID(got, "slow-syscall") == nil {
		t.Errorf("a wait mostly for the device: %+v", got)
	}

	asked := sys(7, 300*ms, cgWrite, 3, 200*ms, 3, 0x1000, 3)
	asked.Syscall.Sleeps = []event.Sleep{{Duration: 190 * ms, Stack: frames("__schedule", "schedule", "schedule_timeout",
		"reclaim_throttle", "shrink_node", "do_try_to_free_pages", "try_to_free_mem_cgroup_pages", "memory_reclaim",
		"kernfs_fop_write_iter", "vfs_write")}}
	if got := findings([]event.Event{asked}); byID(got, "cgroup-limit") != nil {
		t.Errorf("a write to memory.reclaim is no limit reached: %+v", got)
	}
}

func pass(tid uint32, t, dur uint64, nr int32, stack []event.Frame) event.Event {
	return event.Event{Kind: event.KindReclaim, Time: t, PID: tid, TID: tid, Comm: "prog",
		Reclaim: event.Reclaim{Duration: dur, Pages: 32, Nr: nr, Stack: stack}}
}

var passStack = frames("__traceiter_mm_vmscan_memcg_reclaim_end+0x3b", "try_to_free_mem_cgroup_pages+0x1c3",
	"try_charge_memcg+0x1b0", "charge_memcg+0x2f", "__mem_cgroup_charge+0x2c", "filemap_add_folio+0x7a",
	"__filemap_get_folio+0x1d9", "ext4_da_write_begin+0xde", "generic_perform_write+0x9e", "vfs_write+0x22f")

// A cgroup at its v1 limit hit by many short reclaims, none making a call
// slow enough to carry its sleeps: the kernel's timing of each pass adds
// up to the stall, whichever call (or fault) charged the memory.
func TestCgroupMemoryManyShortPasses(t *testing.T) {
	fs := fakeFS{
		"/proc/7/cgroup": "4:memory:/ctr\n0::/\n",
		"/sys/fs/cgroup/memory/ctr/memory.limit_in_bytes": "33554432\n",
		"/sys/fs/cgroup/memory/ctr/memory.usage_in_bytes": "33000000\n",
		"/sys/fs/cgroup/memory/ctr/memory.failcnt":        "100\n",
		"/sys/fs/cgroup/memory/ctr/memory.oom_control":    "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
	}
	var steps []cgStep
	for i := range uint64(300) {
		nr := int32(cgWrite)
		if i%3 == 0 {
			nr = -1
		}
		steps = append(steps, at(pass(7, 1*ms+i*ms, 500_000, nr, passStack)))
	}
	steps[150].before = func() { fs["/sys/fs/cgroup/memory/ctr/memory.failcnt"] = "2915\n" }
	got := cgRun(fs, true, steps)
	if len(got) != 1 {
		t.Fatalf("want 1 finding, got %+v", got)
	}
	f := got[0]
	want := "write, page faults outside syscalls spent 150.00ms in memory-cgroup reclaim (300 passes): /sys/fs/cgroup/memory/ctr is at its memory limit"
	if f.Severity != Warning || f.Title != want {
		t.Errorf("got %s %q, want warning %q", f.Severity, f.Title, want)
	}
	if !strings.Contains(f.Summary, "write (100.00ms), page faults outside syscalls (50.00ms)") ||
		!strings.Contains(f.Summary, "the limit was hit 2815 times during this run (memory.failcnt)") {
		t.Errorf("summary: %s", f.Summary)
	}
	if st, _ := f.Evidence["reclaim_stack"].([]string); len(st) == 0 || st[0] != "try_to_free_mem_cgroup_pages+0x1c3" {
		t.Errorf("reclaim stack not past the tracepoint: %v", f.Evidence["reclaim_stack"])
	}

	// Twenty such passes are 10 ms: noticed, not a stall.
	few := findings([]event.Event{pass(7, 1*ms, 500_000, cgWrite, passStack), pass(7, 2*ms, 9_500_000, -1, passStack)})
	if f := byID(few, "cgroup-limit"); f == nil || f.Severity != Info {
		t.Errorf("10 ms of reclaim: %+v", f)
	}
	// A write to memory.reclaim asked for it.
	asked := frames("try_to_free_mem_cgroup_pages+0x1c3", "memory_reclaim+0xa0", "kernfs_fop_write_iter+0x13f", "vfs_write+0x22f")
	if got := findings([]event.Event{pass(7, 1*ms, 400*ms, cgWrite, asked)}); byID(got, "cgroup-limit") != nil {
		t.Errorf("a write to memory.reclaim is no limit reached: %+v", got)
	}
}

func cpuFS(stat string) fakeFS {
	return fakeFS{
		"/proc/7/cgroup": "1:cpu,cpuacct:/kubepods/pod1\n0::/\n",
		"/proc/8/cgroup": "1:cpu,cpuacct:/kubepods/pod1\n0::/\n",
		"/sys/fs/cgroup/cpu/kubepods/pod1/cpu.cfs_quota_us":  "10000\n",
		"/sys/fs/cgroup/cpu/kubepods/pod1/cpu.cfs_period_us": "100000\n",
		"/sys/fs/cgroup/cpu/kubepods/pod1/cpu.stat":          stat,
		"/sys/fs/cgroup/cpu/kubepods/cpu.cfs_quota_us":       "-1\n",
		"/sys/fs/cgroup/cpu/kubepods/cpu.cfs_period_us":      "100000\n",
		"/sys/fs/cgroup/cpu/kubepods/cpu.stat":               "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
	}
}

// A v1 CPU quota throttling two processes; the cgroup is gone by report
// time, so the last read during the run stands.
func TestCgroupCPUThrottled(t *testing.T) {
	fs := cpuFS("nr_periods 10\nnr_throttled 2\nthrottled_time 90000000\n")
	queued := sys(8, 400*ms, 0, 1<<20, 95*ms, 3, 0x1000, 1<<20)
	queued.Syscall.Sleeps = []event.Sleep{{Duration: 90 * ms, Preempted: true, Stack: frames("__schedule", "preempt_schedule_irq")}}
	steps := []cgStep{
		at(sys(7, 1*ms, 0, 10, 20_000)),
		at(sys(8, 2*ms, 0, 10, 20_000)),
		{before: func() {
			fs["/sys/fs/cgroup/cpu/kubepods/pod1/cpu.stat"] = "nr_periods 30\nnr_throttled 20\nthrottled_time 1590000000\n"
		}, e: queued},
		{before: func() { fs.remove("/sys/fs/cgroup/cpu/kubepods/pod1/") }, e: sys(7, 900*ms, 0, 10, 20_000)},
	}
	got := cgRun(fs, true, steps)
	if len(got) != 1 {
		t.Fatalf("want 1 finding, got %+v", got)
	}
	f := got[0]
	if f.Severity != Warning ||
		f.Title != "The cgroup /sys/fs/cgroup/cpu/kubepods/pod1 was CPU-throttled for 1.50s during the run (cpu.cfs_quota_us 10000 per cpu.cfs_period_us 100000)" {
		t.Errorf("got %s %q", f.Severity, f.Title)
	}
	for _, w := range []string{"may use 0.10 CPU", "in 18 of 20 periods", "Traced in it: prog[7]; prog[8]",
		"1 traced syscall(s) spent most of their time, 90.00ms in all, preempted"} {
		if !strings.Contains(f.Summary, w) {
			t.Errorf("summary lacks %q:\n%s", w, f.Summary)
		}
	}
}

// The CI case: a spinner under a quota makes no event after its first
// (its calls are too fast to be events, and a throttled task is stopped
// outside any call), and its cgroup is removed as the command ends. The
// watch's read on its clock, between, holds the throttling.
func TestCgroupCPUThrottledWithoutEvents(t *testing.T) {
	fs := cpuFS("nr_periods 10\nnr_throttled 2\nthrottled_time 90000000\n")
	steps := []cgStep{
		at(sys(7, 1*ms, 0, 10, 20_000)),
		// No event of the process: only the watch's clock.
		{tick: true, before: func() {
			fs["/sys/fs/cgroup/cpu/kubepods/pod1/cpu.stat"] = "nr_periods 30\nnr_throttled 20\nthrottled_time 1590000000\n"
		}, e: event.Event{Kind: event.KindSyscall, Time: 2 * ms, PID: 99, TID: 99, Comm: "other"}},
		{before: func() { fs.remove("/sys/fs/cgroup/cpu/kubepods/pod1/") }, e: event.Event{Kind: event.KindSyscall, Time: 3 * ms, PID: 99, TID: 99, Comm: "other"}},
	}
	got := cgRun(fs, true, steps)
	if len(got) != 1 || !strings.Contains(got[0].Title, "was CPU-throttled for 1.50s") || !strings.Contains(got[0].Summary, "in 18 of 20 periods") {
		t.Fatalf("want the throttling the watch read: %+v", got)
	}
}

// The watch on its own clock, over real files: it reads until the cgroup
// is gone, then stops by itself; close after that returns at once.
func TestCPUWatchClock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cg")
	os.Mkdir(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "cpu.max"), []byte("10000 100000\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "cpu.stat"), []byte("usage_usec 5\nnr_periods 7\nnr_throttled 6\nthrottled_usec 500000\n"), 0o644)
	w := newWatch(10*time.Millisecond, nil)
	w.add(dir, func() (map[string]int64, bool) { return cgSnapshot(hostFS{}, dir, ctlCPU, false) })
	deadline := time.Now().Add(5 * time.Second)
	for w.latest(dir) == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s := w.latest(dir); s["stat.nr_throttled"] != 6 || s["quota"] != 10000 || s["period"] != 100000 {
		t.Fatalf("read %v", s)
	}
	os.RemoveAll(dir)
	for {
		w.mu.Lock()
		running := w.running
		w.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watch did not stop once its cgroup was gone")
		}
		time.Sleep(5 * time.Millisecond)
	}
	w.close()
	if s := w.latest(dir); s["stat.nr_throttled"] != 6 {
		t.Errorf("the last read went with the cgroup: %v", s)
	}
}

// Throttling that did not grow during the run, or grew by little, and
// limits nobody reached: no warning.
func TestCgroupCPUQuiet(t *testing.T) {
	before := "nr_periods 10\nnr_throttled 8\nthrottled_time 700000000\n"
	fs := cpuFS(before)
	steps := []cgStep{at(sys(7, 1*ms, 0, 10, 20_000)), at(sys(7, 500*ms, 0, 10, 20_000))}
	if got := cgRun(fs, true, steps); len(got) != 0 {
		t.Errorf("throttled only before the run: %+v", got)
	}

	fs = cpuFS(before)
	steps[1].before = func() {
		fs["/sys/fs/cgroup/cpu/kubepods/pod1/cpu.stat"] = "nr_periods 15\nnr_throttled 9\nthrottled_time 740000000\n"
	}
	if got := cgRun(fs, true, steps); len(got) != 1 || got[0].Severity != Info {
		t.Errorf("40 ms throttled: %+v", got)
	}

	// Ordinary work in a cgroup with limits it never reaches.
	fs = fakeFS{
		"/proc/7/cgroup": "0::/system.slice/app.service\n",
		"/sys/fs/cgroup/system.slice/app.service/pids.max":      "4915\n",
		"/sys/fs/cgroup/system.slice/app.service/pids.current":  "12\n",
		"/sys/fs/cgroup/system.slice/app.service/pids.events":   "max 0\n",
		"/sys/fs/cgroup/system.slice/app.service/memory.max":    "1073741824\n",
		"/sys/fs/cgroup/system.slice/app.service/memory.high":   "max\n",
		"/sys/fs/cgroup/system.slice/app.service/memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
		"/sys/fs/cgroup/system.slice/app.service/cpu.max":       "200000 100000\n",
		"/sys/fs/cgroup/system.slice/app.service/cpu.stat":      "usage_usec 5\nnr_periods 40\nnr_throttled 0\nthrottled_usec 0\n",
	}
	rootProc("7", fs)
	steps = []cgStep{at(sys(7, 1*ms, nrClone, 8, 50_000, 0x1200011)), at(sys(7, 2*ms, nrOpenat, 3, 20_000)),
		at(sys(7, 900*ms, cgWrite, 10, 20_000))}
	if got := cgRun(fs, true, steps); len(got) != 0 {
		t.Errorf("ordinary work: %+v", got)
	}
}

// On a host where opening a file may stall (a full audit backlog), the
// watch's clock reads nothing.
func TestCPUWatchSick(t *testing.T) {
	fs := cpuFS("nr_periods 10\nnr_throttled 2\nthrottled_time 90000000\n")
	sick := true
	w := newWatch(0, func() bool { return !sick })
	const dir = "/sys/fs/cgroup/cpu/kubepods/pod1"
	w.add(dir, func() (map[string]int64, bool) { return cgSnapshot(fs, dir, ctlCPU, true) })
	w.tick()
	if s := w.latest("/sys/fs/cgroup/cpu/kubepods/pod1"); s != nil {
		t.Fatalf("read on a sick host: %v", s)
	}
	sick = false
	w.tick()
	if s := w.latest("/sys/fs/cgroup/cpu/kubepods/pod1"); s["stat.nr_throttled"] != 2 {
		t.Fatalf("read once well: %v", s)
	}
}
