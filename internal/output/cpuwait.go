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

// CPUWaitJSON is a KindCPUWait event: one long wait (who ran meanwhile), or
// with summary a thread's totals since its last summary.
type CPUWaitJSON struct {
	Summary   bool              `json:"summary,omitempty"`
	WaitNS    uint64            `json:"wait_ns,omitempty"`
	Woken     bool              `json:"woken,omitempty"`
	Syscall   string            `json:"syscall,omitempty"`
	IdleNS    uint64            `json:"idle_ns,omitempty"`
	NrRunning uint32            `json:"nr_running,omitempty"`
	Prio      uint8             `json:"prio"`
	Policy    uint8             `json:"policy"`
	CPUs      uint64            `json:"cpus_mask"`
	Held      []SchedTaskJSON   `json:"held,omitempty"`
	Sum       *event.CPUWaitSum `json:"totals,omitempty"`
}

// SchedTaskJSON is a task that ran while another waited.
type SchedTaskJSON struct {
	PID    uint32 `json:"pid"`
	TID    uint32 `json:"tid"`
	Comm   string `json:"comm"`
	NS     uint64 `json:"ns"`
	Prio   uint8  `json:"prio"`
	Policy uint8  `json:"policy"`
	CPUs   uint64 `json:"cpus_mask"`
	Cgroup uint64 `json:"cgroup"`
}

func cpuWaitJSON(w *event.CPUWait, arch event.Arch) *CPUWaitJSON {
	j := &CPUWaitJSON{Summary: w.Summary, WaitNS: w.Wait, Woken: w.Woken, IdleNS: w.IdleNS, NrRunning: w.NrRunning,
		Prio: w.Task.Prio, Policy: w.Task.Policy, CPUs: w.Task.Allowed}
	if w.Nr >= 0 {
		j.Syscall = event.SyscallName(arch, uint32(w.Nr))
	}
	for _, h := range w.Held {
		j.Held = append(j.Held, SchedTaskJSON{PID: h.PID, TID: h.TID, Comm: h.Comm, NS: h.NS, Prio: h.Prio, Policy: h.Policy, CPUs: h.Allowed, Cgroup: h.Cgroup})
	}
	if w.Summary {
		s := w.Sum
		j.Sum = &s
	}
	return j
}
