package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Version is the format version this package writes; it reads this one and
// every earlier one. It changes only when a reader of the previous version
// would misinterpret a new file; additions that old readers can skip do not
// bump it. Version 2 keeps a block's times apart from its records.
const Version = 2

// magic starts every capture. It begins with the tool's name so that `head -c6`
// identifies a file, and carries a byte with the high bit set and a newline so
// that 7-bit or newline-translating transfers corrupt it visibly.
const magic = "SYSRAY\x89\n"

const preludeSize = len(magic) + 4

// Frame types. Readers skip types they do not know (after checking their
// checksum), so new optional sections need no version bump.
const (
	frameHeader  = 1
	frameEvents  = 2
	frameTrailer = 3
)

// Payload codecs.
const (
	codecNone = 0
	codecZstd = 1
)

const frameSize = 24

// Writers flush a block at whichever of these comes first: big enough for zstd
// to find the repetition across events, small enough that a crash loses
// little and a reader holds little.
const (
	blockRawTarget = 1 << 20
	blockMaxEvents = 64 << 10
)

// recordsLenSize is the length, at the start of a version 2 events block's
// payload, of the records that follow it; the block's times fill the rest.
const recordsLenSize = 4

// maxSection bounds every length read from a file, so that a corrupt length
// costs an error rather than an enormous allocation. It is far above what a
// writer produces (about 1 MiB per block) to leave room for single huge events.
const maxSection = 64 << 20

// minRecord is the smallest encoded event (kind, flags, time delta), which
// bounds how many events a block of a given size can claim to hold.
const minRecord = 3

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var (
	// ErrTruncated marks a capture that ends early: cut mid-block, or
	// missing its trailer because the writer never finished.
	ErrTruncated = errors.New("capture truncated")
	// ErrFormat marks bytes that are not a valid capture of a supported version.
	ErrFormat = errors.New("capture: invalid format")
)

// wrapped lets errors carry a precise message of their own while still
// matching errors.Is(err, ErrTruncated / ErrFormat).
type wrapped struct {
	kind error
	msg  string
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.kind }

func formatErr(f string, args ...any) error {
	return &wrapped{ErrFormat, "capture: " + fmt.Sprintf(f, args...)}
}

func truncErr(f string, args ...any) error {
	return &wrapped{ErrTruncated, "capture truncated " + fmt.Sprintf(f, args...)}
}

// frame precedes every section after the prelude.
type frame struct {
	typ    uint8
	codec  uint8
	rawLen uint32 // payload length after decompression
	length uint32 // payload length as stored
	count  uint32 // events in an events block; blocks before a trailer
	crc    uint32 // crc32c of the stored payload
}

func (f *frame) put(b []byte) {
	_ = b[frameSize-1]
	b[0] = f.typ
	b[1] = f.codec
	b[2], b[3] = 0, 0
	binary.LittleEndian.PutUint32(b[4:], f.rawLen)
	binary.LittleEndian.PutUint32(b[8:], f.length)
	binary.LittleEndian.PutUint32(b[12:], f.count)
	binary.LittleEndian.PutUint32(b[16:], f.crc)
	binary.LittleEndian.PutUint32(b[20:], crc32.Checksum(b[:20], castagnoli))
}

// parse checks the frame's own checksum first, so a corrupt length is
// reported as corruption instead of being trusted.
func (f *frame) parse(b []byte) error {
	if crc32.Checksum(b[:20], castagnoli) != binary.LittleEndian.Uint32(b[20:]) {
		return errors.New("frame checksum mismatch")
	}
	*f = frame{
		typ:    b[0],
		codec:  b[1],
		rawLen: binary.LittleEndian.Uint32(b[4:]),
		length: binary.LittleEndian.Uint32(b[8:]),
		count:  binary.LittleEndian.Uint32(b[12:]),
		crc:    binary.LittleEndian.Uint32(b[16:]),
	}
	switch {
	case b[2] != 0 || b[3] != 0:
		return errors.New("reserved frame bytes are not zero")
	case f.rawLen > maxSection || f.length > maxSection:
		return fmt.Errorf("section of %d bytes (%d stored) exceeds the %d-byte limit", f.rawLen, f.length, maxSection)
	case f.codec == codecNone && f.rawLen != f.length:
		return fmt.Errorf("uncompressed section with raw length %d but stored length %d", f.rawLen, f.length)
	}
	return nil
}

