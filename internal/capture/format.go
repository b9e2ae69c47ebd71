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
// bump it. Version 2 keeps a block's times apart from its records;
// version 3 compresses events blocks with S2.
const Version = 3

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

// Payload codecs. Writers compress events blocks with S2 and the header
// with zstd; readers take either in any frame (S2 from version 3).
const (
	codecNone = 0
	codecZstd = 1
	codecS2   = 2
)

// s2LenSize is the length, at the start of an S2 payload, of the S2 block
// that follows it; what follows the block is stored as is.
const s2LenSize = 4

const frameSize = 24

// Writers flush a block at whichever of these comes first: big enough for the
// codec to find the repetition across events, small enough that a crash loses
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

// The zstd coders are shared because building them is costly next to a
// small capture, and EncodeAll/DecodeAll are safe for concurrent use;
// concurrency only bounds how many sections are (de)compressed at once.
// The encoder now compresses only headers (written once, where size counts
// more than time); the decoder reads the events blocks of version 1 and 2
// files too.
var (
	encoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithAllLitEntropyCompression(true),
			zstd.WithEncoderCRC(false), // the frame's crc32c already covers it
			zstd.WithEncoderConcurrency(1),
			// The default 8 MiB window kept 8 MiB of history per encoder
			// for nothing (16 MiB of the agent's live heap).
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
