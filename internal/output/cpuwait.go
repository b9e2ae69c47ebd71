package output

import (
	"fmt"

	"github.com/sysray/sysray/internal/event"
)

// cpuWaitText is a KindCPUWait event's text line: one wait and who had the
// CPU, or a thread's totals.
func cpuWaitText(w *event.CPUWait, arch event.Arch) string {
	ms := func(ns uint64) string { return fmt.Sprintf("%d.%03dms", ns/1e6, ns%1e6/1e3) }
	if w.Summary {
		s := &w.Sum
		return fmt.Sprintf("cpu_wait totals run=%s waited=%s (after wake-ups %s, preempted %s, in syscalls %s) waits=%d max=%s",
			ms(s.Run), ms(s.Waited()), ms(s.WaitWoken), ms(s.WaitPreempted), ms(s.WaitSyscall), s.Waits, ms(s.Max))
	}
	how := "preempted"
	if w.Woken {
		how = "woken"
	}
	in := "outside a syscall"
	if w.Nr >= 0 {
		in = "in " + event.SyscallName(arch, uint32(w.Nr))
	}
	held := "the CPU was idle"
	if !w.Idle {
		held = fmt.Sprintf("held by %s[%d/%d] prio=%d", w.Holder.Comm, w.Holder.PID, w.Holder.TID, w.Holder.Prio)
	}
	return fmt.Sprintf("cpu_wait %s %s prio=%d queue=%d, %s <%s>", how, in, w.Task.Prio, w.NrRunning, held, ms(w.Wait))
}
