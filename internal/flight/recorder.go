package flight

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
)

// Defaults for the zero Config.
const (
	DefaultWindow     = 30 * time.Second
	DefaultMaxBytes   = 64 << 20
	DefaultBlockSpan  = time.Second
	DefaultBlockBytes = 256 << 10
)

// Meta keys a snapshot adds to its header.
const (
	MetaReason = "flight_reason" // why the snapshot was taken
	MetaFirst  = "flight_first"  // earliest Event.Time in it, ns (add BootTime for wall-clock time)
	MetaLast   = "flight_last"   // latest Event.Time in it, ns
)

// Config sizes a Recorder; zero fields take the defaults.
type Config struct {
	// Window is how far back, in event time from the newest event, blocks
	// are kept.
	Window time.Duration
	// MaxBytes caps the compressed blocks kept. The block being filled
	// adds up to BlockBytes of encoded events on top.
	MaxBytes int64
	// A block is sealed when it spans BlockSpan of event time or holds
	// BlockBytes of encoded events, whichever comes first. Smaller blocks
	// follow the window more closely and compress a little worse.
	BlockSpan  time.Duration
	BlockBytes int
}

// Recorder keeps the most recent events as compressed blocks. Add must be
// called from a single goroutine; Snapshot and Stats may be called from any.
type Recorder struct {
	window, span uint64 // ns
	maxBytes     int64
	blockBytes   int

	mu     sync.Mutex
	cur    *capture.BlockBuilder
	blocks []capture.Block // sealed, oldest first
	bytes  int64           // sum of blocks' sizes
	events int             // sum of blocks' lengths
	newest uint64          // latest Event.Time seen

	droppedEvents, droppedBlocks, droppedBytes uint64
	rejected                                   uint64
}

// New returns an empty recorder.
func New(c Config) *Recorder {
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.BlockSpan <= 0 {
		c.BlockSpan = DefaultBlockSpan
	}
	if c.BlockBytes <= 0 {
		c.BlockBytes = DefaultBlockBytes
	}
	return &Recorder{
		window:     uint64(c.Window),
		span:       uint64(c.BlockSpan),
		maxBytes:   c.MaxBytes,
		blockBytes: c.BlockBytes,
		cur:        capture.NewBlockBuilder(),
	}
}

// Add records e. It encodes e into the open block (a few tens of
// nanoseconds) and, about once per block, compresses the block and drops
// what left the window. An event too large for any capture block (tens of
// megabytes of captured data) is counted in Stats.Rejected instead.
func (r *Recorder) Add(e *event.Event) {
	r.mu.Lock()
	if e.Time > r.newest {
		r.newest = e.Time
	}
	if r.cur.Len() > 0 && e.Time > r.cur.First() && e.Time-r.cur.First() >= r.span {
		r.seal()
	}
	if err := r.cur.Add(e); err != nil {
		if err == capture.ErrBlockFull {
			r.seal()
			err = r.cur.Add(e)
		}
		if err != nil {
			r.rejected++
		}
	}
	if r.cur.Size() >= r.blockBytes {
		r.seal()
	}
	r.mu.Unlock()
}

// seal closes the open block and applies the window and the memory cap.
// The caller holds r.mu.
func (r *Recorder) seal() {
	if r.cur.Len() > 0 {
		b := r.cur.Finish()
		r.blocks = append(r.blocks, b)
		r.bytes += int64(b.Size())
		r.events += b.Len()
	}
	for len(r.blocks) > 0 && (r.newest-r.blocks[0].Last() > r.window || r.bytes > r.maxBytes) {
		b := r.blocks[0]
		r.bytes -= int64(b.Size())
		r.events -= b.Len()
		r.droppedEvents += uint64(b.Len())
		r.droppedBlocks++
		r.droppedBytes += uint64(b.Size())
		r.blocks[0] = capture.Block{} // let the collector have it
		r.blocks = r.blocks[1:]
	}
}

// Stats describes what a recorder holds and what it let go.
type Stats struct {
	Blocks int   // sealed blocks kept
	Events int   // events in them
	Bytes  int64 // their compressed size
	Open   int   // events in the block being filled

	DroppedEvents uint64 // events of blocks dropped, by age or by size
	DroppedBlocks uint64
	DroppedBytes  uint64
	Rejected      uint64 // events too large to record
}

