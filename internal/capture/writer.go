package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/outfile"
)

var errClosed = errors.New("capture: writer is closed")

// Writer appends events to a capture. It is not safe for concurrent use.
type Writer struct {
	w      io.Writer
	f      *outfile.File // set when Create opened it, so Close closes it
	b      BlockBuilder  // the current block; its out is reused across blocks
	blocks uint64
	events uint64
	err    error // sticky: after a failed write the file's tail is unknown
}

// Create starts a capture at path, 0600 because captures hold paths,
// arguments and addresses. The file is written beside path and renamed
// over it at once (outfile): a symlink or a file that is not regular at
// path is refused, never followed or truncated, and a writer that dies
// leaves what it wrote at path.
func Create(path string, h *Header) (*Writer, error) {
	w, err := CreatePending(path, h)
	if err != nil {
		return nil, err
	}
	if err := w.Commit(); err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

// CreatePending is Create, but the capture takes path's place only when
// Commit is called or Close succeeds: a capture aborted, or closed after
// a failure, before that leaves path as it was. inputs are the files the
// capture is made from, which path may not be.
func CreatePending(path string, h *Header, inputs ...string) (*Writer, error) {
	f, err := outfile.Create(path, inputs...)
	if err != nil {
		return nil, err
	}
	w, err := NewWriter(f, h)
	if err != nil {
		f.Close()
		return nil, err
	}
	w.f = f
	return w, nil
}

// NewWriter writes the prelude and header to w at once, so that even a
// capture that dies before its first block identifies itself.
func NewWriter(w io.Writer, h *Header) (*Writer, error) {
	if h == nil {
		h = &Header{}
	}
	raw := h.marshal()
	if len(raw) > maxSection {
		return nil, fmt.Errorf("capture: header is %d bytes, over the %d-byte limit", len(raw), maxSection)
	}
	hb, codec := encoder().EncodeAll(raw, nil), uint8(codecZstd)
	if len(hb) >= len(raw) {
		hb, codec = raw, codecNone
	}
	b := make([]byte, preludeSize+frameSize, preludeSize+frameSize+len(hb))
	copy(b, magic)
	binary.LittleEndian.PutUint32(b[len(magic):], Version)
	fr := frame{typ: frameHeader, codec: codec, rawLen: uint32(len(raw)), length: uint32(len(hb)), crc: crc32.Checksum(hb, castagnoli)}
	fr.put(b[preludeSize:])
	b = append(b, hb...)
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	cw := &Writer{w: w}
	cw.b.raw = make([]byte, 0, blockRawTarget+64<<10)
	cw.b.reset()
	return cw, nil
}

// Write adds e to the current block, compressing and writing the block
// once it is full.
func (w *Writer) Write(e *event.Event) error {
	if w.err != nil {
		return w.err
	}
	if err := w.b.Add(e); err != nil {
		// Only huge events (megabytes of captured data) can overflow a
		// block; for them, start a fresh one rather than fail.
		if err != ErrBlockFull {
			return err
		}
		if err := w.flushBlock(); err != nil {
			return err
		}
		if err := w.b.Add(e); err != nil {
			return err
		}
	}
	w.events++
	if w.b.full() {
		return w.flushBlock()
	}
	return nil
}

func (w *Writer) flushBlock() error {
	if w.err != nil {
		return w.err
	}
	if w.b.n == 0 {
		return nil
	}
	w.b.out = w.b.seal(w.b.out[:0])
	if _, err := w.w.Write(w.b.out); err != nil {
		w.err = fmt.Errorf("capture: writing block %d: %w", w.blocks+1, err)
		return w.err
	}
	w.blocks++
	w.b.reset()
	return nil
}

// Flush ends the current block so that every event written so far survives
// the process dying. It does not fsync: surviving the machine crashing is
// the kernel's business and would cost a disk round trip per call. Each
// block costs a few microseconds and small ones compress worse, so flush on
// a timer, not per event.
func (w *Writer) Flush() error {
	if err := w.flushBlock(); err != nil {
		return err
	}
	return w.flushUnderlying()
}

// flushUnderlying passes a Flush on to buffered writers (bufio.Writer and
// the like), which would otherwise keep the block from reaching the file.
func (w *Writer) flushUnderlying() error {
	if f, ok := w.w.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			w.err = fmt.Errorf("capture: %w", err)
			return w.err
		}
	}
	return nil
}

// Commit puts a capture that CreatePending opened at its path now, while
// it is still being written, so that a writer killed from here on leaves what it
// wrote there (up to its last flushed block) rather than in a hidden
// temporary file.
func (w *Writer) Commit() error {
	if w.f == nil {
		return nil
	}
	return w.f.Commit()
}

// Abort ends a capture that failed: no trailer is written, and a file that
// Create opened is removed unless committed, leaving path as it was.
func (w *Writer) Abort() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	w.err = errClosed
}

// Close writes the last block and the trailer that marks the capture
// complete, and closes the file if Create opened it, putting it at its
// path; after a failure the file is removed instead (unless committed).
// t may be nil.
func (w *Writer) Close(t *Trailer) error {
	if w.err == errClosed {
		return errClosed
	}
	err := w.flushBlock()
	if err == nil {
		var tr Trailer
		if t != nil {
			tr = *t
		}
		tr.Events = w.events
		if tr.End == 0 {
			tr.End = time.Now().UnixNano()
		}
		p := tr.marshal(w.blocks)
		b := make([]byte, frameSize, frameSize+len(p))
		fr := frame{typ: frameTrailer, codec: codecNone, rawLen: uint32(len(p)), length: uint32(len(p)), crc: crc32.Checksum(p, castagnoli)}
		fr.put(b)
		if _, err = w.w.Write(append(b, p...)); err != nil {
			err = fmt.Errorf("capture: writing trailer: %w", err)
		}
	}
	if err == nil {
		err = w.flushUnderlying()
	}
	if w.f != nil {
		if err == nil {
			err = w.f.Finish()
		} else {
			w.f.Close()
		}
		w.f = nil
	}
	w.err = errClosed
	return err
}
