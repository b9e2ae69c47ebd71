package probe

import (
	"io"
	"math"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
)

// BenchmarkRecordPath is what `sysray record` does in user space for each
// record after the ring (bench/recordcpu.sh): batches of ring records
// through the merger, decoded one at a time into its event, encoded by a
// capture writer and compressed. The records are those of a real capture,
// $SYSRAY_BENCH_CAPTURE (e.g. `sysray record -p $(pidof redis-server)`
// under redis-benchmark), laid out as the BPF programs write them; only
// syscalls and page faults, the kinds record() lays out. ns/op is per
// record.
func BenchmarkRecordPath(b *testing.B) {
	recs := benchRecords(b)
	w, err := capture.NewWriter(io.Discard, nil)
	if err != nil {
		b.Fatal(err)
	}
	m := newMerger(1, w.Write, nil)
	b.ReportAllocs()
	i := 0
	cpu0 := cpuTime()
	for b.Loop() {
		bt := newBatch(0)
		for range batchLen {
			r := recs[i%len(recs)]
			i++
			n := len(bt.buf)
			bt.add(bt.buf[n:n+copy(bt.buf[n:n+len(r)], r)], true)
		}
		bt.sort()
		bt.mark = math.MaxUint64
		if err := m.add(bt); err != nil {
			b.Fatal(err)
		}
	}
	if err := m.flush(); err != nil {
		b.Fatal(err)
	}
	w.Close(nil)
	// The process's CPU, not the wall clock: on a shared machine this
	// is what holds still.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(i), "cpu-ns/record")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i), "ns/record")
}

// BenchmarkRawRecords prices one way to make record cheaper: writing the
// ring's records as they come, compressed, and decoding them only when
// the capture is read. The records are BenchmarkRecordPath's, in blocks of
// 1 MiB, compressed by zstd at its fastest and by S2, the fastest codec in
// klauspost/compress; it reports CPU time and bytes per record, to set
// beside BenchmarkRecordPath's, which includes the encoder that shrinks a
// record to a few bytes before S2 sees it.
func BenchmarkRawRecords(b *testing.B) {
	recs := benchRecords(b)
	var blocks [][]byte
	var cur []byte
	size := 0
	for _, r := range recs {
		size += len(r)
		cur = append(cur, r...)
		if len(cur) >= 1<<20 {
			blocks = append(blocks, cur)
			cur = nil
		}
	}
	if len(cur) > 0 {
		blocks = append(blocks, cur)
	}
	perBlock := float64(len(recs)) / float64(len(blocks))
	// The options version 2's capture writer used for its events blocks, on
	// one goroutine.
	zenc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithAllLitEntropyCompression(true),
		zstd.WithEncoderCRC(false), zstd.WithWindowSize(1<<20), zstd.WithEncoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	codecs := []struct {
		name string
		enc  func(dst, src []byte) []byte
	}{
		{"zstd", func(dst, src []byte) []byte { return zenc.EncodeAll(src, dst[:0]) }},
		{"s2", func(dst, src []byte) []byte { return s2.Encode(dst[:cap(dst)], src) }},
	}
	for _, c := range codecs {
		b.Run(c.name, func(b *testing.B) {
			var dst []byte
			n, out := 0, 0
			cpu0 := cpuTime()
			for b.Loop() {
				dst = c.enc(dst, blocks[n%len(blocks)])
				out += len(dst)
				n++
			}
			records := float64(n) * perBlock
			b.ReportMetric(float64(cpuTime()-cpu0)/records, "cpu-ns/record")
			b.ReportMetric(float64(out)/records, "bytes/record")
			b.ReportMetric(float64(size)/float64(len(recs)), "raw-bytes/record")
		})
	}
}

func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

var benchRecs struct {
	once sync.Once
	recs [][]byte
}

func benchRecords(b *testing.B) [][]byte {
	benchRecs.once.Do(func() { benchRecs.recs = readBenchRecords(b) })
	if len(benchRecs.recs) == 0 {
		b.Skip("no syscall or page fault in $SYSRAY_BENCH_CAPTURE")
	}
	return benchRecs.recs
}

func readBenchRecords(b *testing.B) [][]byte {
	path := os.Getenv("SYSRAY_BENCH_CAPTURE")
	if path == "" {
		b.Skip("set SYSRAY_BENCH_CAPTURE to a capture file")
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	r, err := capture.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	var recs [][]byte
	for {
		var e event.Event
		if err := r.Next(&e); err == io.EOF {
			break
		} else if err != nil {
			b.Fatal(err)
		}
		if e.Kind != event.KindSyscall && e.Kind != event.KindPageFault {
			continue
		}
		if e.Kind == event.KindSyscall {
			e.Syscall.UserStack, e.Syscall.Sleeps = nil, nil
			n := 0
			for i := range e.Syscall.Data {
				if e.Syscall.Data[i] != nil {
					if n++; n > 2 {
						e.Syscall.Data[i] = nil
					}
				}
			}
		}
		recs = append(recs, record(b, &e))
	}
	f.Close()
	return recs
}
