package capture

import (
	"encoding/binary"
	"math/bits"

	"github.com/sysray/sysray/internal/event"
)

// Field-mask bits of the kinds that are rare enough to be stored plainly
// (each field present only when non-zero).
const (
	vsNr = 1 << iota
	vsCallerIP
)

const (
	sigSig = 1 << iota
	sigCode
	sigSender
	sigTargetPID
	sigTargetTID
	sigAddr
	sigResult
	sigGroup
	sigHandler
)

const (
	procChildPID = 1 << iota
	procChildTID
	procThread
	procChildComm
	procFilename
	procArgv
	procOldTID
	procExitCode
	procGroupDead
	procUnfinished
)

const dropCount = 1 << 0

func appendUvarint(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	return binary.AppendUvarint(b, v)
}

func appendBytes(b []byte, s []byte) []byte {
	return append(appendUvarint(b, uint64(len(s))), s...)
}

func appendString(b []byte, s string) []byte {
	return append(appendUvarint(b, uint64(len(s))), s...)
}

// appendEvent encodes e against, and advances, the block's delta state: its
// record at the end of b, its times (the delta to its start and a syscall's
// latency) at the end of t. The times are the part of an event that never
// repeats; kept apart, they leave the records runs of identical bytes that
// the codec matches long (zstd, which the format was first tuned for, spends
// its time per match, not per byte), and spare the codec the noise
// (docs/capture-format.md, "Events").
func (s *state) appendEvent(b, t []byte, e *event.Event) ([]byte, []byte) {
	var flags uint64
	if e.TID != s.prevTID {
		flags |= fTID
	}
	th := s.thread(e.TID)
	if e.CPU != th.cpu {
		flags |= fCPU
	}
	if e.PID != th.pid {
		flags |= fPID
	}
	if e.Comm != th.comm {
		flags |= fComm
	}
	if e.Cgroup != th.cgroup {
		flags |= fCgroup
	}

	// Kind-specific flags must be known before the flags are written, so
	// the comparisons happen here and the writing below.
	var (
		sc       = &e.Syscall
		prev     *sysPrev
		changed  byte
		dataMask uint64
		mask     uint64
	)
	switch e.Kind {
	case event.KindSyscall:
		if sc.Nr != th.nr {
			flags |= fNr
		}
		prev = s.syscall(th, sc.Nr)
		for i := range sc.Args {
			changed |= byte(b2u(sc.Args[i] != prev.args[i]) << i)
		}
		if sc.Ret != prev.ret {
			changed |= sysRet
		}
		if sc.Unfinished {
			changed |= sysUnfinished
		}
		if changed != 0 {
			flags |= fSys
		}
		// Without branches: whether a call carries data changes from
		// call to call, and mispredicting it was most of this loop's cost.
		for i := range sc.Data {
			dataMask |= b2u(sc.Data[i] != nil)<<i | b2u(sc.Truncated[i])<<(6+i)
		}
		if dataMask != 0 {
			flags |= fData
		}
		if sc.UserStack != nil || sc.Sleeps != nil || sc.Approx || sc.Maps != 0 || sc.Refused || sc.Queued != 0 {
			flags |= fExt
		}
	case event.KindSignalGenerate, event.KindSignalDeliver:
		if e.Signal.Syscall != 0 || e.Signal.Arch != 0 {
			flags |= fExt
		}
	case event.KindFork, event.KindExec, event.KindExit:
		if e.Proc.CgroupPath != "" || e.Proc.Recent != nil || e.Proc.ArgvTruncated {
			flags |= fExt
		}
	case event.KindPageFault:
		if e.Fault.SP != 0 {
			flags |= fExt
		}
		if e.Fault.Addr != th.faultAddr {
			flags |= fAddr
		}
		if e.Fault.IP != th.faultIP {
			flags |= fIP
		}
		if e.Fault.Error != th.faultErr {
			flags |= fErr
		}
	}

	b = append(b, byte(e.Kind))
	b = appendUvarint(b, flags)
	t = appendUvarint(t, zigzag(int64(e.Time-s.prevEnd)))
	if flags&fTID != 0 {
		b = appendUvarint(b, uint64(e.TID))
	}
	if flags&fCPU != 0 {
		b = appendUvarint(b, uint64(e.CPU))
	}
	if flags&fPID != 0 {
		b = appendUvarint(b, uint64(e.PID))
	}
	if flags&fComm != 0 {
		b = appendString(b, e.Comm)
	}
	if flags&fCgroup != 0 {
		b = appendUvarint(b, e.Cgroup)
	}
	th.cpu, th.pid, th.comm, th.cgroup = e.CPU, e.PID, e.Comm, e.Cgroup
	s.prevTID, s.prevCPU, s.prevCgroup = e.TID, e.CPU, e.Cgroup
	s.prevEnd = e.End()

	switch e.Kind {
	case event.KindSyscall:
		if flags&fNr != 0 {
			b = appendUvarint(b, uint64(sc.Nr))
		}
		if changed != 0 {
			b = append(b, changed)
			for c := changed & (1<<len(sc.Args) - 1); c != 0; c &= c - 1 {
				i := bits.TrailingZeros8(c)
				b = appendUvarint(b, zigzag(int64(sc.Args[i]-prev.args[i])))
			}
			if changed&sysRet != 0 {
				b = appendUvarint(b, zigzag(sc.Ret-prev.ret))
			}
			prev.args, prev.ret = sc.Args, sc.Ret
		}
		t = appendUvarint(t, sc.Latency)
		if dataMask != 0 {
			b = appendUvarint(b, dataMask)
			for i := range sc.Data {
				if sc.Data[i] != nil {
					b = appendBytes(b, sc.Data[i])
				}
			}
		}
	case event.KindPageFault:
		f := &e.Fault
		if flags&fAddr != 0 {
			b = appendUvarint(b, zigzag(int64(f.Addr-th.faultAddr)))
		}
		if flags&fIP != 0 {
			b = appendUvarint(b, zigzag(int64(f.IP-th.faultIP)))
		}
		if flags&fErr != 0 {
			b = appendUvarint(b, zigzag(int64(f.Error-th.faultErr)))
		}
		th.faultAddr, th.faultIP, th.faultErr = f.Addr, f.IP, f.Error
	case event.KindVsyscall:
		v := &e.Vsyscall
		mask = bit(v.Nr != 0, vsNr) | bit(v.CallerIP != 0, vsCallerIP)
		b = appendUvarint(b, mask)
		b = appendNonZero(b, uint64(v.Nr))
		b = appendNonZero(b, v.CallerIP)
	case event.KindSignalGenerate, event.KindSignalDeliver:
		g := &e.Signal
		mask = bit(g.Sig != 0, sigSig) | bit(g.Code != 0, sigCode) |
			bit(g.SenderPID != 0, sigSender) | bit(g.TargetPID != 0, sigTargetPID) |
			bit(g.TargetTID != 0, sigTargetTID) | bit(g.Addr != 0, sigAddr) |
			bit(g.Result != 0, sigResult) | bit(g.Group, sigGroup) | bit(g.Handler != 0, sigHandler)
		b = appendUvarint(b, mask)
		b = appendNonZero(b, zigzag(int64(g.Sig)))
		b = appendNonZero(b, zigzag(int64(g.Code)))
		b = appendNonZero(b, uint64(g.SenderPID))
		b = appendNonZero(b, uint64(g.TargetPID))
		b = appendNonZero(b, uint64(g.TargetTID))
		b = appendNonZero(b, g.Addr)
		b = appendNonZero(b, zigzag(int64(g.Result)))
		b = appendNonZero(b, g.Handler)
	case event.KindFork, event.KindExec, event.KindExit:
		p := &e.Proc
		mask = bit(p.ChildPID != 0, procChildPID) | bit(p.ChildTID != 0, procChildTID) |
			bit(p.Thread, procThread) | bit(p.ChildComm != "", procChildComm) |
			bit(p.Filename != "", procFilename) | bit(p.Argv != nil, procArgv) |
			bit(p.OldTID != 0, procOldTID) | bit(p.ExitCode != 0, procExitCode) |
			bit(p.GroupDead, procGroupDead) | bit(p.Unfinished, procUnfinished)
		b = appendUvarint(b, mask)
		b = appendNonZero(b, uint64(p.ChildPID))
		b = appendNonZero(b, uint64(p.ChildTID))
		if mask&procChildComm != 0 {
			b = appendString(b, p.ChildComm)
		}
		if mask&procFilename != 0 {
			b = appendString(b, p.Filename)
		}
		if mask&procArgv != 0 {
			b = appendUvarint(b, uint64(len(p.Argv)))
			for _, a := range p.Argv {
				b = appendString(b, a)
			}
		}
		b = appendNonZero(b, uint64(p.OldTID))
		b = appendNonZero(b, zigzag(int64(p.ExitCode)))
	case event.KindDrop:
		mask = bit(e.Drop.Count != 0, dropCount)
		b = appendUvarint(b, mask)
		b = appendNonZero(b, e.Drop.Count)
	case event.KindReclaim:
		// Length-prefixed, as every kind added after the first release:
		// a reader that predates it skips the body as opaque.
		r := &e.Reclaim
		v := appendUvarint(s.extField[:0], r.Duration)
		v = appendUvarint(v, r.Pages)
		v = appendUvarint(v, zigzag(int64(r.Nr)))
		v = appendFrames(v, r.Stack)
		// Optional tail: absent for memory-cgroup reclaim (What 0), which
		// then reads as it did before the tail existed.
		if r.What != event.ReclaimMemcg || r.Order != 0 || r.Status != 0 || r.FaultAddr != 0 {
			v = appendUvarint(v, uint64(r.What))
			v = appendUvarint(v, zigzag(int64(r.Order)))
			v = appendUvarint(v, zigzag(int64(r.Status)))
			v = appendUvarint(v, r.FaultAddr)
		}
		b = appendBytes(b, v)
		s.extField = v
	case event.KindFutex:
		// Length-prefixed like reclaim: older readers skip it.
		f := &e.Futex
		v := appendUvarint(s.extField[:0], f.Addr)
		for _, n := range [...]uint64{f.Waits, f.Slept, f.Woken, f.Timeouts, f.Again, f.ByProc,
			f.WaitNS, f.MaxNS, f.Wakes, f.Woke, f.WokeOne, uint64(f.WakerTID)} {
			v = appendUvarint(v, n)
		}
		v = appendFrames(v, f.WaitStack)
		v = appendFrames(v, f.WakeStack)
		b = appendBytes(b, v)
		s.extField = v
	case event.KindFaultWait:
		v := appendFaultWait(s.extField[:0], &e.FaultWait)
		b = appendBytes(b, v)
		s.extField = v
	case event.KindCPUWait:
		v := appendCPUWait(s.extField[:0], &e.CPUWait)
		b = appendBytes(b, v)
		s.extField = v
	default:
		// Kinds this version does not know have an opaque, length-prefixed
		// body so that readers can skip them; there is nothing to put in it.
		b = append(b, 0)
	}
	if flags&fExt != 0 {
		b = s.appendExt(b, e)
	}
	return b, t
}