// The coders are shared because building them is costly next to a small
// capture, and EncodeAll/DecodeAll are safe for concurrent use; concurrency
// only bounds how many blocks are (de)compressed at once.
var (
	encoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil,
			// Measured on 64k getppid events (docs/capture-format.md):
			// fastest alone leaves the literals raw (7.0 bytes/event);
			// entropy-coding them gives 5.35 at ~45ns/event, while
			// SpeedDefault reaches 4.9 at ~195ns/event, too slow to keep
			// up with a busy tracer on one core.
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithAllLitEntropyCompression(true),
			zstd.WithEncoderCRC(false), // the frame's crc32c already covers it
			zstd.WithEncoderConcurrency(min(runtime.GOMAXPROCS(0), 4)),
			// A block is compressed alone and is about blockRawTarget long:
			// matches never reach further back. The default 8 MiB window
			// kept 8 MiB of history per encoder for nothing (16 MiB of the
			// agent's live heap).
			zstd.WithWindowSize(blockRawTarget),
		)
		if err != nil {
			panic(err) // only for invalid options
		}
		return e
	})
	decoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(min(runtime.GOMAXPROCS(0), 4)),
			zstd.WithDecoderMaxMemory(maxSection),
			zstd.WithDecoderMaxWindow(maxSection),
			// With this, cap(dst) bounds the output, so a payload can never
			// inflate past the raw length its frame declares.
			zstd.WithDecodeAllCapLimit(true),
		)
		if err != nil {
			panic(err)
		}
		return d
	})
)

// appendRawBlocks adds tail to the content of the zstd frame that starts at
// out[at] and ends out, as raw blocks: a block's times are clock noise,
// which zstd shrank by 6% on a capture of redis for a third of its time on
// the block. The frame stays an ordinary one (RFC 8878) that any zstd
// decoder reads: its header is rewritten for the new content size, as a
// single segment, and the block that was last is last no more. ok is false,
// and out unchanged, for a frame it does not take apart (with a checksum,
// a dictionary or no content size), which the encoder here makes only for
// contents under 256 bytes.
func appendRawBlocks(out []byte, at int, tail []byte) (_ []byte, ok bool) {
	f := out[at:]
	if len(f) < 6 || binary.LittleEndian.Uint32(f) != zstdMagic {
		return out, false
	}
	fhd := f[4]
	if fhd&(1<<2|3) != 0 { // a checksum, a dictionary
		return out, false
	}
	hdr := 5
	if fhd&(1<<5) == 0 { // a window descriptor
		hdr++
	}
	var content uint64
	switch fhd >> 6 {
	case 0:
		if fhd&(1<<5) == 0 {
			return out, false // no content size
		}
		content = uint64(f[hdr])
		hdr++
	case 1:
		content = uint64(binary.LittleEndian.Uint16(f[hdr:])) + 256
		hdr += 2
	case 2:
		content = uint64(binary.LittleEndian.Uint32(f[hdr:]))
		hdr += 4
	default:
		content = binary.LittleEndian.Uint64(f[hdr:])
		hdr += 8
	}
	last := hdr
	for {
		if last+3 > len(f) {
			return out, false
		}
		h := uint32(f[last]) | uint32(f[last+1])<<8 | uint32(f[last+2])<<16
		size := int(h >> 3)
		switch (h >> 1) & 3 {
		case 1: // RLE: one byte, repeated
			size = 1
		case 3:
			return out, false
		}
		if h&1 != 0 {
			if last+3+size != len(f) {
				return out, false
			}
			break
		}
		last += 3 + size
	}
	content += uint64(len(tail))

	// A single segment: the window is the whole content, which an events
	// section's limit (maxSection) bounds, and every block may be
	// zstdMaxBlock long.
	var nh [9]byte
	binary.LittleEndian.PutUint32(nh[:], zstdMagic)
	var m int
	switch {
	case content < 256:
		nh[4], nh[5], m = 1<<5, byte(content), 6
	case content < 65536+256:
		nh[4], m = 1<<5|1<<6, 7
		binary.LittleEndian.PutUint16(nh[5:], uint16(content-256))
	default:
		nh[4], m = 1<<5|2<<6, 9
		binary.LittleEndian.PutUint32(nh[5:], uint32(content))
	}
	f[last] &^= 1
	if m > hdr {
		out = append(out, nh[:m-hdr]...)
		f = out[at:]
		copy(f[m:], f[hdr:])
	} else if m < hdr {
		copy(f[m:], f[hdr:])
		out = out[:len(out)-(hdr-m)]
		f = out[at:]
	}
	copy(f, nh[:m])
	for len(tail) > 0 {
		n := min(len(tail), zstdMaxBlock)
		h := uint32(n) << 3 // type 0: raw
		if n == len(tail) {
			h |= 1
		}
		out = append(out, byte(h), byte(h>>8), byte(h>>16))
		out = append(out, tail[:n]...)
		tail = tail[n:]
	}
	return out, true
}

const (
	zstdMagic    = 0xFD2FB528
	zstdMaxBlock = 128 << 10 // a block's largest size, in any window of at least this
)
