package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/capture"
)

// record says in its capture's header whether it recorded stacks, so that
// `doctor -r` on slow calls that never slept can tell "stacks were not
// recorded" from "they ran on the CPU": four getrandom calls of 32 MiB,
// each about 0.1 s of kernel CPU without a sleep.
func TestRecordSaysStacks(t *testing.T) {
	requireBPF(t)
	for _, stacks := range []bool{false, true} {
		file := filepath.Join(t.TempDir(), "run.sysray")
		args := []string{"record", "-w", file}
		if stacks {
			args = append(args, "--stacks")
		}
		r := run(t, append(args, "--", prog("slowcpu"), "4")...)
		if r.code != 0 {
			t.Fatalf("record (stacks %v): exit %d: %s", stacks, r.code, r.stderr)
		}
		c, err := capture.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		meta := c.Header().Meta
		c.Close()
		absent, declared := meta["absent"]
		if !declared || (absent == "stacks") == stacks || stacks && meta["stacks_slow"] != "10000000" {
			t.Errorf("stacks %v: header says absent=%q (declared %v), stacks_slow=%q", stacks, absent, declared, meta["stacks_slow"])
		}

		out := filepath.Join(t.TempDir(), "report.json")
		if d := run(t, "doctor", "-r", file, "--json", "-o", out); d.code != 0 {
			t.Fatalf("doctor -r: exit %d: %s", d.code, d.stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var rep doctorReport
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatalf("bad report: %v\n%s", err, b)
		}
		var f *finding
		for i := range rep.Findings {
			if rep.Findings[i].ID == "slow-syscall" && strings.Contains(rep.Findings[i].Title, "getrandom") {
				f = &rep.Findings[i]
			}
		}
		if f == nil {
			t.Fatalf("stacks %v: no slow-syscall finding on getrandom:\n%s", stacks, titles(rep))
		}
		if n, _ := f.Evidence["count"].(float64); n != 4 {
			t.Errorf("stacks %v: %v slow calls, want the 4 getrandom calls", stacks, f.Evidence["count"])
		}
		notRecorded := strings.Contains(f.Summary, "Stacks were not recorded")
		switch {
		case !stacks && (!notRecorded || !strings.Contains(f.Title, "cause unknown") || strings.Contains(f.Summary, "or with them")):
			t.Errorf("without --stacks: %q / %q, want the cause unknown because stacks were not recorded", f.Title, f.Summary)
		case stacks && (notRecorded || !strings.Contains(f.Title, "running in the kernel")):
			t.Errorf("with --stacks: %q / %q, want the calls running in the kernel", f.Title, f.Summary)
		}
	}
}

// A syscall preempted on its way says how long it waited for the CPU,
// however short: queued's calls, 1 MiB of getrandom each (~3 ms of kernel
// CPU, under the 10 ms at which calls carry their sleeps), share one CPU
// with a spinning thread, and the kernel preempts them at their
// cond_resched points for a tick or more. A call's queued time must equal
// the kernel's own count of the thread's run-queue wait over the call
// (schedstat's run_delay, read by the program around it), and its latency
// less that time must not fall below the CPU time the program measured for
// it (CLOCK_THREAD_CPUTIME_ID). It may exceed it: CPU time leaves out the
// time the hypervisor held the vCPU (steal), which these VMs see in bursts
// and which is no wait on the run queue.
func TestRecordQueuedTime(t *testing.T) {
	requireBPF(t)
	file := filepath.Join(t.TempDir(), "q.sysray")
	outFile := filepath.Join(t.TempDir(), "q.out")
	r := run(t, "record", "--stacks", "-w", file, "--", "/bin/sh", "-c", `exec "$0" 60 1024 > "$1"`, prog("queued"), outFile)
	if r.code != 0 {
		t.Fatalf("record: exit %d: %s", r.code, r.stderr)
	}
	// The program's own CPU time per call, in ns.
	b, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	var walls, cpus, waits, switches []float64
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var wall, cpu, wait, sw float64
		if _, err := fmt.Sscan(l, &wall, &cpu, &wait, &sw); err != nil {
			t.Fatalf("queued's line %q: %v", l, err)
		}
		walls, cpus, waits, switches = append(walls, wall), append(cpus, cpu), append(waits, wait), append(switches, sw)
	}

	rd := run(t, "read", "--json", "-f", "evt.type = getrandom and evt.arg.buflen = 1048576", file)
	if rd.code != 0 {
		t.Fatalf("read: exit %d: %s", rd.code, rd.stderr)
	}
	var calls, preempted, off int
	for _, l := range strings.Split(strings.TrimSpace(rd.stdout), "\n") {
		var e struct {
			Syscall struct {
				LatencyNS float64 `json:"latency_ns"`
				QueuedNS  float64 `json:"queued_ns"`
			} `json:"syscall"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		lat, q := e.Syscall.LatencyNS, e.Syscall.QueuedNS
		if calls >= len(cpus) {
			t.Fatalf("more getrandom calls than queued made (%d)", len(cpus))
		}
		wall, cpu, wait, sw := walls[calls], cpus[calls], waits[calls], switches[calls]
		calls++
		if q > lat {
			t.Errorf("queued %.0f ns of a %.0f ns call", q, lat)
		}
		if q > 1e6 {
			preempted++
		}
		// The program's window is wider than the call: a preemption the
		// tick asked for during the call often happens on the way back to
		// user space, after the call has ended (sys_exit), and then counts
		// in run_delay but not in the call. So the call's queued time is
		// at most the window's run_delay and at least that less the time
		// the window spent outside the call. The kernel stamps run_delay
		// with its run queue's clock as __schedule begins, sysray at the
		// sched_switch tracepoint, after the next task was picked: the two
		// differ by the time picking takes, a few microseconds on a quiet
		// host and up to about 25 on a host running a dozen busy tasks in
		// cgroups (measured here: 0.33 ms over 13 switch-ins). A call whose
		// wait went uncounted is off by a tick (1-4 ms) or more.
		slack := 100e3 + 30e3*sw
		switch own, outside := lat-q, max(0, wall-lat); {
		case q > wait+slack || q < wait-outside-slack:
			off++
			t.Logf("call %d of %.2f ms (%.2f ms in the program's window, switched in %.0f times): %.3f ms queued, the kernel's run_delay over the window says %.3f ms",
				calls, lat/1e6, wall/1e6, sw, q/1e6, wait/1e6)
		case own < 0.8*cpu:
			off++
			t.Logf("call %d of %.2f ms, %.2f ms queued: %.2f ms its own, under the %.2f ms of CPU the program measured",
				calls, lat/1e6, q/1e6, own/1e6, cpu/1e6)
		}
	}
	// Now and then the kernel does not run sched_switch's program for a
	// switch (about one sleep in a thousand under load, bpf/syscalls.h), and
	// a call's wait goes uncounted; and the program's reads of run_delay
	// around a call can take in a preemption just before or after it: two
	// such calls are let pass. Without the count every preempted call is
	// off, and at least 5 are (below).
	if off > 2 {
		t.Errorf("%d of %d calls: queued time is not the kernel's run-queue wait over the call", off, calls)
	}
	if calls != 60 {
		t.Errorf("%d getrandom calls of 1 MiB, want 60", calls)
	}
	// Without preemption this test would test nothing.
	if preempted < 5 {
		t.Errorf("%d of %d calls queued over 1 ms: the spinner should have preempted more", preempted, calls)
	}
}