// Stats returns the recorder's current counts.
func (r *Recorder) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Stats{
		Blocks: len(r.blocks), Events: r.events, Bytes: r.bytes, Open: r.cur.Len(),
		DroppedEvents: r.droppedEvents, DroppedBlocks: r.droppedBlocks,
		DroppedBytes: r.droppedBytes, Rejected: r.rejected,
	}
}

// Summary describes a snapshot file.
type Summary struct {
	Events      int
	Blocks      int
	Bytes       int64  // of the file
	First, Last uint64 // earliest and latest Event.Time in it; 0 if empty
}

// Snapshot writes every event the recorder holds to a new capture at path,
// with hdr (copied; nil for an empty one) as its header plus the reason and
// the time span in its Meta (MetaReason, MetaFirst, MetaLast). When
// hdr.BootTime is set, the header's Start and the trailer's End are the
// wall-clock times of the first and last events, so that tools reporting a
// capture's duration report the window's.
//
// The file is private (0600), and appears at path only once complete: it is
// written under a temporary name in the same directory and then linked to
// path, which fails with an error matching os.ErrExist if path exists.
// Only sealing the open block holds up Add; the writing does not.
func (r *Recorder) Snapshot(path string, hdr *capture.Header, reason string) (Summary, error) {
	r.mu.Lock()
	r.seal()
	// Blocks are immutable, so the copy of the list is all a snapshot
	// needs; memory dropped meanwhile is freed once the file is written.
	blocks := slices.Clone(r.blocks)
	r.mu.Unlock()

	s := Summary{Blocks: len(blocks)}
	for i, b := range blocks {
		s.Events += b.Len()
		if i == 0 || b.First() < s.First {
			s.First = b.First()
		}
		s.Last = max(s.Last, b.Last())
	}
	var h capture.Header
	if hdr != nil {
		h = *hdr
	}
	h.Meta = maps.Clone(h.Meta)
	if h.Meta == nil {
		h.Meta = map[string]string{}
	}
	h.Meta[MetaReason] = reason
	h.Meta[MetaFirst] = strconv.FormatUint(s.First, 10)
	h.Meta[MetaLast] = strconv.FormatUint(s.Last, 10)
	var tr capture.Trailer
	if h.BootTime != 0 && s.Events > 0 {
		h.Start = h.BootTime + int64(s.First)
		tr.End = h.BootTime + int64(s.Last)
	}
	n, err := writeNew(path, &h, blocks, &tr)
	s.Bytes = n
	return s, err
}

// writeNew writes the capture under a temporary name beside path and links
// it to path, so that nobody (a reader, the directory's pruning) ever sees
// half a file, and an existing file is never replaced.
func writeNew(path string, h *capture.Header, blocks []capture.Block, tr *capture.Trailer) (size int64, err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*"+tmpSuffix)
	if err != nil {
		return 0, fmt.Errorf("flight: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if f != nil {
			f.Close()
		}
		if rerr := os.Remove(tmp); err == nil && rerr != nil {
			err = fmt.Errorf("flight: %w", rerr)
		}
	}()
	// CreateTemp makes the file 0600 already; this only guards against a
	// change of that default, since captures hold arguments and paths.
	if err := f.Chmod(0o600); err != nil {
		return 0, fmt.Errorf("flight: %w", err)
	}
	w, err := capture.NewWriter(f, h)
	if err != nil {
		return 0, fmt.Errorf("flight: %w", err)
	}
	for _, b := range blocks {
		if err := w.WriteBlock(b); err != nil {
			w.Close(nil)
			return 0, fmt.Errorf("flight: %w", err)
		}
	}
	if err := w.Close(tr); err != nil {
		return 0, fmt.Errorf("flight: %w", err)
	}
	// The capture is wanted most after a crash, possibly of the machine.
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("flight: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("flight: %w", err)
	}
	cerr := f.Close()
	f = nil
	if cerr != nil {
		return 0, fmt.Errorf("flight: %w", cerr)
	}
	if err := os.Link(tmp, path); err != nil {
		var le *os.LinkError
		if errors.As(err, &le) {
			err = le.Err
		}
		return 0, fmt.Errorf("flight: %s: %w", path, err)
	}
	return st.Size(), nil
}

const tmpSuffix = ".tmp"
