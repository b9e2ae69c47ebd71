package probe

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/redact"
)

// Record layouts from bpf/sysray.h. Decoding by hand is several times faster
// than encoding/binary on this path, which runs for every event.
const (
	hdrSize     = 48
	sysSize     = 136
	faultSize   = 80
	vsysSize    = 64
	sigSize     = 96
	forkSize    = 72
	execSize    = 1144
	exitSize    = 56
	recentSize  = 312
	reclaimSize = 88
	runqSize    = 376
	recentMax   = 8

	dataSlot = 256
	argvLen  = 512

	sleepSize  = 48
	sleepsSize = 200
	maxSleeps  = 4
)

const (
	fUnfinished = 1
	fThread     = 2
	fGroupDead  = 4
	fGroup      = 8
	fSleeps     = 16
	fApprox     = 32
	fRefused    = 64
)

var le = binary.LittleEndian

// recSize is the smallest valid record of each kind.
var recSize = [...]int{
	event.KindSyscall: sysSize, event.KindPageFault: faultSize, event.KindVsyscall: vsysSize,
	event.KindSignalGenerate: sigSize, event.KindSignalDeliver: sigSize, event.KindFork: forkSize,
	event.KindExec: execSize, event.KindExit: exitSize, event.KindRecent: recentSize, event.KindReclaim: reclaimSize,
	event.KindFaultWait: fwSize,
	event.KindCPUWait:   runqSize,
}

// comms turns the kernel's fixed 16-byte comm into a string without
// allocating for names already seen. The merger's records alternate between
// a few threads (a server and its clients under redis-benchmark), so the last
// few names are checked, two word compares each, before the map: with only
// the last one kept, hashing for the map was 6% of record's CPU on redis.
type comms struct {
	recent [4]struct {
		k [16]byte
		s string
	}
	next int // the recent entry to replace
	m    map[[16]byte]string
}

func (c *comms) get(b []byte) string {
	var k [16]byte
	copy(k[:], b)
	// A zero entry maps the zero key to "", which lookup would too.
	for i := range c.recent {
		if c.recent[i].k == k {
			return c.recent[i].s
		}
	}
	s := c.lookup(k)
	c.recent[c.next].k, c.recent[c.next].s = k, s
	c.next = (c.next + 1) % len(c.recent)
	return s
}

func (c *comms) lookup(k [16]byte) string {
	if c.m == nil {
		c.m = map[[16]byte]string{}
	}
	if s, ok := c.m[k]; ok {
		return s
	}
	n := bytes.IndexByte(k[:], 0)
	if n < 0 {
		n = len(k)
	}
	s := string(k[:n])
	if len(c.m) < 1<<16 {
		c.m[k] = s
	}
	return s
}

// stackFunc reads a stack by its id in the kernel's stack map.
type stackFunc func(id int32) []uint64

