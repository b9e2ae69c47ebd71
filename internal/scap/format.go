package scap

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Block types (the pcapng-style framing scap uses).
const (
	blockSection  = 0x0A0D0D0A
	blockMachine  = 0x201
	blockProcV1   = 0x202
	blockFDList   = 0x203
	blockEvV1     = 0x204 // events without nparams in their header
	blockIfList   = 0x205
	blockUserList = 0x206
	blockProcV2   = 0x207
	blockEvFV1    = 0x208 // with flags, without nparams
	blockProcV3   = 0x209
	blockProcV4   = 0x210
	blockProcV5   = 0x211
	blockProcV6   = 0x212
	blockProcV7   = 0x213
	blockProcV8   = 0x214
	blockProcV9   = 0x215
	blockEvV2     = 0x216
	blockEvFV2    = 0x217
	blockFDListV2 = 0x218
	blockIfListV2 = 0x219
	blockUserV2   = 0x220
	blockEvV2L    = 0x221 // large payload: parameter lengths of 32 bits
	blockEvFV2L   = 0x222
	// Block types with the high bit set are the "internal" copies of
	// the v1 ones (written by old live readers): same layout.
	blockInternal = 0x80000000

	sectionMagic = 0x1A2B3C4D
)

// maxBlock bounds one block, and so the reader's memory: events without
// a large payload fit in 64 KiB; process lists of big hosts and large
// payload events (up to a container's JSON or a full argv) stay far below
// this. A longer block is taken for corruption, not allocated.
const maxBlock = 256 << 20

// maxParams bounds an event's parameter count: the widest event in the
// table has fewer than 40; a larger count is corruption.
const maxParams = 64

// ErrTruncated says the input ended inside a block.
var ErrTruncated = errors.New("scap: the file ends inside a block")

// Block is one block of a scap file; Body (without the framing) is valid
// until the next call to Next.
type Block struct {
	Type   uint32
	Offset int64 // of the block's first byte in the (decompressed) file
	Body   []byte
}

// Reader streams a scap file's blocks.
type Reader struct {
	r      *bufio.Reader
	off    int64
	buf    []byte
	Major  uint16 // of the last section header
	Minor  uint16
	closer io.Closer
}

// NewReader reads the section header block from r, decompressing gzip
// (scap files are often written .scap.gz, and sysdig reads either).
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	rd := &Reader{r: br}
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("scap: gzip: %w", err)
		}
		rd.r, rd.closer = bufio.NewReaderSize(zr, 1<<16), zr
	}
	b, err := rd.Next()
	if err == io.EOF {
		return nil, errors.New("scap: empty file")
	}
	if err != nil {
		return nil, err
	}
	if b.Type != blockSection {
		return nil, fmt.Errorf("scap: not a scap file: first block type %#x, want a section header %#x", b.Type, blockSection)
	}
	return rd, nil
}

// Close releases the decompressor, if any (not the underlying reader).
func (r *Reader) Close() error {
	if r.closer != nil {
		return r.closer.Close()
	}
	return nil
}

// Next returns the next block, io.EOF at a clean end, or ErrTruncated
// (wrapped) when the file stops inside one.
func (r *Reader) Next() (Block, error) {
	start := r.off
	var h [8]byte
	n, err := io.ReadFull(r.r, h[:])
	r.off += int64(n)
	if err == io.EOF {
		return Block{}, io.EOF
	}
	if err != nil {
		return Block{}, r.readErr(start, err)
	}
	typ := binary.LittleEndian.Uint32(h[0:])
	total := binary.LittleEndian.Uint32(h[4:])
	if typ == blockSection && total == 0x1C000000 {
		return Block{}, fmt.Errorf("scap: block at byte %d: a big-endian capture, not supported", start)
	}
	if total < 12 || total > maxBlock {
		return Block{}, fmt.Errorf("scap: block at byte %d (type %#x): length %d out of range [12, %d]", start, typ, total, maxBlock)
	}
	rest := int(total) - 8
	// Grow the buffer only as the bytes arrive, so that a length field
	// promising more than the file holds costs no more than the file.
	r.buf = r.buf[:0]
	for len(r.buf) < rest {
		chunk := min(rest-len(r.buf), 1<<20)
		if cap(r.buf)-len(r.buf) < chunk {
			nb := make([]byte, len(r.buf), len(r.buf)+max(chunk, len(r.buf)))
			copy(nb, r.buf)
			r.buf = nb
		}
		got, err := io.ReadFull(r.r, r.buf[len(r.buf):len(r.buf)+chunk])
		r.buf = r.buf[:len(r.buf)+got]
		r.off += int64(got)
		if err != nil {
			return Block{}, r.readErr(start, err)
		}
	}
	if tail := binary.LittleEndian.Uint32(r.buf[rest-4:]); tail != total {
		return Block{}, fmt.Errorf("scap: block at byte %d (type %#x): trailing length %d differs from leading %d: corrupted", start, typ, tail, total)
	}
	b := Block{Type: typ, Offset: start, Body: r.buf[:rest-4]}
	if typ == blockSection {
		if len(b.Body) < 8 {
			return Block{}, fmt.Errorf("scap: section header at byte %d: too short", start)
		}
		if m := binary.LittleEndian.Uint32(b.Body); m != sectionMagic {
			return Block{}, fmt.Errorf("scap: section header at byte %d: byte-order magic %#x, want %#x", start, m, sectionMagic)
		}
		r.Major = binary.LittleEndian.Uint16(b.Body[4:])
		r.Minor = binary.LittleEndian.Uint16(b.Body[6:])
	}
	return b, nil
}

