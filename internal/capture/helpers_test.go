package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// encodeFile writes evs to an in-memory capture, flushing a block after
// every flushEvery events (never if 0), and closes it with t.
func encodeFile(tb testing.TB, h *Header, evs []event.Event, flushEvery int, t *Trailer) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, h)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range evs {
		if err := w.Write(&evs[i]); err != nil {
			tb.Fatal(err)
		}
		if flushEvery > 0 && (i+1)%flushEvery == 0 {
			if err := w.Flush(); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := w.Close(t); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// decodeFile reads every event it can, returning the error that stopped it
// (nil for a clean io.EOF).
func decodeFile(data []byte) (*Reader, []event.Event, error) {
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, nil, err
	}
	var evs []event.Event
	for {
		var e event.Event
		err := r.Next(&e)
		if err == io.EOF {
			return r, evs, nil
		}
		if err != nil {
			return r, evs, err
		}
		evs = append(evs, e)
	}
}

// rawFile builds a version 1 capture around one events block given as raw,
// uncompressed records: it lets tests and the fuzzer reach the record
// decoder without having to get checksums and zstd right. Version 1 keeps
// the times in line, so records written by hand need no payload around
// them; version 2 readers read it still.
func rawFile(records []byte, count uint32, trailer bool) []byte {
	return rawFileOf(1, records, count, trailer)
}

// rawFile2 is rawFile for a version 2 payload (records' length, records,
// times), as payloadOf builds it.
func rawFile2(payload []byte, count uint32, trailer bool) []byte {
	return rawFileOf(2, payload, count, trailer)
}

func rawFileOf(version uint32, payload []byte, count uint32, trailer bool) []byte {
	var b []byte
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = appendFrame(b, frameHeader, codecNone, 0, nil)
	b = appendFrame(b, frameEvents, codecNone, count, payload)
	if trailer {
		t := Trailer{Events: uint64(count)}
		b = appendFrame(b, frameTrailer, codecNone, 0, t.marshal(1))
	}
	return b
}

// payloadOf encodes evs as the uncompressed payload of one version 2 block.
func payloadOf(evs []event.Event) []byte {
	var s state
	s.reset()
	b, t := make([]byte, recordsLenSize), []byte(nil)
	for i := range evs {
		b, t = s.appendEvent(b, t, &evs[i])
	}
	binary.LittleEndian.PutUint32(b, uint32(len(b)-recordsLenSize))
	return append(b, t...)
}

func appendFrame(b []byte, typ, codec uint8, count uint32, payload []byte) []byte {
	fr := frame{typ: typ, codec: codec, rawLen: uint32(len(payload)), length: uint32(len(payload)), count: count, crc: crc32.Checksum(payload, castagnoli)}
	var fb [frameSize]byte
	fr.put(fb[:])
	return append(append(b, fb[:]...), payload...)
}

// getppid simulates the benchmark workload: one thread calling getppid in a
// tight loop, ~300ns apart, latencies with 2-3 significant bytes of noise.
type getppid struct {
	rng *rand.Rand
	e   event.Event
}

func newGetppid() *getppid {
	return &getppid{
		rng: rand.New(rand.NewPCG(1, 2)),
		e: event.Event{
			Kind: event.KindSyscall, Time: 1_700_000_000_123, CPU: 3, PID: 4242, TID: 4242,
			Comm: "getppid-loop", Cgroup: 0x1f2e,
			Syscall: event.Syscall{Nr: 110, Ret: 4100, Args: [6]uint64{0x7ffd1234, 0, 0x8, 0x7f00deadbeef, 0, 0}},
		},
	}
}

func (g *getppid) next() *event.Event {
	e := &g.e
	e.Time += e.Syscall.Latency + 250 + g.rng.Uint64N(100)
	e.Syscall.Latency = 256 + g.rng.Uint64N(1<<20-256)
	return e
}

// getppidEvents is the first n events of newGetppid.
func getppidEvents(n int) []event.Event {
	g := newGetppid()
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = *g.next()
	}
	return evs
}

var errUnexpected = errors.New("unexpected")

// kindOf classifies a reader error for tests that only care about its kind.
func kindOf(err error) error {
	switch {
	case err == nil, err == io.EOF:
		return nil
	case errors.Is(err, ErrTruncated):
		return ErrTruncated
	case errors.Is(err, ErrFormat):
		return ErrFormat
	}
	return errUnexpected
}

// Values that stress varints and deltas: extremes, sign changes, one-byte
// boundaries.
var edgeU64 = []uint64{0, 1, 127, 128, 255, 1 << 32, math.MaxUint32, math.MaxInt64, 1 << 63, math.MaxUint64, math.MaxUint64 - 1}