// decode fills e from record b. e must be the zero Event or one decode
// filled (the merger decodes every record into one event): only what the
// previous record's kind used is cleared. Clearing all 624 bytes of an event
// for every record, through a temporary as a composite literal compiles, was
// more than half of decode's time under redis.
func decode(b []byte, e *event.Event, cm *comms, stacks stackFunc) error {
	if len(b) < hdrSize {
		return fmt.Errorf("record of %d bytes is shorter than its header", len(b))
	}
	if e.Kind == event.KindSyscall && event.Kind(b[0]) == event.KindSyscall {
		// A syscall after a syscall: the fields below set every other
		// one, and zeroing all 300 bytes of Syscall was a quarter of
		// decode's time.
		s := &e.Syscall
		if s.UserStack != nil || s.Sleeps != nil {
			s.UserStack, s.Sleeps = nil, nil
		}
		for i := range s.Data {
			if s.Data[i] != nil {
				s.Data[i] = nil
			}
		}
		s.Truncated = [6]bool{}
	} else {
		clearKind(e)
	}
	e.Kind = event.Kind(b[0])
	e.CPU = le.Uint32(b[4:])
	e.PID = le.Uint32(b[8:])
	e.TID = le.Uint32(b[12:])
	e.Time = le.Uint64(b[16:])
	e.Cgroup = le.Uint64(b[24:])
	e.Comm = cm.get(b[32:48])
	flags := b[1]
	var need int
	if int(e.Kind) < len(recSize) {
		need = recSize[e.Kind]
	}
	if need == 0 {
		return fmt.Errorf("record of unknown kind %d", b[0])
	}
	if len(b) < need {
		return fmt.Errorf("%s record of %d bytes, want %d", e.Kind, len(b), need)
	}
	switch e.Kind {
	case event.KindSyscall:
		s := &e.Syscall
		s.Latency = le.Uint64(b[48:])
		s.Ret = int64(le.Uint64(b[56:]))
		for i := range s.Args {
			s.Args[i] = le.Uint64(b[64+8*i:])
		}
		s.Nr = le.Uint32(b[112:])
		s.Maps = le.Uint32(b[124:])
		s.Queued = le.Uint64(b[128:])
		s.Unfinished = flags&fUnfinished != 0
		s.Approx = flags&fApprox != 0
		s.Refused = flags&fRefused != 0
		if s.Unfinished {
			s.Ret = 0
		}
		off := sysSize
		if flags&fSleeps != 0 {
			if len(b) < sysSize+sleepsSize {
				return fmt.Errorf("syscall record with sleeps of %d bytes", len(b))
			}
			decodeSleeps(b[sysSize:sysSize+sleepsSize], s, cm, stacks)
			off += sleepsSize
		}
		trunc, set := b[122], b[123]
		for i := 0; i < 2; i++ {
			n := int(le.Uint16(b[116+2*i:]))
			arg := int(b[120+i])
			if set&(1<<i) == 0 {
				continue
			}
			if arg >= 6 || off+n > len(b) {
				return fmt.Errorf("syscall record: captured argument %d of %d bytes overruns the record", arg, n)
			}
			s.Data[arg] = make([]byte, n) // non-nil even when empty: "" is not "not captured"
			copy(s.Data[arg], b[off:off+n])
			s.Truncated[arg] = trunc&(1<<i) != 0
			off += n
		}
	case event.KindPageFault:
		e.Fault = event.Fault{Addr: le.Uint64(b[48:]), IP: le.Uint64(b[56:]), Error: le.Uint64(b[64:]), SP: le.Uint64(b[72:])}
	case event.KindVsyscall:
		e.Vsyscall = event.Vsyscall{CallerIP: le.Uint64(b[48:]), Nr: le.Uint32(b[56:])}
	case event.KindSignalGenerate, event.KindSignalDeliver:
		e.Signal = event.Signal{
			Sig:       int32(le.Uint32(b[48:])),
			Code:      int32(le.Uint32(b[52:])),
			SenderPID: le.Uint32(b[56:]),
			TargetPID: le.Uint32(b[60:]),
			TargetTID: le.Uint32(b[64:]),
			Result:    int32(le.Uint32(b[68:])),
			Addr:      le.Uint64(b[72:]),
			Handler:   le.Uint64(b[80:]),
			Group:     flags&fGroup != 0,
		}
		if e.Signal.Sig == event.SIGSYS && e.Signal.Code == event.SysSeccomp {
			e.Signal.Syscall = int32(le.Uint32(b[88:]))
			e.Signal.Arch = le.Uint32(b[92:])
		}
	case event.KindFork:
		e.Proc = event.Proc{
			ChildPID:  le.Uint32(b[48:]),
			ChildTID:  le.Uint32(b[52:]),
			ChildComm: cm.get(b[56:72]),
			Thread:    flags&fThread != 0,
		}
	case event.KindExec:
		flen := min(int(le.Uint16(b[52:])), dataSlot)
		alen := min(int(le.Uint16(b[54:])), argvLen)
		e.Proc = event.Proc{
			OldTID:   le.Uint32(b[48:]),
			Filename: string(b[56 : 56+flen]),
			Argv:     redact.Argv(splitArgv(b[312 : 312+alen])),
			// The record keeps min(length, argvLen) and not the length:
			// a full copy is all that says the command line went on.
			ArgvTruncated: alen == argvLen,
			CgroupPath:    cgroupPath(b[824:1144]),
		}
	case event.KindExit:
		e.Proc = event.Proc{ExitCode: int32(le.Uint32(b[48:])), GroupDead: flags&fGroupDead != 0}
	case event.KindRecent:
		n := min(int(le.Uint32(b[48:])), recentMax)
		e.Proc.Recent = make([]event.RecentCall, n)
		for i := range n {
			c := b[56+32*i:]
			e.Proc.Recent[i] = event.RecentCall{Time: le.Uint64(c), Latency: le.Uint64(c[8:]),
				Ret: int64(le.Uint64(c[16:])), Nr: le.Uint32(c[24:])}
		}
	case event.KindReclaim:
		e.Reclaim = event.Reclaim{Duration: le.Uint64(b[48:]), Pages: le.Uint64(b[56:]), Nr: int32(le.Uint32(b[64:])),
			Stack: stackFrames(int32(le.Uint32(b[68:])), stacks), FaultAddr: le.Uint64(b[72:]),
			What: event.ReclaimWhat(le.Uint16(b[80:])), Order: int16(le.Uint16(b[82:])), Status: int32(le.Uint32(b[84:]))}
	case event.KindFaultWait:
		decodeFaultWait(b, &e.FaultWait, stacks)
	case event.KindCPUWait:
		decodeCPUWait(b, &e.CPUWait, cm)
	}
	return nil
}