func (r *Reader) readErr(start int64, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: the block at byte %d is cut after %d bytes", ErrTruncated, start, r.off-start)
	}
	return fmt.Errorf("scap: block at byte %d: %w", start, err)
}

// Offset is how many (decompressed) bytes have been read.
func (r *Reader) Offset() int64 { return r.off }

// eventType is one row of the event table (tables.go).
type eventType struct {
	name   string
	flags  uint32
	params []param
}

type param struct {
	name string
	typ  uint8
}

// Flags of the event table that the reader needs.
const (
	efOldVersion   = 1 << 9
	efLargePayload = 1 << 11
	efSyscall      = 1 << 31 // tables.go's mark of EC_SYSCALL: a syscall's event
)

// Parameter types (PT_*) the converter decodes.
const (
	ptInt8      = 1
	ptInt16     = 2
	ptInt32     = 3
	ptInt64     = 4
	ptUint8     = 5
	ptUint16    = 6
	ptUint32    = 7
	ptUint64    = 8
	ptCharbuf   = 9
	ptBytebuf   = 10
	ptErrno     = 11
	ptSockaddr  = 12
	ptFD        = 14
	ptPID       = 15
	ptFSPath    = 17
	ptSyscallID = 18
	ptSigtype   = 19
	ptFlags32   = 30
	ptFSRelPath = 43
)

// Event is one event of an event block. Params point into the block and
// are valid until the reader's next block.
type Event struct {
	CPU    uint16
	Flags  uint32
	Time   uint64 // ns since the Unix epoch
	TID    uint64
	Type   uint16
	Params [][]byte
}

// IsEvent says whether a block type holds one event.
func IsEvent(typ uint32) bool {
	switch typ &^ blockInternal {
	case blockEvV1, blockEvFV1, blockEvV2, blockEvFV2, blockEvV2L, blockEvFV2L:
		return true
	}
	return false
}

// Errors of ParseEvent that leave the file readable: the block framing
// is intact, only this event is skipped.
var (
	ErrUnknownType = errors.New("scap: event type not in the table")
	ErrBadEvent    = errors.New("scap: malformed event")
)

