package capture

import (
	"io"
	"os"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/sysray/sysray/internal/event"
)

func TestZZCodec(t *testing.T) {
	r, err := Open(os.Getenv("ZZCAP"))
	if err != nil {
		t.Skip(err)
	}
	var blocks [][]byte
	bb := NewBlockBuilder()
	var e event.Event
	n := 0
	for {
		if err := r.Next(&e); err != nil {
			if err != io.EOF {
				t.Log(err)
			}
			break
		}
		if err := bb.Add(&e); err == ErrBlockFull || bb.full() {
			blocks = append(blocks, append([]byte(nil), bb.raw...))
			bb.reset()
			if err == ErrBlockFull {
				bb.Add(&e)
			}
		}
		n++
	}
	raw := 0
	for _, b := range blocks {
		raw += len(b)
	}
	t.Logf("%d events, %d blocks, %d raw bytes (%.1f/event)", n, len(blocks), raw, float64(raw)/float64(n))
	enc := encoder()
	zl, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(blockRawTarget))
	try := func(name string, f func(dst, src []byte) []byte) {
		var out []byte
		best := time.Duration(1 << 62)
		size := 0
		for round := 0; round < 5; round++ {
			st := time.Now()
			size = 0
			for _, b := range blocks {
				out = f(out[:0], b)
				size += len(out)
			}
			best = min(best, time.Since(st))
		}
		t.Logf("%-12s %6.1f ns/event  %5.2f bytes/event  ratio %.2f", name, float64(best.Nanoseconds())/float64(n), float64(size)/float64(n), float64(raw)/float64(size))
	}
	try("zstd", func(d, s []byte) []byte { return enc.EncodeAll(s, d) })
	try("zstd-1conc", func(d, s []byte) []byte { return zl.EncodeAll(s, d) })
	zn, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(blockRawTarget), zstd.WithAllLitEntropyCompression(false), zstd.WithEncoderCRC(false))
	try("zstd-noent", func(d, s []byte) []byte { return zn.EncodeAll(s, d) })
	zd, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(blockRawTarget), zstd.WithEncoderCRC(false))
	try("zstd-default", func(d, s []byte) []byte { return zd.EncodeAll(s, d) })
	try("s2", func(d, s []byte) []byte { return s2.Encode(d[:cap(d)], s) })
	try("s2-better", func(d, s []byte) []byte { return s2.EncodeBetter(d[:cap(d)], s) })
	try("snappy-compat", func(d, s []byte) []byte { return s2.EncodeSnappy(d[:cap(d)], s) })
}
