package tests

import (
	"encoding/json"
	"fmt"
	"math"
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
// cond_resched points for a tick or more. A call's latency less its
// queued time must then come back to the CPU time the program measured for
// it (CLOCK_THREAD_CPUTIME_ID), preempted or not.
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
	var cpus []float64
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var wall, cpu float64
		if _, err := fmt.Sscan(l, &wall, &cpu); err != nil {
			t.Fatalf("queued's line %q: %v", l, err)
		}
		cpus = append(cpus, cpu)
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
		cpu := cpus[calls]
		calls++
		if q > lat {
			t.Errorf("queued %.0f ns of a %.0f ns call", q, lat)
		}
		if q > 1e6 {
			preempted++
		}
		// A tick is 1-4 ms and the work ~3 ms: a call charged its wait
		// is off by a whole tick, far outside 20%.
		if own := lat - q; math.Abs(own-cpu) > 0.2*cpu {
			off++
			t.Logf("call %d of %.2f ms, %.2f ms queued: %.2f ms its own, want about %.2f (the program's CPU time for it)",
				calls, lat/1e6, q/1e6, own/1e6, cpu/1e6)
		}
	}
	// Now and then the kernel does not run sched_switch's program for a
	// switch (about one sleep in a thousand under load, bpf/syscalls.h), and a call's
	// wait goes uncounted: two such calls are let pass. Without the count
	// every preempted call is off, and at least 5 are (below).
	if off > 2 {
		t.Errorf("%d of %d calls: latency less queued time is not the call's CPU time", off, calls)
	}
	if calls != 60 {
		t.Errorf("%d getrandom calls of 1 MiB, want 60", calls)
	}
	// Without preemption this test would test nothing.
	if preempted < 5 {
		t.Errorf("%d of %d calls queued over 1 ms: the spinner should have preempted more", preempted, calls)
	}
}
