package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var growthVariants = []Variant{
	// latency-grows-with-count: fork copies every mapping, so it slows as
	// the process maps more. The demo had thousands of mmap calls.
	{Name: "latency-grows-with-count/30-forks", Differs: "30 forks, 1,600 more mappings before each (the case a new user first tried)",
		Mode: Cmd, Argv: []string{"forkgrow", "-n", "30", "-m", "1600"}, Expect: grows("clone")},
	{Name: "latency-grows-with-count/fork-syscall", Differs: "the fork syscall instead of clone, 30 forks",
		Mode: Cmd, Argv: []string{"forkgrow", "-s", "fork", "-n", "30", "-m", "2000"}, Expect: grows("fork")},
	{Name: "latency-grows-with-count/200-forks", Differs: "200 forks, 240 more mappings before each",
		Mode: Cmd, Argv: []string{"forkgrow", "-n", "200", "-m", "240"}, Expect: grows("clone")},
	{Name: "latency-grows-with-count/thread-stacks", Differs: "the mappings are 4,000 threads' stacks and guards (MAP_STACK): a fork every 100 threads among 4,000 fast clone3 calls, threads and mappings growing in step",
		Mode: Cmd, Argv: []string{"map32", "-m", "stack", "-n", "4000"}, Expect: grows("clone")},
	{Name: "latency-grows-with-count/busy-neighbour", Differs: "thread-stacks while another program streams memory on every CPU (membusy): most forks wait a tick or more for the CPU, the short ones as well as the long",
		Mode: Cmd, Argv: []string{"map32", "-m", "stack", "-n", "4000"}, Neighbour: []string{"membusy"}, Expect: grows("clone")},
	{Name: "latency-grows-with-count/pid", Differs: "forking every 60 ms for ~4.5 s from 3 s after its start; sysray attaches with -p after 0.5 s (tracing from about 4 s), for 4 s",
		Mode: PID, Argv: []string{"forkgrow", "-n", "60", "-m", "800", "-i", "60", "-w", "3"},
		Lead: 500 * time.Millisecond, For: 4 * time.Second, Expect: grows("clone")},
}

func grows(call string) Expect {
	return Expect{IDs: []doctor.ID{doctor.LatencyGrows}, Severity: doctor.Warning, Words: []string{call, "mappings"}}
}
