package probe

import (
	"fmt"

	"github.com/cilium/ebpf/link"

	"github.com/sysray/sysray/internal/event"
)

// struct fw_rec in bpf/faultwait.h.
const (
	fwSize     = 200
	fwSlotSize = 24
	fwSlots    = 4
)

// attachFaultWait attaches what only Config.FaultWait needs: the flush of
// a thread's last window at its exit. (The windows themselves are kept by
// sched_switch, attached with Stacks.) Without it the rest still works.
func (p *Probe) attachFaultWait() {
	l, err := link.AttachTracing(link.TracingOptions{Program: p.objs.FwExit})
	if err != nil {
		p.Warnings = append(p.Warnings, fmt.Sprintf("a thread's last fault waits are lost at its exit: tracepoint sched_process_exit: %v", err))
	} else {
		p.linkMu.Lock()
		p.links = append(p.links, l)
		p.linkMu.Unlock()
	}
	p.fwOn = true
}

// flushFaultWaits sends every thread's open window, once the programs are
// detached.
func (p *Probe) flushFaultWaits() {
	if p.fwOn {
		walkTasks(p.objs.FwFlush)
	}
}

// decodeFaultWait reads a struct fw_rec.
func decodeFaultWait(b []byte, w *event.FaultWait, stacks stackFunc) {
	w.Start = le.Uint64(b[48:])
	w.Duration = le.Uint64(b[56:])
	w.Count = le.Uint32(b[64:])
	n := min(int(le.Uint32(b[68:])), fwSlots)
	w.MajFaults = le.Uint64(b[72:])
	w.MinFaults = le.Uint64(b[80:])
	w.Lo = le.Uint64(b[88:])
	w.Hi = le.Uint64(b[96:])
	if n > 0 {
		w.Places = make([]event.FaultPlace, n)
	}
	for i := range n {
		s := b[104+fwSlotSize*i:]
		w.Places[i] = event.FaultPlace{Duration: le.Uint64(s), Count: le.Uint32(s[8:]), Addr: le.Uint64(s[16:]),
			Stack: stackFrames(int32(le.Uint32(s[12:])), stacks)}
	}
}
