package probe

import (
	"io"
	"math"
	"os"
	"sync"
	"syscall"
	"testing"

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
