package probe

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/sysray/sysray/internal/event"
)

// attachRunq attaches what follows waits for a CPU (bpf/runq.h), with
// Config.RunQueue: sched_wakeup fires for every wake-up on the host, so it
// costs nothing unless asked for. sched_switch, which ends the waits, has
// a program of its own here. The exit program goes first, before the
// lifecycle's: a thread's last totals then come before its exit record.
func (p *Probe) attachRunq() error {
	if !p.runqOn {
		return nil
	}
	for _, pr := range []struct {
		name string
		prog *ebpf.Program
	}{{"sched_process_exit", p.objs.RunqExit}, {"sched_switch", p.objs.RunqSchedSwitch}, {"sched_wakeup", p.objs.RunqWakeup},
		{"sched_wakeup_new", p.objs.RunqWakeupNew}} {
		l, err := link.AttachTracing(link.TracingOptions{Program: pr.prog})
		if err != nil {
			p.Warnings = append(p.Warnings, fmt.Sprintf("waits for a CPU are not traced: tracepoint %s: %v", pr.name, err))
			continue
		}
		p.links = append(p.links, l)
	}
	return nil
}

// decodeCPUWait reads struct runq_rec (bpf/sysray.h) past its header.
func decodeCPUWait(b []byte, w *event.CPUWait, cm *comms) {
	w.Wait = le.Uint64(b[48:])
	w.Summary = b[56] != 0
	w.Woken = b[57] != 0
	w.Task.Prio = b[58]
	w.Task.Policy = b[59]
	w.Nr = int32(le.Uint32(b[60:]))
	w.Task.Allowed = le.Uint64(b[64:])
	w.Task.NrAllowed = le.Uint32(b[72:])
	w.NrRunning = le.Uint32(b[76:])
	w.IdleNS = le.Uint64(b[80:])
	w.Task.Group = le.Uint64(b[88:])
	if !w.Summary {
		for i := 0; i < runqHolders; i++ {
			h := b[runqHeld+runqHolderSize*i:]
			if le.Uint32(h[36:]) == 0 {
				break
			}
			w.Held = append(w.Held, event.SchedTask{NS: le.Uint64(h), Cgroup: le.Uint64(h[8:]), Allowed: le.Uint64(h[16:]),
				Group: le.Uint64(h[24:]), PID: le.Uint32(h[32:]), TID: le.Uint32(h[36:]), NrAllowed: le.Uint32(h[40:]),
				Prio: h[44], Policy: h[45], Comm: cm.get(h[48:64])})
		}
	}
	s := &w.Sum
	const o = runqHeld + runqHolders*runqHolderSize
	s.Run = le.Uint64(b[o:])
	s.WaitWoken = le.Uint64(b[o+8:])
	s.WaitPreempted = le.Uint64(b[o+16:])
	s.WaitIdle = le.Uint64(b[o+24:])
	s.WaitSyscall = le.Uint64(b[o+32:])
	s.Max = le.Uint64(b[o+40:])
	s.Waits = le.Uint32(b[o+48:])
	for i := range s.Hist {
		s.Hist[i] = le.Uint32(b[o+52+4*i:])
	}
}

const (
	runqHeld       = 96 // runq_rec.held
	runqHolders    = 3
	runqHolderSize = 64
)
