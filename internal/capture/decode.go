package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/redact"
)

// maxInterned bounds the comm intern table, so a file full of distinct names
// costs allocations rather than an ever-growing map.
const maxInterned = 1 << 14

// blockDecoder walks the records of one decompressed block. Malformed input
// sets bad instead of returning errors from every helper, which keeps the
// per-field code straight; the record is rejected once at its end.
type blockDecoder struct {
	state
	buf    []byte
	pos    int
	bad    string
	intern map[string]string

	// The block's times, when it keeps them apart from its records
	// (version 2); in version 1 they are read from buf in line.
	split bool
	times []byte
	tpos  int
}

// start begins a block of the given format version, given its payload.
func (d *blockDecoder) start(payload []byte, version uint32) error {
	d.state.reset()
	d.pos, d.tpos, d.bad = 0, 0, ""
	d.split = version >= 2
	if !d.split {
		d.buf, d.times = payload, nil
		return nil
	}
	if len(payload) < recordsLenSize {
		return errors.New("payload shorter than its records' length")
	}
	n := uint64(binary.LittleEndian.Uint32(payload))
	if n > uint64(len(payload)-recordsLenSize) {
		return fmt.Errorf("records of %d bytes in a payload of %d", n, len(payload))
	}
	d.buf = payload[recordsLenSize : recordsLenSize+n]
	d.times = payload[recordsLenSize+n:]
	return nil
}

// left is how many bytes of the block no record has read.
func (d *blockDecoder) left() int {
	return len(d.buf) - d.pos + len(d.times) - d.tpos
}

func (d *blockDecoder) fail(why string) {
	if d.bad == "" {
		d.bad = why
	}
	d.pos = len(d.buf) // stops further reads from making progress
	d.tpos = len(d.times)
}

// time reads the next varint of the block's times. It is uvarint again on
// the other stream, on purpose: a shared reader taking the stream and its
// position by pointer made reading 10% slower (BenchmarkRead, GOMAXPROCS=1:
// 31.5-32.6 ns an event against 34.3-37.3), since times are rarely one byte
// and every one of them then paid a call.
func (d *blockDecoder) time() uint64 {
	if !d.split {
		return d.uvarint()
	}
	if p := d.tpos; p < len(d.times) && d.times[p] < 0x80 {
		d.tpos++
		return uint64(d.times[p])
	}
	v, n := binary.Uvarint(d.times[d.tpos:])
	if n <= 0 {
		if n == 0 {
			d.fail("times run past the end of the block")
		} else {
			d.fail("varint overflows 64 bits")
		}
		return 0
	}
	d.tpos += n
	return v
}

func (d *blockDecoder) byte() byte {
	if d.pos >= len(d.buf) {
		d.fail("record runs past the end of the block")
		return 0
	}
	c := d.buf[d.pos]
	d.pos++
	return c
}

func (d *blockDecoder) uvarint() uint64 {
	if p := d.pos; p < len(d.buf) && d.buf[p] < 0x80 {
		d.pos++
		return uint64(d.buf[p])
	}
	v, n := binary.Uvarint(d.buf[d.pos:])
	if n <= 0 {
		if n == 0 {
			d.fail("record runs past the end of the block")
		} else {
			d.fail("varint overflows 64 bits")
		}
		return 0
	}
	d.pos += n
	return v
}

func (d *blockDecoder) u32() uint32 {
	v := d.uvarint()
	if v > math.MaxUint32 {
		d.fail("32-bit field out of range")
	}
	return uint32(v)
}

func (d *blockDecoder) i32() int32 {
	v := unzigzag(d.uvarint())
	if v != int64(int32(v)) {
		d.fail("32-bit field out of range")
	}
	return int32(v)
}

// bytes returns the next length-prefixed field as a view into the block.
// The length is checked against what is left, so it can never cause an
// allocation larger than the block itself.
func (d *blockDecoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.buf)-d.pos) {
		d.fail("field length runs past the end of the block")
		return nil
	}
	b := d.buf[d.pos : d.pos+int(n)]
	d.pos += int(n)
	return b
}

func (d *blockDecoder) string() string {
	return string(d.bytes())
}

// internString avoids an allocation per distinct comm per block; consumers
// keep the returned strings, so they must not alias the block buffer.
func (d *blockDecoder) internString() string {
	b := d.bytes()
	if s, ok := d.intern[string(b)]; ok {
		return s
	}
	s := string(b)
	if d.intern == nil {
		d.intern = make(map[string]string)
	}
	if len(d.intern) < maxInterned {
		d.intern[s] = s
	}
	return s
}

