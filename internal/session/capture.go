package session

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/proc"
)

// Capture is an open capture file with the session its events keep
// current: the process table starts from the header's, the containers from
// its MetaContainers.
type Capture struct {
	*Session
	Header *capture.Header
	// Warn receives the warning for a file cut short (os.Stderr by default).
	Warn io.Writer
	r    *capture.Reader
}

// Open opens a capture for reading.
func Open(path string) (*Capture, error) {
	r, err := capture.Open(path)
	if err != nil {
		return nil, err
	}
	h := r.Header()
	s := New(h.Arch, proc.NewTable(h.Procs), NewCaptured(h.Meta[MetaContainers]), nil)
	return &Capture{Session: s, Header: h, Warn: os.Stderr, r: r}, nil
}

func (c *Capture) Close() error { return c.r.Close() }

// Trailer is the capture's trailer once Each has read to the end; nil for a
// file cut short.
func (c *Capture) Trailer() *capture.Trailer { return c.r.Trailer() }

// Each calls fn for every event the session passes, after its tables have
// seen it. A file cut short is read to its last whole block with a warning,
// not an error. drops is what the kernel lost while recording, per the
// trailer.
func (c *Capture) Each(fn func(*event.Event) error) (drops uint64, err error) {
	var e event.Event
	for {
		if err = c.r.Next(&e); err != nil {
			break
		}
		if !c.Pass(&e) {
			continue
		}
		if err = fn(&e); err != nil {
			return 0, err
		}
	}
	switch {
	case errors.Is(err, capture.ErrTruncated):
		fmt.Fprintf(c.Warn, "sysray: warning: %v\n", err)
	case !errors.Is(err, io.EOF):
		return 0, err
	}
	if t := c.r.Trailer(); t != nil {
		for _, d := range t.Drops {
			drops += d
		}
	}
	return drops, nil
}
