package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

// All is every variant, grouped by detector. Each group changes, one at a
// time or together, what its mechanism does not depend on.
var All = []Variant{
	// kernel-contention / kernel-hotspot: one syscall's kernel path takes a
	// large share of the time of the processes that call it. The demo runs
	// 1, 2, 4 writers in 4 cgroups with 4 KiB writes.
	{Name: "kernel-hotspot/one-cgroup", Differs: "4 writers in one cgroup, 200-byte lines (issue #10's case)",
		Mode: Cmd, Argv: []string{"fadvise", "-writers", "4", "-cgroups=false", "-write-size", "200", "-d", "2s"},
		Expect: hotspot},
	{Name: "kernel-hotspot/one-writer", Differs: "a single writer: nobody to contend with",
		Mode: Cmd, Argv: []string{"fadvise", "-writers", "1", "-cgroups=false", "-d", "2s"}, Expect: hotspot},
	{Name: "kernel-hotspot/eight-writers", Differs: "8 writers, each in its own cgroup, for 1 s",
		Mode: Cmd, Argv: []string{"fadvise", "-writers", "8", "-d", "1s"}, Expect: hotspot},
	{Name: "kernel-hotspot/half-second", Differs: "2 writers for 0.5 s",
		Mode: Cmd, Argv: []string{"fadvise", "-writers", "2", "-cgroups=false", "-d", "500ms"}, Expect: hotspot},
	{Name: "kernel-hotspot/pid", Differs: "one writer already running; sysray attaches with -p for 2 s",
		Mode: PID, Argv: []string{"fadvise-writer", "-f", "{tmp}/w.log", "-s", "200", "-d", "5"},
		Lead: time.Second, For: 2 * time.Second, Expect: hotspot},
	{Name: "kernel-hotspot/host", Differs: "2 writers already running; sysray traces the whole host for 2 s",
		Mode: Host, Argv: []string{"fadvise", "-writers", "2", "-cgroups=false", "-d", "5s"},
		Lead: time.Second, For: 2 * time.Second, Expect: hotspot},

	// hot-syscall: a cheap syscall called so often that its fixed cost is
	// most of a thread's time. No demo existed; issue #10 found silence.
	{Name: "hot-syscall/getppid", Differs: "one process, ~1M getppid/s for 2 s (issue #10's case)",
		Mode: Cmd, Argv: []string{"hotcall", "-s", "getppid", "-d", "2"}, Expect: hot("getppid")},
	{Name: "hot-syscall/clock_gettime-8-procs", Differs: "8 processes calling clock_gettime as a raw syscall, 1 s",
		Mode: Cmd, Argv: []string{"hotcall", "-s", "clock_gettime", "-p", "8", "-d", "1"}, Expect: hot("clock_gettime", "vDSO")},
	{Name: "hot-syscall/read1-threads", Differs: "4 threads of one process reading 1 byte at a time",
		Mode: Cmd, Argv: []string{"hotcall", "-s", "read1", "-t", "4", "-d", "1"}, Expect: hot("read", "buffer")},
	{Name: "hot-syscall/sched_yield-pid", Differs: "sched_yield spinning, already running; -p for 2 s",
		Mode: PID, Argv: []string{"hotcall", "-s", "sched_yield", "-d", "5"},
		Lead: time.Second, For: 2 * time.Second, Expect: hot("sched_yield")},
	{Name: "hot-syscall/poll0-host", Differs: "poll with a zero timeout, already running; whole host for 2 s",
		Mode: Host, Argv: []string{"hotcall", "-s", "poll0", "-d", "5"},
		Lead: time.Second, For: 2 * time.Second, Expect: hot("poll", "timeout")},
	{Name: "hot-syscall/half-second", Differs: "getppid for 0.5 s",
		Mode: Cmd, Argv: []string{"hotcall", "-d", "0.5"}, Expect: hot("getppid")},

	// latency-grows-with-count: fork copies every mapping, so it slows as
	// the process maps more. The demo had thousands of mmap calls.
	{Name: "latency-grows-with-count/30-forks", Differs: "30 forks, 1,600 more mappings before each (issue #10's case)",
		Mode: Cmd, Argv: []string{"forkgrow", "-n", "30", "-m", "1600"}, Expect: grows("clone")},
	{Name: "latency-grows-with-count/fork-syscall", Differs: "the fork syscall instead of clone, 20 forks",
		Mode: Cmd, Argv: []string{"forkgrow", "-s", "fork", "-n", "20", "-m", "2400"}, Expect: grows("fork")},
	{Name: "latency-grows-with-count/200-forks", Differs: "200 forks, 240 more mappings before each",
		Mode: Cmd, Argv: []string{"forkgrow", "-n", "200", "-m", "240"}, Expect: grows("clone")},
	{Name: "latency-grows-with-count/pid", Differs: "forking every 100 ms for 4 s; sysray attaches with -p after 1 s, for 3 s",
		Mode: PID, Argv: []string{"forkgrow", "-n", "40", "-m", "1200", "-i", "100"},
		Lead: time.Second, For: 3 * time.Second, Expect: grows("clone")},
}

var hotspot = Expect{IDs: []string{"kernel-contention", "kernel-hotspot"}, Severity: doctor.Warning, Words: []string{"fadvise64"}}

func hot(words ...string) Expect {
	return Expect{IDs: []string{"hot-syscall"}, Severity: doctor.Warning, Words: words}
}

func grows(call string) Expect {
	return Expect{IDs: []string{"latency-grows-with-count"}, Severity: doctor.Warning, Words: []string{call, "mappings"}}
}