// next decodes one record into e, overwriting all of it.
func (d *blockDecoder) next(e *event.Event) error {
	*e = event.Event{}
	kind := event.Kind(d.byte())
	flags := d.uvarint()
	if flags&^fKnown != 0 {
		d.fail("unknown record flags")
	}
	if flags&fKind != 0 && kind != event.KindSyscall && kind != event.KindPageFault {
		d.fail("kind-specific flags on a kind without them")
	}
	e.Kind = kind
	e.Time = d.prevEnd + uint64(unzigzag(d.time()))
	e.TID = d.prevTID
	if flags&fTID != 0 {
		e.TID = d.u32()
	}
	th := d.thread(e.TID)
	e.CPU, e.PID, e.Comm, e.Cgroup = th.cpu, th.pid, th.comm, th.cgroup
	if flags&fCPU != 0 {
		e.CPU = d.u32()
	}
	if flags&fPID != 0 {
		e.PID = d.u32()
	}
	if flags&fComm != 0 {
		e.Comm = d.internString()
	}
	if flags&fCgroup != 0 {
		e.Cgroup = d.uvarint()
	}
	th.cpu, th.pid, th.comm, th.cgroup = e.CPU, e.PID, e.Comm, e.Cgroup
	d.prevTID, d.prevCPU, d.prevCgroup = e.TID, e.CPU, e.Cgroup

	switch kind {
	case event.KindSyscall:
		d.syscall(e, th, flags)
	case event.KindPageFault:
		f := &e.Fault
		f.Addr, f.IP, f.Error, f.SP = th.faultAddr, th.faultIP, th.faultErr, 0
		if flags&fAddr != 0 {
			f.Addr += uint64(unzigzag(d.uvarint()))
		}
		if flags&fIP != 0 {
			f.IP += uint64(unzigzag(d.uvarint()))
		}
		if flags&fErr != 0 {
			f.Error += uint64(unzigzag(d.uvarint()))
		}
		th.faultAddr, th.faultIP, th.faultErr = f.Addr, f.IP, f.Error
	case event.KindVsyscall:
		mask := d.mask(vsNr | vsCallerIP)
		v := &e.Vsyscall
		if mask&vsNr != 0 {
			v.Nr = d.u32()
		}
		if mask&vsCallerIP != 0 {
			v.CallerIP = d.uvarint()
		}
	case event.KindSignalGenerate, event.KindSignalDeliver:
		mask := d.mask(sigHandler<<1 - 1)
		g := &e.Signal
		if mask&sigSig != 0 {
			g.Sig = d.i32()
		}
		if mask&sigCode != 0 {
			g.Code = d.i32()
		}
		if mask&sigSender != 0 {
			g.SenderPID = d.u32()
		}
		if mask&sigTargetPID != 0 {
			g.TargetPID = d.u32()
		}
		if mask&sigTargetTID != 0 {
			g.TargetTID = d.u32()
		}
		if mask&sigAddr != 0 {
			g.Addr = d.uvarint()
		}
		if mask&sigResult != 0 {
			g.Result = d.i32()
		}
		g.Group = mask&sigGroup != 0
		if mask&sigHandler != 0 {
			g.Handler = d.uvarint()
		}
	case event.KindFork, event.KindExec, event.KindExit:
		d.proc(&e.Proc)
	case event.KindDrop:
		if d.mask(dropCount)&dropCount != 0 {
			e.Drop.Count = d.uvarint()
		}
	case event.KindReclaim:
		y := &blockDecoder{buf: d.bytes()}
		r := &e.Reclaim
		r.Duration = y.uvarint()
		r.Pages = y.uvarint()
		r.Nr = int32(unzigzag(y.uvarint()))
		r.Stack = y.frames()
		if y.pos < len(y.buf) {
			r.What = event.ReclaimWhat(y.uvarint())
			r.Order = int16(unzigzag(y.uvarint()))
			r.Status = int32(unzigzag(y.uvarint()))
			r.FaultAddr = y.uvarint()
		}
		if y.bad != "" {
			d.fail("reclaim: " + y.bad)
		}
	case event.KindFutex:
		y := &blockDecoder{buf: d.bytes()}
		f := &e.Futex
		f.Addr = y.uvarint()
		for _, p := range [...]*uint64{&f.Waits, &f.Slept, &f.Woken, &f.Timeouts, &f.Again, &f.ByProc,
			&f.WaitNS, &f.MaxNS, &f.Wakes, &f.Woke, &f.WokeOne} {
			*p = y.uvarint()
		}
		f.WakerTID = y.u32()
		f.WaitStack = y.frames()
		f.WakeStack = y.frames()
		if y.bad != "" {
			d.fail("futex: " + y.bad)
		}
	case event.KindFaultWait:
		y := &blockDecoder{buf: d.bytes()}
		y.faultWait(&e.FaultWait)
		if y.bad != "" {
			d.fail("fault_wait: " + y.bad)
		}
	case event.KindCPUWait:
		y := &blockDecoder{buf: d.bytes()}
		y.cpuWait(&e.CPUWait)
		if y.bad != "" {
			d.fail("cpu_wait: " + y.bad)
		}
	default:
		d.bytes() // a body only a newer reader understands
	}
	d.prevEnd = e.End()

	if flags&fExt != 0 {
		d.ext(e, d.bytes())
	}
	if d.bad != "" {
		return errors.New(d.bad)
	}
	return nil
}