// ParseEvent decodes the event in an event block's body into e, whose
// Params slice is reused.
func ParseEvent(typ uint32, body []byte, e *Event) error {
	typ &^= blockInternal
	off := 2
	e.CPU, e.Flags = 0, 0
	if len(body) < off {
		return fmt.Errorf("%w: block of %d bytes", ErrBadEvent, len(body))
	}
	e.CPU = binary.LittleEndian.Uint16(body)
	if typ == blockEvFV1 || typ == blockEvFV2 || typ == blockEvFV2L {
		if len(body) < off+4 {
			return fmt.Errorf("%w: block of %d bytes", ErrBadEvent, len(body))
		}
		e.Flags = binary.LittleEndian.Uint32(body[off:])
		off += 4
	}
	v2 := typ == blockEvV2 || typ == blockEvFV2 || typ == blockEvV2L || typ == blockEvFV2L
	hdr := 22
	if v2 {
		hdr = 26
	}
	ev := body[off:]
	if len(ev) < hdr {
		return fmt.Errorf("%w: header needs %d bytes, block has %d", ErrBadEvent, hdr, len(ev))
	}
	e.Time = binary.LittleEndian.Uint64(ev[0:])
	e.TID = binary.LittleEndian.Uint64(ev[8:])
	evLen := binary.LittleEndian.Uint32(ev[16:])
	e.Type = binary.LittleEndian.Uint16(ev[20:])
	if evLen < uint32(hdr) || uint64(evLen) > uint64(len(ev)) {
		return fmt.Errorf("%w: type %d: length %d outside [%d, %d]", ErrBadEvent, e.Type, evLen, hdr, len(ev))
	}
	ev = ev[:evLen]
	if int(e.Type) >= len(eventTypes) || eventTypes[e.Type].name == "" {
		return fmt.Errorf("%w: %d", ErrUnknownType, e.Type)
	}
	info := &eventTypes[e.Type]
	lsize := 2
	var n int
	if v2 {
		np := binary.LittleEndian.Uint32(ev[22:])
		if np > maxParams {
			return fmt.Errorf("%w: type %d: %d parameters", ErrBadEvent, e.Type, np)
		}
		n = int(np)
		if info.flags&efLargePayload != 0 {
			lsize = 4
		}
	} else {
		// The v1 header has no count: the count is the one (at most the
		// table's) whose lengths add up to the event's length exactly.
		n = -1
		for try := len(info.params); try >= 0; try-- {
			end := hdr + 2*try
			if end > len(ev) {
				continue
			}
			sum := end
			for i := range try {
				sum += int(binary.LittleEndian.Uint16(ev[hdr+2*i:]))
			}
			if sum == len(ev) {
				n = try
				break
			}
		}
		if n < 0 {
			return fmt.Errorf("%w: type %d: no parameter count fits length %d", ErrBadEvent, e.Type, len(ev))
		}
	}
	pos := hdr + lsize*n
	if pos > len(ev) {
		return fmt.Errorf("%w: type %d: %d parameter lengths overrun length %d", ErrBadEvent, e.Type, n, len(ev))
	}
	e.Params = e.Params[:0]
	for i := range n {
		var l int
		if lsize == 4 {
			l = int(binary.LittleEndian.Uint32(ev[hdr+4*i:]))
		} else {
			l = int(binary.LittleEndian.Uint16(ev[hdr+2*i:]))
		}
		if l < 0 || l > len(ev)-pos {
			return fmt.Errorf("%w: type %d: parameter %d of %d bytes overruns the event", ErrBadEvent, e.Type, i, l)
		}
		e.Params = append(e.Params, ev[pos:pos+l])
		pos += l
	}
	return nil
}

// Name is the event type's name: a syscall's, or the tracer's own
// (procexit, switch, procinfo, ...).
func (e *Event) Name() string { return eventTypes[e.Type].name }

// Enter says whether the event is an enter event: scap numbers each
// enter/exit pair E, E+1 from 0, so enters are even.
func (e *Event) Enter() bool { return e.Type%2 == 0 }

// paramType is the table's type of parameter i, 0 when beyond the table.
func (e *Event) paramType(i int) uint8 {
	ps := eventTypes[e.Type].params
	if i < len(ps) {
		return ps[i].typ
	}
	return 0
}

// param finds a parameter by the table's name.
func (e *Event) param(name string) (int, bool) {
	for i, p := range eventTypes[e.Type].params {
		if i >= len(e.Params) {
			break
		}
		if p.name == name {
			return i, true
		}
	}
	return 0, false
}

// Int decodes parameter i as an integer of its own width, sign-extended
// for the signed types.
func (e *Event) Int(i int) (int64, bool) {
	if i >= len(e.Params) {
		return 0, false
	}
	b := e.Params[i]
	signed := false
	switch e.paramType(i) {
	case ptInt8, ptInt16, ptInt32, ptInt64, ptErrno, ptFD, ptPID:
		signed = true
	}
	switch len(b) {
	case 1:
		if signed {
			return int64(int8(b[0])), true
		}
		return int64(b[0]), true
	case 2:
		v := binary.LittleEndian.Uint16(b)
		if signed {
			return int64(int16(v)), true
		}
		return int64(v), true
	case 4:
		v := binary.LittleEndian.Uint32(b)
		if signed {
			return int64(int32(v)), true
		}
		return int64(v), true
	case 8:
		return int64(binary.LittleEndian.Uint64(b)), true
	}
	return 0, false
}

// IntNamed is Int of the parameter the table calls name.
func (e *Event) IntNamed(name string) (int64, bool) {
	if i, ok := e.param(name); ok {
		return e.Int(i)
	}
	return 0, false
}

// Str is a string parameter without its NUL.
func (e *Event) Str(i int) string {
	if i >= len(e.Params) {
		return ""
	}
	b := e.Params[i]
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return string(b)
}

// StrNamed is Str of the parameter the table calls name.
func (e *Event) StrNamed(name string) (string, bool) {
	if i, ok := e.param(name); ok {
		return e.Str(i), true
	}
	return "", false
}
