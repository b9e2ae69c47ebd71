package doctor

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

const (
	grpVictim = 0xa000 // the victim's scheduling group
	grpOther  = 0xb000 // another session's
	cpu1      = 1 << 1
	cpuBoth   = 3
)

var (
	victimTask = event.SchedTask{Prio: 120, Allowed: cpu1, NrAllowed: 1, Group: grpVictim}
	hogTask    = event.SchedTask{PID: 200, TID: 200, Comm: "hog", Prio: 110, Allowed: cpu1, NrAllowed: 1, Group: grpVictim}
	peerTask   = event.SchedTask{PID: 300, TID: 300, Comm: "peer", Prio: 120, Allowed: cpuBoth, NrAllowed: 2, Group: grpVictim}
)

// cpuWaitRun is pid 100's thread 100: n long waits of wait ns each, every
// one begun as woken says, task its scheduling, held who ran meanwhile
// (each for the wait's ns split evenly); then a summary of run ns on the
// CPU and the same waits.
func cpuWaitRun(n int, wait uint64, woken bool, task event.SchedTask, held []event.SchedTask, run uint64) []event.Event {
	var evs []event.Event
	t := uint64(1e9)
	for i := 0; i < n; i++ {
		t += wait + 1e6
		h := make([]event.SchedTask, len(held))
		for j := range held {
			h[j] = held[j]
			h[j].NS = wait / uint64(len(held))
		}
		evs = append(evs, event.Event{Kind: event.KindCPUWait, Time: t, CPU: 1, PID: 100, TID: 100, Comm: "victim",
			CPUWait: event.CPUWait{Wait: wait, Woken: woken, Nr: 230, NrRunning: 4, Task: task, Held: h}})
	}
	sum := event.CPUWaitSum{Run: run, Waits: uint32(n), Max: wait}
	if woken {
		sum.WaitWoken = uint64(n) * wait
	} else {
		sum.WaitPreempted = uint64(n) * wait
	}
	sum.WaitSyscall = sum.WaitWoken
	evs = append(evs, event.Event{Kind: event.KindCPUWait, Time: t + 1, CPU: 1, PID: 100, TID: 100, Comm: "victim",
		CPUWait: event.CPUWait{Summary: true, Nr: -1, Task: task, Sum: sum}})
	return evs
}

// The demo's shape: a pinned loop woken 50 times, each time 10 ms behind
// hogs at nice -10 pinned to its CPU, in its own group.
func TestCPUWaitPinnedBehindNicerHogs(t *testing.T) {
	r := report(cpuWaitRun(50, 10e6, true, victimTask, []event.SchedTask{hogTask}, 5e6))
	f := byID(r.Findings, CPUWait)
	if f == nil {
		t.Fatalf("no cpu-wait finding: %+v", r.Findings)
	}
	if f.Severity != Warning {
		t.Errorf("severity %v, want warning", f.Severity)
	}
	if got := f.Evidence["waited_ns"]; got != uint64(500e6) {
		t.Errorf("waited_ns %v, want 500 ms (50 waits of 10 ms)", got)
	}
	if got := f.Evidence["long_waits"]; got != uint64(50) {
		t.Errorf("long_waits %v, want 50", got)
	}
	if got, _ := f.Evidence["share_of_wanted_time"].(float64); got < 0.99 || got > 0.991 {
		t.Errorf("share %v, want 500/505", got)
	}
	for _, w := range []string{"nice -10", "affinity mask", "outrank", "hog[200]", "CPU 1 of the 2 CPUs", "clock_nanosleep"} {
		if !strings.Contains(f.Title+f.Summary, w) {
			t.Errorf("finding does not say %q:\n%s\n%s", w, f.Title, f.Summary)
		}
	}
	if f.Key != "cpu-wait:victim|outranked+woken+pinned" {
		t.Errorf("key %q", f.Key)
	}
	if len(f.Procs) != 2 || f.Procs[0].PID != 100 || f.Procs[1].PID != 200 {
		t.Errorf("procs %+v, want the victim and the hog", f.Procs)
	}
}

// Preempted rather than woken, behind tasks that outrank it: a warning
// (the victim computes and is kept from the CPU).
func TestCPUWaitPreemptedOutranked(t *testing.T) {
	unpinned := victimTask
	unpinned.Allowed, unpinned.NrAllowed = cpuBoth, 2
	hog := hogTask
	hog.Allowed, hog.NrAllowed = cpuBoth, 2
	r := report(cpuWaitRun(20, 10e6, false, unpinned, []event.SchedTask{hog}, 20e6))
	f := byID(r.Findings, CPUWait)
	if f == nil || f.Severity != Warning || !strings.Contains(f.Summary, "preemption") || strings.Contains(f.Summary, "affinity mask") {
		t.Fatalf("want a warning on preemptions behind nicer tasks, nothing pinned; got %+v", f)
	}
}

// A parallel build: preempted among equals on CPUs all could use. The
// scheduler's fair share of too few CPUs: no finding, a near miss.
func TestCPUWaitFairShareIsNoFinding(t *testing.T) {
	unpinned := victimTask
	unpinned.Allowed, unpinned.NrAllowed = cpuBoth, 2
	r := report(cpuWaitRun(50, 10e6, false, unpinned, []event.SchedTask{peerTask}, 200e6))
	if f := byID(r.Findings, CPUWait); f != nil {
		t.Fatalf("fair sharing reported: %s", f.Title)
	}
	if n := nearByID(r, CPUWait); n == nil || !strings.Contains(n.Short, "among equals") {
		t.Errorf("near miss %+v, want one that says the waits were among equals", n)
	}
	// Woken too (make waking to reap a job): still among equals.
	r = report(cpuWaitRun(50, 10e6, true, unpinned, []event.SchedTask{peerTask}, 20e6))
	if f := byID(r.Findings, CPUWait); f != nil {
		t.Fatalf("a woken waiter among equals reported: %s", f.Title)
	}
}

