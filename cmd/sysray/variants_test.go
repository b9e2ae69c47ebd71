package main

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// A workload whose first process ends at once and leaves a child behind:
// drainGroup returns once the child has ended and been reaped (by init:
// it was orphaned), not before.
func TestDrainGroupWaitsForChildren(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 0.5 & exit 0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if syscall.Kill(-pid, 0) != nil {
		t.Fatal("the child is gone before the test could wait for it")
	}
	drainGroup(pid)
	if took := time.Since(start); took < 400*time.Millisecond || took > 9*time.Second {
		t.Errorf("drainGroup returned after %s; want the child's 0.5 s and its reaping (this VM's init reaps orphans about every 2 s), under the 10 s before SIGKILL", took.Round(time.Millisecond))
	}
	if syscall.Kill(-pid, 0) == nil {
		t.Error("the group is still there")
	}
}
