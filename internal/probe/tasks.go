package probe

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/cilium/ebpf/link"
)

// Blocked is a task in uninterruptible sleep, as the kernel saw it.
type Blocked struct {
	PID, TID uint32
	Comm     string
	Syscall  int32    // the syscall it is in; -1 for a kernel thread
	Kernel   []uint64 // kernel stack, innermost first
}

// blockedRecSize is sizeof(struct blocked_rec) in bpf/sysray.h.
const blockedRecSize = 16 + 16 + 8*stackDepth

// Blocked lists the tasks in uninterruptible sleep now, with their kernel
// stacks: a BPF task iterator walks them in the kernel, with no file per
// task (which matters where every open waits).
func (p *Probe) Blocked() ([]Blocked, error) {
	it, err := link.AttachIter(link.IterOptions{Program: p.objs.Blocked})
	if err != nil {
		return nil, fmt.Errorf("listing blocked tasks: %w", err)
	}
	defer it.Close()
	rd, err := it.Open()
	if err != nil {
		return nil, fmt.Errorf("listing blocked tasks: %w", err)
	}
	defer rd.Close()
	b, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("listing blocked tasks: %w", err)
	}
	return decodeBlocked(b), nil
}

func decodeBlocked(b []byte) []Blocked {
	var out []Blocked
	for ; len(b) >= blockedRecSize; b = b[blockedRecSize:] {
		n := int(le.Uint32(b[12:]))
		n = min(n, stackDepth)
		comm := b[16:32]
		if i := bytes.IndexByte(comm, 0); i >= 0 {
			comm = comm[:i]
		}
		t := Blocked{PID: le.Uint32(b[0:]), TID: le.Uint32(b[4:]), Syscall: int32(le.Uint32(b[8:])), Comm: string(comm)}
		for i := range n {
			t.Kernel = append(t.Kernel, le.Uint64(b[32+8*i:]))
		}
		out = append(out, t)
	}
	return out
}

// StartChild runs start, which forks and execs the command sysray traces,
// with sysray's own pid marked so that the kernel selects the child it
// forks from that child's execve on (bpf/sysray.bpf.c, SEL_LAUNCH). Only a
// probe opened with Config.Launch can follow a command.
func (p *Probe) StartChild(start func() error) error {
	self := uint32(os.Getpid())
	if err := p.objs.Pids.Put(self, uint8(selLaunch)); err != nil {
		return fmt.Errorf("selecting the command: %w", err)
	}
	defer p.objs.Pids.Delete(self)
	return start()
}

const selLaunch = 8
