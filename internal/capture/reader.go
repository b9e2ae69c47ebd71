package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/klauspost/compress/s2"
	"github.com/sysray/sysray/internal/event"
)

// Reader reads the events of a capture in the order they were written. It is
// not safe for concurrent use.
type Reader struct {
	r   io.Reader
	f   *os.File // set when Open opened it, so Close closes it
	hdr Header
	tr  *Trailer
	dec blockDecoder

	version uint32 // of the file

	left     uint32 // events not yet returned from the current block
	count    uint32 // events in the current block
	blocks   uint64 // whole blocks read so far
	events   uint64 // events returned so far
	blockOff int64  // where the current block's frame starts, for messages
	off      int64  // bytes consumed from r

	stored []byte // payload as read, reused
	raw    []byte // payload decompressed, reused
	err    error  // sticky; io.EOF after a complete capture
}

// Internal outcomes of readFrame and readPayload, turned into messages by
// callers that know whether the header or the events were being read.
var (
	errAtEnd = errors.New("end of file at a frame boundary")
	errCut   = errors.New("end of file inside a frame")
	errTorn  = errors.New("last frame fails its checksum")
)

// Open opens the capture at path and reads its header.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.f = f
	return r, nil
}

// NewReader reads the header of the capture in r.
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{r: r}
	var pre [preludeSize]byte
	n, err := io.ReadFull(r, pre[:])
	rd.off = int64(n)
	if n < len(magic) && !strings.HasPrefix(magic, string(pre[:n])) || n >= len(magic) && string(pre[:len(magic)]) != magic {
		return nil, formatErr("not a sysray capture (bad magic)")
	}
	if err != nil {
		if err == io.EOF {
			return nil, truncErr("before its header: the file is empty; no events recovered")
		}
		return nil, rd.headerErr(err)
	}
	rd.version = binary.LittleEndian.Uint32(pre[len(magic):])
	if rd.version < 1 || rd.version > Version {
		return nil, formatErr("unsupported version %d (this reader supports versions 1 to %d)", rd.version, Version)
	}
	fr, err := rd.readFrame()
	if err != nil {
		return nil, rd.headerErr(err)
	}
	if fr.typ != frameHeader {
		return nil, formatErr("expected the header at offset %d, found a frame of type %d", preludeSize, fr.typ)
	}
	b, err := rd.readPayload(&fr)
	if err != nil {
		return nil, rd.headerErr(err)
	}
	if err := rd.hdr.unmarshal(b); err != nil {
		return nil, formatErr("header at offset %d: %v", preludeSize, err)
	}
	rd.hdr.Version = rd.version
	return rd, nil
}

func (r *Reader) headerErr(err error) error {
	switch {
	case err == errAtEnd || err == errCut || err == errTorn || err == io.ErrUnexpectedEOF:
		return truncErr("inside its header (the file is %d bytes); no events recovered", r.off)
	case errors.Is(err, ErrFormat):
		return err
	}
	return fmt.Errorf("capture: reading header: %w", err)
}

// Header returns the capture's header. The caller must not modify it.
func (r *Reader) Header() *Header { return &r.hdr }

// Trailer returns the trailer of a complete capture once Next has returned
// io.EOF, and nil before that or for a truncated capture.
func (r *Reader) Trailer() *Trailer { return r.tr }

// Close closes the file if Open opened it.
func (r *Reader) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// Next reads the next event into e, overwriting all of e. Slices and
// strings it stores in e are new or immutable, so the caller may keep them
// and reuse e.
//
// At the end of a complete capture Next returns io.EOF. When the capture was
// cut short, it first returns every event of every whole block and then an
// error wrapping ErrTruncated; corrupt data gives an error wrapping
// ErrFormat. Errors are final: later calls return the same error.
func (r *Reader) Next(e *event.Event) error {
	if r.left == 0 {
		if r.err != nil {
			return r.err
		}
		if err := r.nextBlock(); err != nil {
			r.err = err
			return err
		}
	}
	if err := r.dec.next(e); err != nil {
		return r.blockErr("event %d: %v", r.count-r.left+1, err)
	}
	r.left--
	if r.left == 0 && r.dec.left() != 0 {
		return r.blockErr("%d bytes follow its last event", r.dec.left())
	}
	r.events++
	return nil
}

func (r *Reader) blockErr(f string, args ...any) error {
	r.left = 0
	r.err = formatErr("block %d at offset %d: %s", r.blocks+1, r.blockOff, fmt.Sprintf(f, args...))
	return r.err
}