// ext reads a record extension: (tag, value) fields. Tags this version does
// not know are fields a newer writer added; skipping them is the contract.
func (d *blockDecoder) ext(e *event.Event, b []byte) {
	if d.bad != "" {
		return
	}
	x := &blockDecoder{buf: b}
	for x.pos < len(x.buf) && x.bad == "" {
		tag := x.uvarint()
		v := x.bytes()
		if x.bad != "" {
			break
		}
		if tag == extCgroupPath && (e.Kind == event.KindFork || e.Kind == event.KindExec || e.Kind == event.KindExit) {
			e.Proc.CgroupPath = string(v)
		}
		if tag == extRecent && (e.Kind == event.KindFork || e.Kind == event.KindExec || e.Kind == event.KindExit) {
			y := &blockDecoder{buf: v}
			if n, ok := y.count(); ok {
				e.Proc.Recent = make([]event.RecentCall, 0, n)
				for range n {
					c := event.RecentCall{Time: y.uvarint(), Nr: uint32(y.uvarint())}
					c.Ret = unzigzag(y.uvarint())
					c.Latency = y.uvarint()
					e.Proc.Recent = append(e.Proc.Recent, c)
				}
			}
			if y.bad != "" {
				d.fail("recent calls: " + y.bad)
			}
		}
		if tag == extArgvCut && (e.Kind == event.KindFork || e.Kind == event.KindExec || e.Kind == event.KindExit) {
			e.Proc.ArgvTruncated = true
		}
		if tag == extApprox && e.Kind == event.KindSyscall {
			e.Syscall.Approx = true
		}
		if tag == extMaps && e.Kind == event.KindSyscall {
			y := &blockDecoder{buf: v}
			e.Syscall.Maps = uint32(y.uvarint())
			if y.bad != "" {
				d.fail("mappings: " + y.bad)
			}
		}
		if tag == extRefused && e.Kind == event.KindSyscall {
			e.Syscall.Refused = true
		}
		if tag == extQueued && e.Kind == event.KindSyscall {
			y := &blockDecoder{buf: v}
			e.Syscall.Queued = y.uvarint()
			if y.bad != "" {
				d.fail("time queued: " + y.bad)
			}
		}
		if tag == extSigsys && (e.Kind == event.KindSignalGenerate || e.Kind == event.KindSignalDeliver) {
			y := &blockDecoder{buf: v}
			e.Signal.Syscall = int32(unzigzag(y.uvarint()))
			e.Signal.Arch = uint32(y.uvarint())
			if y.bad != "" {
				d.fail("seccomp signal: " + y.bad)
			}
		}
		if tag == extFaultSP && e.Kind == event.KindPageFault {
			y := &blockDecoder{buf: v}
			e.Fault.SP = y.uvarint()
			if y.bad != "" {
				d.fail("fault stack pointer: " + y.bad)
			}
		}
		if tag == extStacks && e.Kind == event.KindSyscall {
			y := &blockDecoder{buf: v}
			y.stacks(&e.Syscall)
			if y.bad != "" {
				d.fail("stacks: " + y.bad)
			}
		}
	}
}

// count reads a list length stored as count+1; ok is false for a nil list.
func (d *blockDecoder) count() (n uint64, ok bool) {
	v := d.uvarint()
	if v == 0 {
		return 0, false
	}
	// every element takes at least two bytes
	if v-1 > uint64(len(d.buf)-d.pos) {
		d.fail("list length beyond the record")
		return 0, false
	}
	return v - 1, true
}

func (d *blockDecoder) frames() []event.Frame {
	n, ok := d.count()
	if !ok {
		return nil
	}
	fs := make([]event.Frame, n)
	for i := range fs {
		fs[i].Addr = d.uvarint()
		fs[i].Name = d.string()
	}
	return fs
}

func (d *blockDecoder) stacks(sc *event.Syscall) {
	sc.UserStack = d.frames()
	n, ok := d.count()
	if !ok {
		return
	}
	sc.Sleeps = make([]event.Sleep, n)
	for i := range sc.Sleeps {
		sl := &sc.Sleeps[i]
		sl.Duration = d.uvarint()
		sl.Count = d.u32()
		sl.Preempted = d.byte() != 0
		sl.Stack = d.frames()
		sl.WakerPID = d.u32()
		sl.WakerTID = d.u32()
		sl.WakerComm = d.string()
		sl.WakerStack = d.frames()
	}
}

// mask reads a field mask and rejects bits this version does not define:
// fields are added through the extension, never through new mask bits.
func (d *blockDecoder) mask(known uint64) uint64 {
	m := d.uvarint()
	if m&^known != 0 {
		d.fail("unknown field-mask bits")
	}
	return m
}

func (d *blockDecoder) syscall(e *event.Event, th *thread, flags uint64) {
	sc := &e.Syscall
	sc.Nr = th.nr
	if flags&fNr != 0 {
		sc.Nr = d.u32()
	}
	prev := d.state.syscall(th, sc.Nr)
	sc.Args, sc.Ret = prev.args, prev.ret
	if flags&fSys != 0 {
		changed := d.byte()
		if changed == 0 {
			d.fail("empty syscall change byte")
		}
		for i := range sc.Args {
			if changed&(1<<i) != 0 {
				sc.Args[i] += uint64(unzigzag(d.uvarint()))
			}
		}
		if changed&sysRet != 0 {
			sc.Ret += unzigzag(d.uvarint())
		}
		sc.Unfinished = changed&sysUnfinished != 0
		prev.args, prev.ret = sc.Args, sc.Ret
	}
	sc.Latency = d.time()
	if flags&fData == 0 {
		return
	}
	mask := d.mask(1<<12 - 1)
	if mask == 0 {
		d.fail("empty data mask")
	}
	for i := range sc.Truncated {
		sc.Truncated[i] = mask&(1<<(6+i)) != 0
	}
	// One allocation holds all of the event's data: the caller owns it, so
	// it cannot alias the block buffer, which is reused.
	var views [6][]byte
	total := 0
	for i := range views {
		if mask&(1<<i) != 0 {
			views[i] = d.bytes()
			total += len(views[i])
		}
	}
	if d.bad != "" {
		return
	}
	all := make([]byte, total)
	off := 0
	for i, v := range views {
		if mask&(1<<i) != 0 {
			n := copy(all[off:], v)
			sc.Data[i] = all[off : off+n : off+n]
			off += n
		}
	}
}

func (d *blockDecoder) proc(p *event.Proc) {
	mask := d.mask(procUnfinished<<1 - 1)
	if mask&procChildPID != 0 {
		p.ChildPID = d.u32()
	}
	if mask&procChildTID != 0 {
		p.ChildTID = d.u32()
	}
	if mask&procChildComm != 0 {
		p.ChildComm = d.internString()
	}
	if mask&procFilename != 0 {
		p.Filename = d.string()
	}
	if mask&procArgv != 0 {
		n := d.uvarint()
		// Every argument takes at least its length byte, which bounds the
		// slice by the bytes left rather than by a number from the file.
		if n > uint64(len(d.buf)-d.pos) {
			d.fail("argument count runs past the end of the block")
			n = 0
		}
		p.Argv = make([]string, n)
		for i := range p.Argv {
			p.Argv[i] = d.string()
		}
		// A capture written with --keep-secrets, or by an older writer,
		// still shows none unless the reader keeps them too.
		p.Argv = redact.Argv(p.Argv)
	}
	if mask&procOldTID != 0 {
		p.OldTID = d.u32()
	}
	if mask&procExitCode != 0 {
		p.ExitCode = d.i32()
	}
	p.Thread = mask&procThread != 0
	p.GroupDead = mask&procGroupDead != 0
	p.Unfinished = mask&procUnfinished != 0
}
