package profile

import (
	"fmt"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/probe"
)

// Frame is a frame's name, or its address in hex when it has none, so that
// unnamed frames still tell stacks apart.
func Frame(name string, addr uint64) string {
	if name != "" {
		return name
	}
	return fmt.Sprintf("%#x", addr)
}

// FromSamples turns the kernel's on-CPU samples into stacks, outermost frame
// first. user and kernel name one address ("" when they cannot); kernel may
// be nil, when the kernel's symbols cannot be read.
func FromSamples(samples []probe.Sample, arch event.Arch, user func(pid uint32, addr uint64) string, kernel func(addr uint64) string) []Stack {
	out := make([]Stack, 0, len(samples))
	for _, s := range samples {
		st := Stack{PID: s.PID, Comm: s.Comm, Count: s.Count}
		if s.Syscall >= 0 {
			st.Syscall = event.SyscallName(arch, uint32(s.Syscall))
		}
		for i := len(s.User) - 1; i >= 0; i-- {
			st.User = append(st.User, Frame(user(s.PID, s.User[i]), s.User[i]))
		}
		for i := len(s.Kernel) - 1; i >= 0; i-- {
			n := ""
			if kernel != nil {
				n = kernel(s.Kernel[i])
			}
			st.Kernel = append(st.Kernel, Frame(n, s.Kernel[i]))
		}
		out = append(out, st)
	}
	return out
}

// OffCPU folds the sleeps of slow syscalls into stacks weighted like
// samples (one per 1/hz seconds asleep), so on- and off-CPU time share one
// graph. A sleep's stack is the call's user stack, an "[off-cpu]" frame,
// then the kernel stack where it slept.
type OffCPU struct {
	hz     int
	at     map[string]int // stack key -> index in stacks
	stacks []Stack
}

func NewOffCPU(hz int) *OffCPU { return &OffCPU{hz: hz, at: map[string]int{}} }

// Add folds in the sleeps of one syscall event; other events add nothing.
func (o *OffCPU) Add(e *event.Event) {
	if e.Kind != event.KindSyscall {
		return
	}
	for _, sl := range e.Syscall.Sleeps {
		n := sl.Duration * uint64(o.hz) / 1e9
		if n == 0 {
			continue
		}
		st := Stack{PID: e.PID, Comm: e.Comm, Syscall: "off-cpu"}
		for i := len(e.Syscall.UserStack) - 1; i >= 0; i-- {
			f := e.Syscall.UserStack[i]
			st.User = append(st.User, Frame(f.Name, f.Addr))
		}
		st.User = append(st.User, "[off-cpu]")
		for i := len(sl.Stack) - 1; i >= 0; i-- {
			st.Kernel = append(st.Kernel, Frame(sl.Stack[i].Name, sl.Stack[i].Addr))
		}
		key := fmt.Sprint(st.PID, st.User, st.Kernel)
		if i, ok := o.at[key]; ok {
			o.stacks[i].Count += n
			continue
		}
		st.Count = n
		o.at[key] = len(o.stacks)
		o.stacks = append(o.stacks, st)
	}
}

// Stacks are the folded stacks, in the order first seen.
func (o *OffCPU) Stacks() []Stack { return o.stacks }
