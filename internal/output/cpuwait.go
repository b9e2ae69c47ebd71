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
	held := ""
	for _, h := range w.Held {
		held += fmt.Sprintf(" %s[%d/%d]:prio=%d:%s", h.Comm, h.PID, h.TID, h.Prio, ms(h.NS))
	}
	if w.IdleNS > 0 {
		held += " idle:" + ms(w.IdleNS)
	}
	return fmt.Sprintf("cpu_wait %s %s prio=%d queue=%d ran:%s <%s>", how, in, w.Task.Prio, w.NrRunning, held, ms(w.Wait))
}
