package session

import (
	"testing"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/proc"
)

// The header says what the capture holds: with stacks, from which latency
// calls carry where they slept; without, that stacks are absent (a reader
// must not take their absence for calls that never slept).
func TestHeader(t *testing.T) {
	procs := []proc.Info{{PID: 7, Comm: "x"}}
	with := Header(event.ArchAMD64, procs, `[{"id":"c1"}]`, true, false, 5_000_000)
	if a, ok := with.Meta[MetaAbsent]; !ok || a != "" || with.Meta[MetaStacksSlow] != "5000000" {
		t.Errorf("with stacks: absent %q (%v), stacks_slow %q", a, ok, with.Meta[MetaStacksSlow])
	}
	if with.Meta[MetaContainers] != `[{"id":"c1"}]` || len(with.Procs) != 1 || with.Arch != event.ArchAMD64 {
		t.Errorf("header %+v", with)
	}
	// The table is the kernel's numbering: read is 0, openat 257 on x86_64.
	if n := with.Syscalls; len(n) <= 257 || n[0] != "read" || n[257] != "openat" {
		t.Errorf("syscall table of %d: %q, %q", len(n), n[0], n[min(257, len(n)-1)])
	}
	// The agent's doctor follows sleeps without the wakers' stacks and the
	// calls' user stacks: a reader must not take their absence for none.
	lean := Header(event.ArchAMD64, nil, "", true, true, 5_000_000)
	if lean.Meta[MetaAbsent] != "waker_stacks,user_stacks,wait_stacks" || lean.Meta[MetaStacksSlow] != "5000000" {
		t.Errorf("lean stacks: absent %q, stacks_slow %q", lean.Meta[MetaAbsent], lean.Meta[MetaStacksSlow])
	}
	without := Header(event.ArchAMD64, nil, "", false, false, 5_000_000)
	if without.Meta[MetaAbsent] != "stacks" {
		t.Errorf("without stacks: absent %q", without.Meta[MetaAbsent])
	}
	if _, ok := without.Meta[MetaStacksSlow]; ok {
		t.Error("without stacks: a stacks_slow threshold")
	}
}
