package capture

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// buildBlocks encodes evs into blocks of per events each.
func buildBlocks(tb testing.TB, evs []event.Event, per int) []Block {
	tb.Helper()
	bb := NewBlockBuilder()
	var blocks []Block
	for i := range evs {
		if err := bb.Add(&evs[i]); err != nil {
			tb.Fatal(err)
		}
		if bb.Len() == per {
			blocks = append(blocks, bb.Finish())
		}
	}
	if bb.Len() > 0 {
		blocks = append(blocks, bb.Finish())
	}
	return blocks
}

// TestBlocksMatchWriter: a file assembled from ready-made blocks is byte for
// byte the file a Writer produces when flushed at the same events, so
// everything said about the format (readers, recovery) holds for it.
func TestBlocksMatchWriter(t *testing.T) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 3))
		evs := randomEvents(rng, 3000)
		per := []int{1, 7, 100, 5000}[seed%4]
		h := &Header{Hostname: "h", Meta: map[string]string{"k": "v"}}
		tr := &Trailer{End: 12345, Drops: []uint64{2}}
		want := encodeFile(t, h, evs, per, tr)

		var buf bytes.Buffer
		w, err := NewWriter(&buf, h)
		if err != nil {
			t.Fatal(err)
		}
		blocks := buildBlocks(t, evs, per)
		n := 0
		for _, b := range blocks {
			if err := w.WriteBlock(b); err != nil {
				t.Fatal(err)
			}
			n += b.Len()
		}
		if n != len(evs) {
			t.Fatalf("blocks hold %d events, added %d", n, len(evs))
		}
		if err := w.Close(tr); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("seed %d: file from blocks (%d bytes) differs from the writer's (%d bytes)", seed, buf.Len(), len(want))
		}
	}
}

// TestWriteBlockMixed interleaves events written one by one with blocks:
// the writer's pending events must come before the block.
func TestWriteBlockMixed(t *testing.T) {
	evs := randomEvents(rand.New(rand.NewPCG(9, 9)), 900)
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, nil)
	for i := 0; i < len(evs); i += 300 {
		for j := i; j < i+100; j++ {
			if err := w.Write(&evs[j]); err != nil {
				t.Fatal(err)
			}
		}
		for _, b := range buildBlocks(t, evs[i+100:i+300], 64) {
			if err := w.WriteBlock(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.WriteBlock(Block{}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	r, got, err := decodeFile(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, evs) {
		t.Fatalf("read %d events, not the %d written in order", len(got), len(evs))
	}
	// 3 x (one flushed block of 100 + 4 blocks of 64, 64, 64, 8).
	if tr := r.Trailer(); tr == nil || tr.Events != 900 {
		t.Fatalf("trailer %+v", tr)
	}
}

// TestBlockTruncated cuts a file of blocks everywhere: a reader returns
// exactly the whole blocks before the cut.
func TestBlockTruncated(t *testing.T) {
	evs := randomEvents(rand.New(rand.NewPCG(4, 4)), 120)
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, nil)
	headerEnd := buf.Len()
	var ends []int
	for _, b := range buildBlocks(t, evs, 30) {
		if err := w.WriteBlock(b); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, buf.Len())
	}
	if err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	full := buf.Bytes()
	for cut := headerEnd; cut < len(full); cut++ {
		_, got, err := decodeFile(full[:cut])
		want := 0
		for i, e := range ends {
			if e <= cut {
				want = 30 * (i + 1)
			}
		}
		if !errors.Is(err, ErrTruncated) || !reflect.DeepEqual(got, evs[:want]) && want > 0 || len(got) != want {
			t.Fatalf("cut %d: %d events (want %d), %v", cut, len(got), want, err)
		}
	}
}

func TestBlockBuilder(t *testing.T) {
	bb := NewBlockBuilder()
	if b := bb.Finish(); b.Len() != 0 || b.Size() != 0 {
		t.Fatalf("empty builder gave %+v", b)
	}
	times := []uint64{500, 300, 900, 700}
	for _, ts := range times {
		e := event.Event{Kind: event.KindSyscall, Time: ts, TID: 1, PID: 1}
		if err := bb.Add(&e); err != nil {
			t.Fatal(err)
		}
	}
	if bb.Len() != 4 || bb.Size() == 0 || bb.First() != 300 || bb.Last() != 900 {
		t.Fatalf("builder: len %d size %d first %d last %d", bb.Len(), bb.Size(), bb.First(), bb.Last())
	}
	b := bb.Finish()
	if b.Len() != 4 || b.First() != 300 || b.Last() != 900 || b.Size() <= frameSize || cap(b.data) != len(b.data) {
		t.Fatalf("block: len %d first %d last %d size %d cap %d", b.Len(), b.First(), b.Last(), b.Size(), cap(b.data))
	}
	if bb.Len() != 0 || bb.Size() != 0 || bb.First() != 0 {
		t.Fatal("Finish did not empty the builder")
	}
	// The next block starts from fresh delta state: it decodes alone.
	e := event.Event{Kind: event.KindSyscall, Time: 1000, TID: 1, PID: 1}
	bb.Add(&e)
	b2 := bb.Finish()
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, nil)
	w.WriteBlock(b2)
	w.Close(nil)
	if _, got, err := decodeFile(buf.Bytes()); err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], e) {
		t.Fatalf("second block alone: %v %v", got, err)
	}
}

