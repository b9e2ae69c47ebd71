package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/klauspost/compress/s2"
	"github.com/sysray/sysray/internal/event"
)

// ErrBlockFull is returned by BlockBuilder.Add when the event does not fit
// in the block being built (the format's per-block limits); Finish the block
// and add the event to the next one.
var ErrBlockFull = errors.New("capture: block is full")

// Block is one events frame, encoded and compressed exactly as a Writer
// writes it, held in memory. It is immutable, so it can be shared between
// goroutines and written into any number of captures.
type Block struct {
	data        []byte // frame header and payload
	events      int
	first, last uint64
}

// Len is the number of events in the block.
func (b Block) Len() int { return b.events }

// Size is the block's size in a capture file, frame header included; it is
// also what the block holds in memory.
func (b Block) Size() int { return len(b.data) }

// First and Last are the earliest and latest Event.Time in the block; times
// from different CPUs may be out of order, so these need not be the times
// of its first and last events.
func (b Block) First() uint64 { return b.first }
func (b Block) Last() uint64  { return b.last }

// BlockBuilder encodes events into one self-contained block, for a caller
// that keeps blocks in memory (a flight recorder) instead of streaming them
// to a file. It is the encoder Writer uses. The zero value is not usable;
// call NewBlockBuilder. It is not safe for concurrent use.
type BlockBuilder struct {
	state       state
	raw         []byte // the payload, not compressed: the records' length, then the records
	times       []byte // the events' times, which end the payload once sealed
	n           int
	first, last uint64
	out         []byte // scratch for the compressed frame
}

// NewBlockBuilder returns an empty builder.
func NewBlockBuilder() *BlockBuilder {
	b := &BlockBuilder{}
	b.reset()
	return b
}

// Add encodes e at the end of the block. It fails with ErrBlockFull when
// the block already holds events and e would take it past the format's
// limits, and with another error when e is too large for any block.
func (b *BlockBuilder) Add(e *event.Event) error {
	// Only huge events (megabytes of captured data) can overflow a block.
	// A plain syscall's bound is its captured data and 512 bytes, which
	// leaves no room for doubt while the block is under half full: the
	// whole bound, touching every list an event may hold, was 6% of
	// record's CPU (BenchmarkRecordPath).
	if sc := &e.Syscall; e.Kind == event.KindSyscall && sc.UserStack == nil && sc.Sleeps == nil && b.payload() < maxSection/2 &&
		len(sc.Data[0])+len(sc.Data[1])+len(sc.Data[2])+len(sc.Data[3])+len(sc.Data[4])+len(sc.Data[5])+len(e.Comm) < maxSection/4 {
		if b.n >= blockMaxEvents {
			return ErrBlockFull
		}
	} else if size := sizeBound(e); b.payload()+size > maxSection || b.n >= blockMaxEvents {
		if recordsLenSize+size > maxSection {
			return fmt.Errorf("capture: %s event too large (up to %d bytes encoded, limit %d)", e.Kind, size, maxSection)
		}
		if b.n > 0 {
			return ErrBlockFull
		}
	}
	if b.n == 0 || e.Time < b.first {
		b.first = e.Time
	}
	if b.n == 0 || e.Time > b.last {
		b.last = e.Time
	}
	b.raw, b.times = b.state.appendEvent(b.raw, b.times, e)
	b.n++
	return nil
}

// Len is the number of events added since the last Finish.
func (b *BlockBuilder) Len() int { return b.n }

// Size is the encoded size of those events before compression.
func (b *BlockBuilder) Size() int {
	if b.n == 0 {
		return 0
	}
	return b.payload()
}

// payload is the size of the block's payload as it stands.
func (b *BlockBuilder) payload() int { return len(b.raw) + len(b.times) }

// First and Last are the earliest and latest Event.Time added since the
// last Finish; both are 0 while the builder is empty.
func (b *BlockBuilder) First() uint64 { return b.first }
func (b *BlockBuilder) Last() uint64  { return b.last }

// full reports the size at which a Writer ends a block.
func (b *BlockBuilder) full() bool {
	return b.payload() >= blockRawTarget || b.n >= blockMaxEvents
}

// Finish compresses the events added so far into a Block of its own memory
// and empties the builder for the next block. An empty builder gives an
// empty Block, which writers skip.
func (b *BlockBuilder) Finish() Block {
	if b.n == 0 {
		return Block{}
	}
	blk := Block{events: b.n, first: b.first, last: b.last}
	b.out = b.seal(b.out[:0])
	// A copy of exactly the frame's size, so that a kept block holds no
	// more memory than its Size says.
	blk.data = make([]byte, len(b.out))
	copy(blk.data, b.out)
	b.reset()
	return blk
}

// seal appends the events frame of the current block to out, without
// resetting the builder.
//
// S2, not zstd: on whole-host captures of redis, zstd at its fastest was
// 15% of record's CPU live, and S2 compresses the same blocks in well under
// half the time for a file about a tenth bigger (docs/capture-format.md,
// "Events"). Only the records go through S2; the times, clock noise that
// S2 has no entropy coding to shrink, follow its block as they are.
func (b *BlockBuilder) seal(out []byte) []byte {
	n := len(b.raw)
	binary.LittleEndian.PutUint32(b.raw, uint32(n-recordsLenSize))
	rawLen := n + len(b.times)
	start := len(out)
	at := start + frameSize + s2LenSize
	out = slices.Grow(out, at-start+s2.MaxEncodedLen(n)+len(b.times))[:at]
	enc := s2.Encode(out[at:cap(out)], b.raw)
	binary.LittleEndian.PutUint32(out[at-s2LenSize:], uint32(len(enc)))
	out = append(out[:at+len(enc)], b.times...)
	codec := uint8(codecS2)
	if len(out)-start-frameSize >= rawLen {
		// Incompressible (mostly captured data): storing it as is reads
		// faster and is no bigger.
		out = append(append(out[:start+frameSize], b.raw...), b.times...)
		codec = codecNone
	}
	payload := out[start+frameSize:]
	fr := frame{typ: frameEvents, codec: codec, rawLen: uint32(rawLen), length: uint32(len(payload)), count: uint32(b.n), crc: crc32.Checksum(payload, castagnoli)}
	fr.put(out[start:])
	return out
}

func (b *BlockBuilder) reset() {
	b.raw = append(b.raw[:0], make([]byte, recordsLenSize)...)
	b.times = b.times[:0]
	b.n = 0
	b.first, b.last = 0, 0
	b.state.reset()
}

// WriteBlock writes a block built by a BlockBuilder, after ending the
// current block so that events stay in the order they were given. Like
// every block, it reaches the file in a single write.
func (w *Writer) WriteBlock(b Block) error {
	if err := w.flushBlock(); err != nil {
		return err
	}
	if b.events == 0 {
		return nil
	}
	if _, err := w.w.Write(b.data); err != nil {
		w.err = fmt.Errorf("capture: writing block %d: %w", w.blocks+1, err)
		return w.err
	}
	w.blocks++
	w.events += uint64(b.events)
	return nil
}