func (r *Reader) recovered() string {
	if r.blocks == 0 {
		return "before its first block (no events)"
	}
	return fmt.Sprintf("after block %d (%d events)", r.blocks, r.events)
}

// nextBlock moves to the next block that holds events, or to the end.
func (r *Reader) nextBlock() error {
	if r.count > 0 {
		r.blocks++
		r.count = 0
	}
	for {
		r.blockOff = r.off
		fr, err := r.readFrame()
		if err == nil {
			var b []byte
			switch fr.typ {
			case frameEvents:
				if b, err = r.readPayload(&fr); err == nil {
					if err = r.startBlock(&fr, b); err == nil && r.left > 0 {
						return nil
					}
				}
			case frameTrailer:
				if b, err = r.readPayload(&fr); err == nil {
					err = r.finish(b)
				}
			case frameHeader:
				err = formatErr("second header at offset %d", r.blockOff)
			default:
				// An optional addition from a newer writer, whatever
				// its codec: checked, then skipped.
				_, err = r.readStored(&fr)
			}
		}
		switch {
		case err == nil:
			continue
		case err == errAtEnd:
			return truncErr("%s; the file has no trailer, so its writer did not finish", r.recovered())
		case err == errCut || err == io.ErrUnexpectedEOF:
			return truncErr("%s; the rest of the file is incomplete", r.recovered())
		case err == errTorn:
			return truncErr("%s; the rest of the file is incomplete (its last frame fails its checksum, as an interrupted write leaves it)", r.recovered())
		case err == io.EOF || errors.Is(err, ErrFormat):
			return err
		}
		return fmt.Errorf("capture: reading block %d at offset %d: %w", r.blocks+1, r.blockOff, err)
	}
}

func (r *Reader) startBlock(fr *frame, b []byte) error {
	if uint64(fr.count)*minRecord > uint64(len(b)) {
		return formatErr("block %d at offset %d: %d events cannot fit in %d bytes", r.blocks+1, r.blockOff, fr.count, len(b))
	}
	if fr.count == 0 {
		if len(b) != 0 {
			return formatErr("block %d at offset %d: %d bytes but no events", r.blocks+1, r.blockOff, len(b))
		}
		r.blocks++ // pointless, but valid, and counted by the trailer
		return nil
	}
	if err := r.dec.start(b, r.version); err != nil {
		return formatErr("block %d at offset %d: %v", r.blocks+1, r.blockOff, err)
	}
	r.left, r.count = fr.count, fr.count
	return nil
}

// finish checks the trailer against what was read, which catches blocks
// lost without leaving a gap (say, a file concatenated from pieces).
func (r *Reader) finish(b []byte) error {
	var t Trailer
	blocks, err := t.unmarshal(b)
	if err != nil {
		return formatErr("trailer at offset %d: %v", r.blockOff, err)
	}
	if blocks != r.blocks || t.Events != r.events {
		return formatErr("trailer at offset %d counts %d blocks and %d events, but the file holds %d and %d", r.blockOff, blocks, t.Events, r.blocks, r.events)
	}
	var one [1]byte
	n, err := io.ReadFull(r.r, one[:])
	if n > 0 {
		return formatErr("data after the trailer at offset %d", r.off)
	}
	if err != io.EOF {
		return err
	}
	r.tr = &t
	return io.EOF
}

func (r *Reader) readFrame() (frame, error) {
	var b [frameSize]byte
	n, err := io.ReadFull(r.r, b[:])
	r.off += int64(n)
	switch {
	case err == io.EOF:
		return frame{}, errAtEnd
	case err == io.ErrUnexpectedEOF:
		return frame{}, errCut
	case err != nil:
		return frame{}, err
	case b == [frameSize]byte{}:
		// Filesystems may leave a zero-filled tail after a crash: the
		// size was updated but the data never written. That is an
		// incomplete write, not corruption.
		return frame{}, errCut
	}
	var fr frame
	if err := fr.parse(b[:]); err != nil {
		return frame{}, formatErr("frame at offset %d: %v", r.off-frameSize, err)
	}
	return fr, nil
}