func TestBlockBuilderLimits(t *testing.T) {
	bb := NewBlockBuilder()
	g := newGetppid()
	for range blockMaxEvents {
		if err := bb.Add(g.next()); err != nil {
			t.Fatal(err)
		}
	}
	if err := bb.Add(g.next()); err != ErrBlockFull {
		t.Fatalf("event %d: %v, want ErrBlockFull", blockMaxEvents+1, err)
	}
	if bb.Finish().Len() != blockMaxEvents {
		t.Fatal("a refused event was added")
	}

	big := make([]byte, 20<<20)
	e := event.Event{Kind: event.KindSyscall, Syscall: event.Syscall{Data: [6][]byte{big, big}}}
	if err := bb.Add(&e); err != nil {
		t.Fatalf("40 MiB event in an empty block: %v", err)
	}
	if err := bb.Add(&e); err != ErrBlockFull {
		t.Fatalf("second 40 MiB event: %v, want ErrBlockFull", err)
	}
	e.Syscall.Data = [6][]byte{big, big, big, big}
	if err := bb.Add(&e); err == nil || err == ErrBlockFull || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("80 MiB event: %v", err)
	}
	if bb.Len() != 1 {
		t.Fatalf("%d events after refusals, want 1", bb.Len())
	}
}

// A block of captured data S2 cannot shrink is stored as is (codec 0), one
// that S2 shrinks is S2 (codec 2); both read back.
func TestSealCodecs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, noise := range []bool{true, false} {
		var evs []event.Event
		for i := range 50 {
			d := bytes.Repeat([]byte("same "), 1000)
			if noise {
				for j := range d {
					d[j] = byte(rng.Uint32())
				}
			}
			evs = append(evs, event.Event{Kind: event.KindSyscall, Time: uint64(i) * 1000, TID: 9, PID: 9, Comm: "w",
				Syscall: event.Syscall{Nr: 1, Args: [6]uint64{1, 2, 5000}, Ret: 5000, Latency: rng.Uint64N(1 << 20), Data: [6][]byte{1: d}}})
		}
		bb := NewBlockBuilder()
		for i := range evs {
			if err := bb.Add(&evs[i]); err != nil {
				t.Fatal(err)
			}
		}
		blk := bb.Finish()
		if want := map[bool]uint8{true: codecNone, false: codecS2}[noise]; blk.data[1] != want {
			t.Errorf("noise %v: codec %d, want %d", noise, blk.data[1], want)
		}
		var buf bytes.Buffer
		w, err := NewWriter(&buf, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteBlock(blk); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(nil); err != nil {
			t.Fatal(err)
		}
		_, got, err := decodeFile(buf.Bytes())
		if err != nil || !reflect.DeepEqual(got, evs) {
			t.Fatalf("noise %v: %d events back of %d, %v", noise, len(got), len(evs), err)
		}
	}
}
