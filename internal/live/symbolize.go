package live

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/symbol"
)

// namer fills in the names of stack frames as events pass, so that a capture
// carries them: kernel addresses mean nothing on another machine, and user
// addresses nothing once the process is gone.
type namer struct {
	kernel *symbol.Kernel
	cache  map[uint64]string // kernel address → name
	user   *symbol.Resolver
	// Processes whose code mappings changed since they were last read: an
	// exec, or an mmap with PROT_EXEC (a library loaded). Re-reading them at
	// their next event keeps their maps current while they are alive, so
	// their stacks still resolve after they exit.
	stale  map[uint32]bool
	mmapNr uint32
	keep   bool // the resolver is the caller's: remember processes after they exit
}

// newNamer names kernel frames, and user frames too when users is true.
func newNamer(user *symbol.Resolver, users bool) (*namer, error) {
	k, err := symbol.LoadKernel()
	if err != nil {
		return nil, err
	}
	if !users {
		return &namer{kernel: k, cache: map[uint64]string{}}, nil
	}
	keep := user != nil
	if user == nil {
		user = symbol.NewResolver()
	}
	mmapNr, _ := event.SyscallByName(event.HostArch(), "mmap")
	return &namer{kernel: k, cache: map[uint64]string{}, user: user, stale: map[uint32]bool{}, mmapNr: mmapNr, keep: keep}, nil
}

func (n *namer) close() {
	if n.user != nil && !n.keep {
		n.user.Close()
	}
}

const protExec = 4

func (n *namer) name(e *event.Event) {
	if e.Kind == event.KindReclaim {
		e.Reclaim.Stack = n.kernelFrames(e.Reclaim.Stack)
		return
	}
	if e.Kind == event.KindFaultWait {
		for i := range e.FaultWait.Places {
			e.FaultWait.Places[i].Stack = n.kernelFrames(e.FaultWait.Places[i].Stack)
		}
		return
	}
	if n.user == nil {
		if e.Kind == event.KindSyscall {
			for i := range e.Syscall.Sleeps {
				s := &e.Syscall.Sleeps[i]
				s.Stack = n.kernelFrames(s.Stack)
				s.WakerStack = n.kernelFrames(s.WakerStack)
			}
		}
		return
	}
	if n.stale[e.PID] && e.Kind != event.KindExit {
		delete(n.stale, e.PID)
		n.user.Snapshot(e.PID) // gone already: the last snapshot stays
	}
	switch e.Kind {
	case event.KindFutex:
		for _, fs := range [][]event.Frame{e.Futex.WaitStack, e.Futex.WakeStack} {
			for i := range fs {
				fs[i].Name = FrameName(n.user.Resolve(e.PID, fs[i].Addr))
			}
		}
		return
	case event.KindExec:
		n.stale[e.PID] = true
		return
	case event.KindExit:
		if e.Proc.GroupDead {
			delete(n.stale, e.PID)
			if !n.keep {
				n.user.Forget(e.PID)
			}
		}
		return
	case event.KindSyscall:
	default:
		return
	}
	s := &e.Syscall
	if s.Nr == n.mmapNr && !s.Failed() && s.Args[2]&protExec != 0 {
		n.stale[e.PID] = true
	}
	for i := range s.UserStack {
		s.UserStack[i].Name = FrameName(n.user.Resolve(e.PID, s.UserStack[i].Addr))
	}
	for i := range s.Sleeps {
		s.Sleeps[i].Stack = n.kernelFrames(s.Sleeps[i].Stack)
		s.Sleeps[i].WakerStack = n.kernelFrames(s.Sleeps[i].WakerStack)
	}
}

// kernelFrames names a kernel stack in place, and drops the frames of
// sysray's own BPF program, its trampoline and the tracepoint's iterator,
// which every stack taken from a tracepoint starts with.
func (n *namer) kernelFrames(fs []event.Frame) []event.Frame {
	for i := range fs {
		fs[i].Name = n.kernelName(fs[i].Addr)
	}
	skip := 0
	for skip < len(fs) && (strings.HasPrefix(fs[skip].Name, "bpf_prog_") || strings.HasPrefix(fs[skip].Name, "bpf_trace_run") || strings.HasPrefix(fs[skip].Name, "__traceiter_")) {
		skip++
	}
	return fs[skip:]
}

func (n *namer) kernelName(addr uint64) string {
	if s, ok := n.cache[addr]; ok {
		return s
	}
	s := FrameName(n.kernel.Resolve(addr))
	if len(n.cache) < 1<<16 {
		n.cache[addr] = s
	}
	return s
}

// FuncName is a frame's function without its offset, for aggregating
// samples: "schedule_timeout", "time (libc.so.6)".
func FuncName(f symbol.Frame) string {
	if f.Func == "" {
		return ""
	}
	f.Offset = 0
	return FrameName(f)
}

// FrameName is "func+0xoff", with the object's base name for modules and
// user code: "func+0xoff [module]", "time+0xd (libc.so.6)".
func FrameName(f symbol.Frame) string {
	if f.Func == "" {
		return ""
	}
	s := f.Func
	if f.Offset != 0 {
		s += "+0x" + strconv.FormatUint(f.Offset, 16)
	}
	switch {
	case f.Kernel && f.File != "" && f.File != symbol.KernelFile && f.File != symbol.Unknown:
		s += " " + f.File
	case !f.Kernel && f.File != "" && f.File != symbol.Unknown:
		s += " (" + filepath.Base(f.File) + ")"
	}
	return s
}