// Nice weighs only within a scheduling group: a nice -10 task of another
// session does not outrank the waiter (their groups share by weight).
func TestCPUWaitNiceOfAnotherGroupDoesNotOutrank(t *testing.T) {
	unpinned := victimTask
	unpinned.Allowed, unpinned.NrAllowed = cpuBoth, 2
	other := hogTask
	other.Group, other.Allowed, other.NrAllowed = grpOther, cpuBoth, 2
	r := report(cpuWaitRun(50, 10e6, true, unpinned, []event.SchedTask{other}, 5e6))
	if f := byID(r.Findings, CPUWait); f != nil {
		t.Fatalf("nice of another group taken to outrank: %s", f.Title)
	}
	// A real-time task outranks it from any group.
	other.Policy, other.Prio = schedFIFO, 49
	r = report(cpuWaitRun(50, 10e6, true, unpinned, []event.SchedTask{other}, 5e6))
	f := byID(r.Findings, CPUWait)
	if f == nil || f.Severity != Warning || !strings.Contains(f.Summary, "SCHED_FIFO priority 50") {
		t.Fatalf("want a warning naming the real-time holder; got %+v", f)
	}
}

// A throttled cgroup: its thread waits while the CPU sits idle (quota,
// not a queue): cpu-wait leaves it to cgroup-limit.
func TestCPUWaitIdleCPUIsThrottlingNotAQueue(t *testing.T) {
	evs := cpuWaitRun(50, 10e6, false, victimTask, []event.SchedTask{hogTask}, 5e6)
	for i := range evs {
		if w := &evs[i].CPUWait; !w.Summary {
			w.IdleNS, w.Held[0].NS = 9e6, 1e6
		} else {
			w.Sum.WaitIdle = w.Sum.WaitPreempted
		}
	}
	if f := byID(report(evs).Findings, CPUWait); f != nil {
		t.Fatalf("waits on an idle CPU reported: %s", f.Title)
	}
}

// The bars: a share under a quarter, or under 100 ms in all, or fewer
// than 5 long waits for a warning.
func TestCPUWaitBars(t *testing.T) {
	// 50 × 10 ms waited against 2 s on the CPU: 20%.
	if f := byID(report(cpuWaitRun(50, 10e6, true, victimTask, []event.SchedTask{hogTask}, 2e9)).Findings, CPUWait); f != nil {
		t.Errorf("20%% of the time reported: %s", f.Title)
	}
	// 9 × 10 ms: 90 ms in all.
	if f := byID(report(cpuWaitRun(9, 10e6, true, victimTask, []event.SchedTask{hogTask}, 1e6)).Findings, CPUWait); f != nil {
		t.Errorf("90 ms reported: %s", f.Title)
	}
	// 4 waits of 40 ms: 160 ms, but only 4 long waits: info.
	f := byID(report(cpuWaitRun(4, 40e6, true, victimTask, []event.SchedTask{hogTask}, 1e6)).Findings, CPUWait)
	if f == nil || f.Severity != Info {
		t.Errorf("4 long waits: want info, got %+v", f)
	}
}

// The holders, and the text's numbers, come from the events: from a
// capture (doctor -r) as live.
func TestCPUWaitHelpers(t *testing.T) {
	for mask, want := range map[uint64]string{1: "0", 2: "1", 0b1011: "0-1,3", 0xf0: "4-7"} {
		if got := cpuList(mask); got != want {
			t.Errorf("cpuList(%#x) = %q, want %q", mask, got, want)
		}
	}
	if got := schedName(0, 110); got != "nice -10, SCHED_OTHER" {
		t.Errorf("schedName = %q", got)
	}
	if w := niceWeight(110) / niceWeight(120); w < 9.2 || w > 9.4 {
		t.Errorf("nice -10 weighs %.2f times nice 0, want the kernel's 9548/1024 = 9.3", w)
	}
}

// A realtime task among those who ran during the waits (a CPU's migration
// thread, SCHED_FIFO at kernel priority 0) is named with its priority as
// chrt says it, 99, and the evidence holds that number, not a nice value.
func TestCPUWaitRealtimeHolder(t *testing.T) {
	migration := event.SchedTask{PID: 21, TID: 21, Comm: "migration/1", Prio: 0, Policy: 1, Allowed: cpu1, NrAllowed: 1, Group: grpOther}
	r := report(cpuWaitRun(50, 10e6, true, victimTask, []event.SchedTask{hogTask, migration}, 5e6))
	f := byID(r.Findings, CPUWait)
	if f == nil || !strings.Contains(f.Summary, "SCHED_FIFO priority 99") {
		t.Fatalf("want the migration thread named SCHED_FIFO priority 99; got %+v", f)
	}
	holders, _ := f.Evidence["holders"].([]map[string]any)
	for _, h := range holders {
		if h["comm"] != "migration/1" {
			continue
		}
		if h["rt_priority"] != 99 || h["nice"] != nil {
			t.Errorf("migration/1's evidence %v: want rt_priority 99 and no nice", h)
		}
		return
	}
	t.Errorf("migration/1 not among the holders: %v", f.Evidence["holders"])
}
