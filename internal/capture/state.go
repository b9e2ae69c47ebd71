package capture

// Record flag bits (see docs/capture-format.md, "Event records").
const (
	fTID    = 1 << 0
	fCPU    = 1 << 1
	fK0     = 1 << 2 // kind-specific
	fK1     = 1 << 3 // kind-specific
	fK2     = 1 << 4 // kind-specific
	fPID    = 1 << 5
	fComm   = 1 << 6
	fCgroup = 1 << 7
	fExt    = 1 << 8

	fKind  = fK0 | fK1 | fK2
	fKnown = 1<<9 - 1

	// Syscall.
	fNr   = fK0
	fSys  = fK1
	fData = fK2
	// PageFault.
	fAddr = fK0
	fIP   = fK1
	fErr  = fK2
)

// Bits of the syscall change byte.
const (
	sysRet        = 1 << 6
	sysUnfinished = 1 << 7
)

// thread is what the previous events of one tid in the current block left
// behind; fields equal to it are not stored again.
type thread struct {
	tid    uint32
	pid    uint32
	cpu    uint32
	nr     uint32 // of the thread's previous syscall
	sys    int32  // index in state.sys of (tid, nr); -1 before the first syscall
	comm   string
	cgroup uint64

	faultAddr, faultIP, faultErr uint64

	// calls remembers where a few of the thread's syscalls keep their
	// state (sys+1; 0 is empty), so that a server's loop of five or six
	// calls finds them without hashing: the map was 5% of record's CPU on
	// redis, whose threads change syscall on nearly every call.
	calls [6]struct{ nr, sys uint32 }
	next  uint8 // the calls entry to replace
}

// sysPrev holds the previous call of one syscall by one thread: loops repeat
// the same call with the same arguments, so keying by nr as well as tid makes
// alternating calls (read, write, read, ...) cheap too.
type sysPrev struct {
	args [6]uint64
	ret  int64
}

// state is the delta context shared, step for step, by the encoder and the
// decoder. It resets at every block so each block decodes on its own.
type state struct {
	ext, extField []byte // scratch for record extensions
	threads       []thread
	byTID         map[uint32]int32
	sys           []sysPrev
	bySys         map[uint64]int32
	last          int32 // index of the previous event's thread, -1 at block start

	prevTID    uint32
	prevCPU    uint32
	prevCgroup uint64
	prevEnd    uint64
}

func (s *state) reset() {
	if s.byTID == nil {
		s.byTID = make(map[uint32]int32)
		s.bySys = make(map[uint64]int32)
	}
	s.threads = s.threads[:0]
	clear(s.byTID)
	s.sys = s.sys[:0]
	clear(s.bySys)
	s.last = -1
	s.prevTID, s.prevCPU, s.prevCgroup, s.prevEnd = 0, 0, 0, 0
}

// thread returns tid's context, creating it with the defaults the format
// specifies: a new thread is guessed to be a process leader on the CPU and
// in the cgroup of the event before it.
func (s *state) thread(tid uint32) *thread {
	if s.last >= 0 && s.threads[s.last].tid == tid {
		return &s.threads[s.last]
	}
	i, ok := s.byTID[tid]
	if !ok {
		i = int32(len(s.threads))
		s.threads = append(s.threads, thread{tid: tid, pid: tid, cpu: s.prevCPU, cgroup: s.prevCgroup, sys: -1})
		s.byTID[tid] = i
	}
	s.last = i
	return &s.threads[i]
}

// syscall returns the previous call of nr by th and makes nr th's latest.
// It appends only to s.sys, so th stays valid.
func (s *state) syscall(th *thread, nr uint32) *sysPrev {
	if th.sys >= 0 && th.nr == nr {
		return &s.sys[th.sys]
	}
	for i := range th.calls {
		if c := &th.calls[i]; c.nr == nr && c.sys != 0 {
			th.nr, th.sys = nr, int32(c.sys-1)
			return &s.sys[th.sys]
		}
	}
	key := uint64(th.tid)<<32 | uint64(nr)
	i, ok := s.bySys[key]
	if !ok {
		i = int32(len(s.sys))
		s.sys = append(s.sys, sysPrev{})
		s.bySys[key] = i
	}
	th.calls[th.next].nr, th.calls[th.next].sys = nr, uint32(i)+1
	th.next = (th.next + 1) % uint8(len(th.calls))
	th.nr, th.sys = nr, i
	return &s.sys[i]
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }
