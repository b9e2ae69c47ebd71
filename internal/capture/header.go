package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/redact"
)

// Header describes the capture and the host it was recorded on: everything a
// reader on another machine needs to interpret the events.
type Header struct {
	Version  uint32 // of the file, filled in by Reader; writers always write the current Version
	Arch     event.Arch
	Hostname string            // uname nodename
	Kernel   string            // uname release and version
	BootTime int64             // Unix ns of CLOCK_MONOTONIC zero, to turn Event.Time into wall-clock time
	Start    int64             // Unix ns when the capture began
	Command  []string          // sysray's own command line
	Syscalls []string          // the host's syscall names, indexed by number, so the file names them anywhere
	Procs    []proc.Info       // the process table when the capture began
	Meta     map[string]string // open-ended host facts (vsyscall mode, audit status, ...)
}

// Trailer closes a complete capture.
type Trailer struct {
	Events uint64   // events in the file; the writer fills it in
	Drops  []uint64 // events the kernel lost, per CPU
	End    int64    // Unix ns when the capture ended; the writer uses the current time if zero
}

// The header and trailer use the Protocol Buffers wire format: any language
// can parse it with the schema in docs/capture-format.md (or dump it with
// `protoc --decode_raw`), unknown fields are skippable by construction, and,
// unlike JSON, it carries the non-UTF-8 bytes that paths and argv may hold.
// Field numbers are part of the format and must never be reused.
const (
	hArch     = 1
	hHostname = 2
	hKernel   = 3
	hBootTime = 4
	hStart    = 5
	hCommand  = 6
	hSyscalls = 7
	hProcs    = 8
	hMeta     = 9

	pPID     = 1
	pPPID    = 2
	pComm    = 3
	pExe     = 4
	pCmdline = 5
	pCgroup  = 6
	pStart   = 7
	pThreads = 8

	mKey   = 1
	mValue = 2

	tEvents = 1
	tDrops  = 2
	tEnd    = 3
	tBlocks = 4
)

const (
	wireVarint = 0
	wireI64    = 1
	wireLen    = 2
	wireI32    = 5
)

func pbTag(b []byte, field, wire int) []byte {
	return appendUvarint(b, uint64(field)<<3|uint64(wire))
}

// pbVarint omits zero values, as proto3 does for scalars.
func pbVarint(b []byte, field int, v uint64) []byte {
	if v == 0 {
		return b
	}
	return appendUvarint(pbTag(b, field, wireVarint), v)
}

func pbString(b []byte, field int, s string) []byte {
	return appendString(pbTag(b, field, wireLen), s)
}

func pbStrings(b []byte, field int, ss []string) []byte {
	for _, s := range ss {
		b = pbString(b, field, s)
	}
	return b
}

// pbMessage appends a nested message whose body fill produces; the body is
// built in place and then moved behind its length, avoiding a scratch buffer.
func pbMessage(b []byte, field int, fill func([]byte) []byte) []byte {
	b = pbTag(b, field, wireLen)
	start := len(b)
	b = fill(b)
	n := len(b) - start
	var lb [binary.MaxVarintLen64]byte
	l := binary.PutUvarint(lb[:], uint64(n))
	b = append(b, lb[:l]...)
	copy(b[start+l:], b[start:start+n])
	copy(b[start:], lb[:l])
	return b
}

func pbPacked(b []byte, field int, vs []uint64) []byte {
	if len(vs) == 0 {
		return b
	}
	return pbMessage(b, field, func(b []byte) []byte {
		for _, v := range vs {
			b = appendUvarint(b, v)
		}
		return b
	})
}

func (h *Header) marshal() []byte {
	var b []byte
	b = pbVarint(b, hArch, uint64(h.Arch))
	if h.Hostname != "" {
		b = pbString(b, hHostname, h.Hostname)
	}
	if h.Kernel != "" {
		b = pbString(b, hKernel, h.Kernel)
	}
	b = pbVarint(b, hBootTime, uint64(h.BootTime))
	b = pbVarint(b, hStart, uint64(h.Start))
	b = pbStrings(b, hCommand, h.Command)
	b = pbStrings(b, hSyscalls, h.Syscalls)
	for i := range h.Procs {
		p := &h.Procs[i]
		b = pbMessage(b, hProcs, func(b []byte) []byte {
			b = pbVarint(b, pPID, uint64(p.PID))
			b = pbVarint(b, pPPID, uint64(p.PPID))
			if p.Comm != "" {
				b = pbString(b, pComm, p.Comm)
			}
			if p.Exe != "" {
				b = pbString(b, pExe, p.Exe)
			}
			b = pbStrings(b, pCmdline, p.Cmdline)
			b = pbVarint(b, pCgroup, p.Cgroup)
			b = pbVarint(b, pStart, p.Start)
			threads := make([]uint64, len(p.Threads))
			for i, t := range p.Threads {
				threads[i] = uint64(t)
			}
			return pbPacked(b, pThreads, threads)
		})
	}
	// Sorted, so that equal headers give equal bytes.
	keys := make([]string, 0, len(h.Meta))
	for k := range h.Meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = pbMessage(b, hMeta, func(b []byte) []byte {
			return pbString(pbString(b, mKey, k), mValue, h.Meta[k])
		})
	}
	return b
}

func (t *Trailer) marshal(blocks uint64) []byte {
	var b []byte
	b = pbVarint(b, tEvents, t.Events)
	b = pbPacked(b, tDrops, t.Drops)
	b = pbVarint(b, tEnd, uint64(t.End))
	return pbVarint(b, tBlocks, blocks)
}

// pbField is one decoded field; which of v and b is set depends on wire.
type pbField struct {
	num  int
	wire int
	v    uint64
	b    []byte
}

// pbWalk calls fn for each field of a message. Unknown fields reach fn too
// and are ignored there, which is what lets newer writers add fields.
func pbWalk(b []byte, fn func(f *pbField) error) error {
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 || tag>>3 == 0 || tag>>3 > math.MaxInt32 {
			return errors.New("bad field tag")
		}
		b = b[n:]
		f := pbField{num: int(tag >> 3), wire: int(tag & 7)}
		switch f.wire {
		case wireVarint:
			f.v, n = binary.Uvarint(b)
			if n <= 0 {
				return errors.New("bad varint")
			}
			b = b[n:]
		case wireI64:
			if len(b) < 8 {
				return errors.New("short fixed64")
			}
			f.v = binary.LittleEndian.Uint64(b)
			b = b[8:]
		case wireI32:
			if len(b) < 4 {
				return errors.New("short fixed32")
			}
			f.v = uint64(binary.LittleEndian.Uint32(b))
			b = b[4:]
		case wireLen:
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return errors.New("bad length")
			}
			f.b = b[n : n+int(l)]
			b = b[n+int(l):]
		default:
			return fmt.Errorf("unsupported wire type %d", f.wire)
		}
		if err := fn(&f); err != nil {
			return err
		}
	}
	return nil
}

// want rejects a known field number that arrives with the wrong wire type:
// guessing would silently misread a file.
func (f *pbField) want(wire int) error {
	if f.wire != wire {
		return fmt.Errorf("field %d has wire type %d, want %d", f.num, f.wire, wire)
	}
	return nil
}

func (f *pbField) u32() (uint32, error) {
	if err := f.want(wireVarint); err != nil {
		return 0, err
	}
	if f.v > math.MaxUint32 {
		return 0, fmt.Errorf("field %d out of range", f.num)
	}
	return uint32(f.v), nil
}

func (f *pbField) str() (string, error) {
	if err := f.want(wireLen); err != nil {
		return "", err
	}
	return string(f.b), nil
}

