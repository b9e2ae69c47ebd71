package capture

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"runtime/metrics"
	"testing"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/proc"
)

// FuzzReader feeds arbitrary bytes to the reader four ways: as a whole
// file, and (because checksums keep random mutations from getting past the
// framing) wrapped in valid frames as the records of a version 1 events
// block, as the payload of a version 2 one, and as a header. The reader must never panic, never classify an error as anything
// but truncation or bad format, and never allocate far beyond the input.
// Records it accepts must survive re-encoding unchanged.
func FuzzReader(f *testing.F) {
	evs := randomEvents(rand.New(rand.NewPCG(1, 2)), 30)
	h := &Header{Arch: event.ArchAMD64, Hostname: "h", Syscalls: []string{"read"}, Procs: []proc.Info{{PID: 1, Cmdline: []string{"init"}}}, Meta: map[string]string{"k": "v"}}
	file := encodeFile(f, h, evs, 10, &Trailer{Drops: []uint64{1}})
	f.Add(file)
	f.Add(file[:len(file)/2])
	f.Add(binary.LittleEndian.AppendUint16(nil, uint16(len(evs))))
	f.Add(append(binary.LittleEndian.AppendUint16(nil, uint16(len(evs))), payloadOf(evs)...))
	f.Add(h.marshal())
	// Real files: version 1 and 2 captures, and small live captures of the
	// doctor's incidents (version 2: zstd blocks, stacks, host facts).
	for _, name := range []string{"testdata/v1.sysray", "testdata/v2.sysray", "../doctor/testdata/slow-getrandom.sysray",
		"../doctor/testdata/vsyscall-crash.sysray", "../doctor/testdata/vsyscall-emulated.sysray"} {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}

	decodeFile(file) // build the shared zstd decoder outside the measurement
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRead(t, "file", data)
		if len(data) >= 2 {
			n := uint32(binary.LittleEndian.Uint16(data))
			for _, wrapped := range [][]byte{rawFile(data[2:], n, true), rawFile2(data[2:], n, true)} {
				if evs := fuzzRead(t, "records", wrapped); evs != nil {
					if again := rawFile2(payloadOf(evs), uint32(len(evs)), true); !reflect.DeepEqual(fuzzRead(t, "re-encoded", again), evs) {
						t.Fatalf("records decode differently after re-encoding")
					}
				}
			}
		}
		var hf []byte
		hf = append(hf, magic...)
		hf = binary.LittleEndian.AppendUint32(hf, Version)
		hf = appendFrame(hf, frameHeader, codecNone, 0, data)
		fuzzRead(t, "header", hf)
	})
}

var allocSample = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}

func allocated() uint64 {
	metrics.Read(allocSample)
	return allocSample[0].Value.Uint64()
}

// fuzzRead reads data to the end and returns its events if it was a
// complete, valid capture.
func fuzzRead(t *testing.T, what string, data []byte) []event.Event {
	before := allocated()
	_, evs, err := decodeFile(data)
	// Generous, but linear in the input: the worst case is many tiny
	// records each creating a thread and a syscall slot, plus read buffers.
	budget := 1<<20 + 512*uint64(len(data))
	if got := allocated() - before; got > budget {
		// Small objects reach the metric when their span is refilled or a
		// GC flushes the per-CPU caches: what an earlier test allocated can
		// land in this interval (up to a span per size class, a megabyte
		// and more). The decode is deterministic: measured again between
		// two flushes, an overallocation is still there.
		runtime.GC()
		before = allocated()
		decodeFile(data)
		runtime.GC()
		if got = allocated() - before; got > budget {
			t.Fatalf("%s: %d input bytes allocated %d bytes", what, len(data), got)
		}
	}
	switch kindOf(err) {
	case nil:
		return evs
	case errUnexpected:
		t.Fatalf("%s: error is neither ErrTruncated nor ErrFormat: %v", what, err)
	}
	return nil
}

// TestFuzzSeeds keeps the re-encoding property checked in plain `go test`
// runs too, on inputs the fuzzer would take a while to find.
func TestFuzzSeeds(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 0))
		payload := payloadOf(randomEvents(rng, 20))
		n := 20
		if seed%2 == 1 { // corrupt a byte
			payload[rng.IntN(len(payload))] ^= byte(1 + rng.IntN(255))
			n = rng.IntN(25)
		}
		if evs := fuzzRead(t, "records", rawFile2(payload, uint32(n), true)); evs != nil {
			if !reflect.DeepEqual(fuzzRead(t, "re-encoded", rawFile2(payloadOf(evs), uint32(len(evs)), true)), evs) {
				t.Fatalf("seed %d: records decode differently after re-encoding", seed)
			}
		}
	}
}
