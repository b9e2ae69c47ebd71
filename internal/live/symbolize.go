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
}

func newNamer() (*namer, error) {
	k, err := symbol.LoadKernel()
	if err != nil {
		return nil, err
	}
	mmapNr, _ := event.SyscallByName(event.HostArch(), "mmap")
	return &namer{kernel: k, cache: map[uint64]string{}, user: symbol.NewResolver(), stale: map[uint32]bool{}, mmapNr: mmapNr}, nil
}

func (n *namer) close() { n.user.Close() }

const protExec = 4

func (n *namer) name(e *event.Event) {
	if n.stale[e.PID] && e.Kind != event.KindExit {
		delete(n.stale, e.PID)
		n.user.Snapshot(e.PID) // gone already: the last snapshot stays
	}
	switch e.Kind {
	case event.KindExec:
		n.stale[e.PID] = true
		return
	case event.KindExit:
		if e.Proc.GroupDead {
			delete(n.stale, e.PID)
			n.user.Forget(e.PID)
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
		s.UserStack[i].Name = frameName(n.user.Resolve(e.PID, s.UserStack[i].Addr))
	}
	for i := range s.Sleeps {
		s.Sleeps[i].Stack = n.kernelFrames(s.Sleeps[i].Stack)
		s.Sleeps[i].WakerStack = n.kernelFrames(s.Sleeps[i].WakerStack)
	}
}

// kernelFrames names a kernel stack in place, and drops the frames of
// sysray's own BPF program and its trampoline, which every stack taken from
// a tracepoint starts with.
func (n *namer) kernelFrames(fs []event.Frame) []event.Frame {
	for i := range fs {
		fs[i].Name = n.kernelName(fs[i].Addr)
	}
	skip := 0
	for skip < len(fs) && (strings.HasPrefix(fs[skip].Name, "bpf_prog_") || strings.HasPrefix(fs[skip].Name, "bpf_trace_run")) {
		skip++
	}
	return fs[skip:]
}

func (n *namer) kernelName(addr uint64) string {
	if s, ok := n.cache[addr]; ok {
		return s
	}
	s := frameName(n.kernel.Resolve(addr))
	if len(n.cache) < 1<<16 {
		n.cache[addr] = s
	}
	return s
}

// frameName is "func+0xoff", with the object's base name for modules and
// user code: "func+0xoff [module]", "time+0xd (libc.so.6)".
func frameName(f symbol.Frame) string {
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