// packed accepts both encodings of a repeated integer, as protobuf parsers
// must: packed (one length-delimited run) and one varint per element.
func (f *pbField) packed(dst []uint64, limit uint64) ([]uint64, error) {
	switch f.wire {
	case wireVarint:
		if f.v > limit {
			return nil, fmt.Errorf("field %d out of range", f.num)
		}
		return append(dst, f.v), nil
	case wireLen:
		for b := f.b; len(b) > 0; {
			v, n := binary.Uvarint(b)
			if n <= 0 || v > limit {
				return nil, fmt.Errorf("bad packed field %d", f.num)
			}
			dst = append(dst, v)
			b = b[n:]
		}
		return dst, nil
	}
	return nil, f.want(wireLen)
}

func (h *Header) unmarshal(b []byte) error {
	err := h.unmarshalFields(b)
	// As for exec events (decode.go): what the writer kept, the reader
	// hides unless it keeps secrets too.
	h.Command = redact.Argv(h.Command)
	for i := range h.Procs {
		h.Procs[i].Cmdline = redact.Argv(h.Procs[i].Cmdline)
	}
	return err
}

func (h *Header) unmarshalFields(b []byte) error {
	return pbWalk(b, func(f *pbField) error {
		var err error
		switch f.num {
		case hArch:
			var a uint32
			a, err = f.u32()
			if a > math.MaxUint8 {
				return fmt.Errorf("arch %d out of range", a)
			}
			h.Arch = event.Arch(a)
		case hHostname:
			h.Hostname, err = f.str()
		case hKernel:
			h.Kernel, err = f.str()
		case hBootTime:
			err = f.want(wireVarint)
			h.BootTime = int64(f.v)
		case hStart:
			err = f.want(wireVarint)
			h.Start = int64(f.v)
		case hCommand:
			var s string
			s, err = f.str()
			h.Command = append(h.Command, s)
		case hSyscalls:
			var s string
			s, err = f.str()
			h.Syscalls = append(h.Syscalls, s)
		case hProcs:
			if err = f.want(wireLen); err != nil {
				return err
			}
			var p proc.Info
			if err = unmarshalProc(&p, f.b); err != nil {
				return err
			}
			h.Procs = append(h.Procs, p)
		case hMeta:
			if err = f.want(wireLen); err != nil {
				return err
			}
			var k, v string
			err = pbWalk(f.b, func(f *pbField) error {
				var err error
				switch f.num {
				case mKey:
					k, err = f.str()
				case mValue:
					v, err = f.str()
				}
				return err
			})
			if h.Meta == nil {
				h.Meta = make(map[string]string)
			}
			h.Meta[k] = v
		}
		return err
	})
}

func unmarshalProc(p *proc.Info, b []byte) error {
	return pbWalk(b, func(f *pbField) error {
		var err error
		switch f.num {
		case pPID:
			p.PID, err = f.u32()
		case pPPID:
			p.PPID, err = f.u32()
		case pComm:
			p.Comm, err = f.str()
		case pExe:
			p.Exe, err = f.str()
		case pCmdline:
			var s string
			s, err = f.str()
			p.Cmdline = append(p.Cmdline, s)
		case pCgroup:
			err = f.want(wireVarint)
			p.Cgroup = f.v
		case pStart:
			err = f.want(wireVarint)
			p.Start = f.v
		case pThreads:
			var ts []uint64
			if ts, err = f.packed(nil, math.MaxUint32); err != nil {
				return err
			}
			for _, t := range ts {
				p.Threads = append(p.Threads, uint32(t))
			}
		}
		return err
	})
}

func (t *Trailer) unmarshal(b []byte) (blocks uint64, err error) {
	err = pbWalk(b, func(f *pbField) error {
		var err error
		switch f.num {
		case tEvents:
			err = f.want(wireVarint)
			t.Events = f.v
		case tDrops:
			t.Drops, err = f.packed(t.Drops, math.MaxUint64)
		case tEnd:
			err = f.want(wireVarint)
			t.End = int64(f.v)
		case tBlocks:
			err = f.want(wireVarint)
			blocks = f.v
		}
		return err
	})
	return blocks, err
}