// readPayload reads, checks and decompresses a frame's payload. The result
// is valid until the next call.
func (r *Reader) readPayload(fr *frame) ([]byte, error) {
	start := r.off - frameSize
	b, err := r.readStored(fr)
	if err != nil {
		return nil, err
	}
	switch fr.codec {
	case codecNone:
		return b, nil
	case codecZstd:
		dst := r.raw
		if cap(dst) < int(fr.rawLen) {
			// Sized by the frame (so bounded by maxSection) and only once
			// its checksum passed, which keeps corrupt lengths cheap.
			dst = make([]byte, 0, fr.rawLen)
		}
		out, err := decoder().DecodeAll(b, dst[:0:fr.rawLen])
		if err == nil && len(out) != int(fr.rawLen) {
			err = fmt.Errorf("decompressed to %d bytes, frame says %d", len(out), fr.rawLen)
		}
		if err != nil {
			return nil, formatErr("%s at offset %d: %v", r.section(fr), start, err)
		}
		r.raw = dst // not out: its capacity was clipped to this block
		return out, nil
	case codecS2:
		if r.version < 3 {
			return nil, formatErr("%s at offset %d: codec %d (S2) in a version %d file", r.section(fr), start, fr.codec, r.version)
		}
		out, err := s2Payload(b, int(fr.rawLen), r.raw)
		if err != nil {
			return nil, formatErr("%s at offset %d: %v", r.section(fr), start, err)
		}
		r.raw = out[:0]
		return out, nil
	}
	return nil, formatErr("%s at offset %d: unknown codec %d", r.section(fr), start, fr.codec)
}

// readStored reads and checks a frame's payload as stored.
func (r *Reader) readStored(fr *frame) ([]byte, error) {
	start := r.off - frameSize
	b, err := r.readN(int(fr.length))
	if err != nil {
		if err == io.EOF {
			err = errCut
		}
		return nil, err
	}
	if crc32.Checksum(b, castagnoli) != fr.crc {
		// A damaged frame with nothing after it is what a crash leaves
		// when the file's size reached the disk but not all of its data;
		// a damaged frame followed by more is corruption.
		var one [1]byte
		if n, err := io.ReadFull(r.r, one[:]); n == 0 && err == io.EOF {
			return nil, errTorn
		}
		return nil, formatErr("%s at offset %d: checksum mismatch", r.section(fr), start)
	}
	return b, nil
}

func (r *Reader) section(fr *frame) string {
	switch fr.typ {
	case frameHeader:
		return "header"
	case frameEvents:
		return fmt.Sprintf("block %d", r.blocks+1)
	case frameTrailer:
		return "trailer"
	}
	return fmt.Sprintf("frame of type %d", fr.typ)
}

// readN reads n bytes into the reused buffer, growing it only as data
// actually arrives: a corrupt length on a short stream must not allocate
// what the length claims.
func (r *Reader) readN(n int) ([]byte, error) {
	buf := r.stored[:0]
	for len(buf) < n {
		chunk := min(n-len(buf), max(len(buf), 64<<10))
		buf = slices.Grow(buf, chunk)
		m, err := io.ReadFull(r.r, buf[len(buf):len(buf)+chunk])
		buf = buf[:len(buf)+m]
		r.off += int64(m)
		if err != nil {
			r.stored = buf
			return nil, err
		}
	}
	r.stored = buf
	return buf, nil
}

// s2Payload decompresses an S2 payload (an S2 block's length, the block,
// then bytes stored as is) of rawLen bytes, into buf when it is big enough.
// Every length is checked against rawLen, itself bounded by maxSection,
// before anything is allocated.
func s2Payload(b []byte, rawLen int, buf []byte) ([]byte, error) {
	if len(b) < s2LenSize {
		return nil, errors.New("S2 payload shorter than its block's length")
	}
	m := binary.LittleEndian.Uint32(b)
	if uint64(m) > uint64(len(b)-s2LenSize) {
		return nil, fmt.Errorf("S2 block of %d bytes in a payload of %d", m, len(b))
	}
	blk, tail := b[s2LenSize:s2LenSize+int(m)], b[s2LenSize+int(m):]
	n, err := s2.DecodedLen(blk)
	if err != nil {
		return nil, err
	}
	if n+len(tail) != rawLen {
		return nil, fmt.Errorf("decompresses to %d bytes, frame says %d", n+len(tail), rawLen)
	}
	if cap(buf) < rawLen {
		buf = make([]byte, 0, rawLen)
	}
	out, err := s2.Decode(buf[:cap(buf)], blk)
	if err != nil {
		return nil, err
	}
	return append(out, tail...), nil
}