// Extension field tags (docs/capture-format.md, "Extension").
const (
	extStacks     = 1
	extCgroupPath = 2
	extFaultSP    = 3
	extRecent     = 4
	extApprox     = 5
	extMaps       = 6
	extRefused    = 7
	extSigsys     = 8
	extQueued     = 9
	extArgvCut    = 10
)

// appendExt writes the record extension: length-prefixed (tag, length,
// value) fields, so that a reader skips the tags it does not know.
func (s *state) appendExt(b []byte, e *event.Event) []byte {
	ext := s.ext[:0]
	if e.Kind == event.KindSyscall && (e.Syscall.UserStack != nil || e.Syscall.Sleeps != nil) {
		v := appendStacks(s.extField[:0], &e.Syscall)
		ext = appendUvarint(ext, extStacks)
		ext = appendBytes(ext, v)
		s.extField = v
	}
	if p := &e.Proc; p.CgroupPath != "" && (e.Kind == event.KindFork || e.Kind == event.KindExec || e.Kind == event.KindExit) {
		ext = appendUvarint(ext, extCgroupPath)
		ext = appendString(ext, p.CgroupPath)
	}
	if p := &e.Proc; p.Recent != nil && (e.Kind == event.KindFork || e.Kind == event.KindExec || e.Kind == event.KindExit) {
		v := appendCount(s.extField[:0], len(p.Recent), false)
		for _, c := range p.Recent {
			v = appendUvarint(v, c.Time)
			v = appendUvarint(v, uint64(c.Nr))
			v = appendUvarint(v, zigzag(c.Ret))
			v = appendUvarint(v, c.Latency)
		}
		ext = appendUvarint(ext, extRecent)
		ext = appendBytes(ext, v)
		s.extField = v
	}
	if p := &e.Proc; p.ArgvTruncated && (e.Kind == event.KindFork || e.Kind == event.KindExec || e.Kind == event.KindExit) {
		ext = appendUvarint(ext, extArgvCut)
		ext = appendBytes(ext, nil)
	}
	if e.Kind == event.KindSyscall && e.Syscall.Approx {
		ext = appendUvarint(ext, extApprox)
		ext = appendBytes(ext, nil)
	}
	if e.Kind == event.KindSyscall && e.Syscall.Maps != 0 {
		ext = appendUvarint(ext, extMaps)
		ext = appendBytes(ext, appendUvarint(s.extField[:0], uint64(e.Syscall.Maps)))
	}
	if e.Kind == event.KindSyscall && e.Syscall.Refused {
		ext = appendUvarint(ext, extRefused)
		ext = appendBytes(ext, nil)
	}
	if e.Kind == event.KindSyscall && e.Syscall.Queued != 0 {
		ext = appendUvarint(ext, extQueued)
		ext = appendBytes(ext, appendUvarint(s.extField[:0], e.Syscall.Queued))
	}
	if g := &e.Signal; (e.Kind == event.KindSignalGenerate || e.Kind == event.KindSignalDeliver) && (g.Syscall != 0 || g.Arch != 0) {
		v := appendUvarint(s.extField[:0], zigzag(int64(g.Syscall)))
		v = appendUvarint(v, uint64(g.Arch))
		ext = appendUvarint(ext, extSigsys)
		ext = appendBytes(ext, v)
		s.extField = v
	}
	if e.Kind == event.KindPageFault && e.Fault.SP != 0 {
		ext = appendUvarint(ext, extFaultSP)
		ext = appendBytes(ext, appendUvarint(s.extField[:0], e.Fault.SP))
	}
	s.ext = ext
	return appendBytes(b, ext)
}