// clearKind zeroes the part of e its kind uses; the rest of a decoded event
// is zero already.
func clearKind(e *event.Event) {
	switch e.Kind {
	case event.KindSyscall:
		e.Syscall = event.Syscall{}
	case event.KindPageFault:
		e.Fault = event.Fault{}
	case event.KindVsyscall:
		e.Vsyscall = event.Vsyscall{}
	case event.KindSignalGenerate, event.KindSignalDeliver:
		e.Signal = event.Signal{}
	case event.KindFork, event.KindExec, event.KindExit, event.KindRecent:
		e.Proc = event.Proc{}
	case event.KindDrop:
		e.Drop = event.Drop{}
	case event.KindReclaim:
		e.Reclaim = event.Reclaim{}
	case event.KindFaultWait:
		e.FaultWait = event.FaultWait{}
	case event.KindCPUWait:
		e.CPUWait = event.CPUWait{}
	}
}

// stackFrames reads a stack by id into frames still to be named.
func stackFrames(id int32, stacks stackFunc) []event.Frame {
	if stacks == nil {
		return nil
	}
	addrs := stacks(id)
	if len(addrs) == 0 {
		return nil
	}
	f := make([]event.Frame, len(addrs))
	for i, a := range addrs {
		f[i].Addr = a
	}
	return f
}

func decodeSleeps(b []byte, s *event.Syscall, cm *comms, stacks stackFunc) {
	frames := func(id int32) []event.Frame { return stackFrames(id, stacks) }
	s.UserStack = frames(int32(le.Uint32(b[0:])))
	n := min(int(le.Uint32(b[4:])), maxSleeps)
	s.Sleeps = make([]event.Sleep, n)
	for i := range n {
		r := b[8+i*sleepSize:]
		s.Sleeps[i] = event.Sleep{
			Duration:   le.Uint64(r[0:]),
			Count:      le.Uint32(r[8:]),
			Stack:      frames(int32(le.Uint32(r[12:]))),
			WakerPID:   le.Uint32(r[16:]),
			WakerTID:   le.Uint32(r[20:]),
			WakerStack: frames(int32(le.Uint32(r[24:]))),
			Preempted:  r[28] != 0,
			WakerComm:  cm.get(r[32:48]),
		}
	}
	// Longest first: that is where the time went.
	sort.Slice(s.Sleeps, func(i, j int) bool { return s.Sleeps[i].Duration > s.Sleeps[j].Duration })
}

// cgroupPath joins the cgroup components an exec record carries (leaf
// first, empty past the root) into "/a/b/leaf". The root's own name is
// empty, so a path shorter than CG_LEVELS is whole; a longer one is its tail.
func cgroupPath(b []byte) string {
	const levels, size = 4, 80
	var parts []string
	for i := range levels {
		n := b[i*size : (i+1)*size]
		if j := bytes.IndexByte(n, 0); j >= 0 {
			n = n[:j]
		}
		if len(n) == 0 {
			break
		}
		parts = append(parts, string(n))
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return "/" + strings.Join(parts, "/")
}

func splitArgv(b []byte) []string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil
	}
	parts := bytes.Split(b, []byte{0})
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = string(p)
	}
	return out
}