// Lists are stored as count+1, so that 0 keeps nil apart from empty.
func appendCount(b []byte, n int, isNil bool) []byte {
	if isNil {
		return append(b, 0)
	}
	return appendUvarint(b, uint64(n)+1)
}

func appendFrames(b []byte, fs []event.Frame) []byte {
	b = appendCount(b, len(fs), fs == nil)
	for _, f := range fs {
		b = appendUvarint(b, f.Addr)
		b = appendString(b, f.Name)
	}
	return b
}

func appendStacks(b []byte, sc *event.Syscall) []byte {
	b = appendFrames(b, sc.UserStack)
	b = appendCount(b, len(sc.Sleeps), sc.Sleeps == nil)
	for _, sl := range sc.Sleeps {
		b = appendUvarint(b, sl.Duration)
		b = appendUvarint(b, uint64(sl.Count))
		if sl.Preempted {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = appendFrames(b, sl.Stack)
		b = appendUvarint(b, uint64(sl.WakerPID))
		b = appendUvarint(b, uint64(sl.WakerTID))
		b = appendString(b, sl.WakerComm)
		b = appendFrames(b, sl.WakerStack)
	}
	return b
}

func b2u(c bool) uint64 {
	var u uint64
	if c {
		u = 1
	}
	return u
}

func bit(cond bool, b uint64) uint64 {
	if cond {
		return b
	}
	return 0
}

// appendNonZero writes v when it is non-zero, which is exactly when the
// corresponding mask bit was set.
func appendNonZero(b []byte, v uint64) []byte {
	if v == 0 {
		return b
	}
	return appendUvarint(b, v)
}

// sizeBound is an upper bound of e's encoded size, used to start a new block
// before a huge event would push one past maxSection.
func sizeBound(e *event.Event) int {
	n := 256 + len(e.Comm) // every fixed-size field at its longest, with room to spare
	switch e.Kind {
	case event.KindSyscall:
		for _, d := range e.Syscall.Data {
			n += len(d) + binary.MaxVarintLen64
		}
		n += framesBound(e.Syscall.UserStack) + 2*binary.MaxVarintLen64
		for _, sl := range e.Syscall.Sleeps {
			n += 6*binary.MaxVarintLen64 + 1 + len(sl.WakerComm) + framesBound(sl.Stack) + framesBound(sl.WakerStack)
		}
	case event.KindFork, event.KindExec, event.KindExit:
		n += len(e.Proc.ChildComm) + len(e.Proc.Filename) + len(e.Proc.CgroupPath) + 5*binary.MaxVarintLen64
		for _, a := range e.Proc.Argv {
			n += len(a) + binary.MaxVarintLen64
		}
		n += 2*binary.MaxVarintLen64 + 4*binary.MaxVarintLen64*len(e.Proc.Recent)
	case event.KindFutex:
		n += 13*binary.MaxVarintLen64 + framesBound(e.Futex.WaitStack) + framesBound(e.Futex.WakeStack)
	case event.KindReclaim:
		n += framesBound(e.Reclaim.Stack)
	case event.KindCPUWait:
		n += (24 + event.CPUWaitBuckets) * binary.MaxVarintLen64
		for _, h := range e.CPUWait.Held {
			n += 11*binary.MaxVarintLen64 + len(h.Comm)
		}
	case event.KindFaultWait:
		fw := &e.FaultWait
		n += 16*binary.MaxVarintLen64 + len(fw.Mem.Cgroup)
		for _, p := range fw.Places {
			n += 8*binary.MaxVarintLen64 + framesBound(p.Stack) + len(p.Map.Path)
		}
	}
	return n
}

func framesBound(fs []event.Frame) int {
	n := binary.MaxVarintLen64
	for _, f := range fs {
		n += 2*binary.MaxVarintLen64 + len(f.Name)
	}
	return n
}
