package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/proc"
)

// capFile is an open capture with the process and container tables its
// events keep current, for every command that reads one.
type capFile struct {
	r     *capture.Reader
	h     *capture.Header
	procs *proc.Table
	ctrs  *capturedContainers
}

func openCapture(path string) (*capFile, error) {
	r, err := capture.Open(path)
	if err != nil {
		return nil, err
	}
	h := r.Header()
	return &capFile{r: r, h: h, procs: proc.NewTable(h.Procs), ctrs: newCapturedContainers(h.Meta[metaContainers])}, nil
}

func (c *capFile) Close() error { return c.r.Close() }

// each calls fn for every event, after the tables have seen it. A file cut
// short is read to its last whole block with a warning, not an error. drops
// is what the kernel lost while recording, per the trailer.
func (c *capFile) each(fn func(*event.Event) error) (drops uint64, err error) {
	var e event.Event
	for {
		if err = c.r.Next(&e); err != nil {
			break
		}
		c.procs.Update(&e)
		c.ctrs.observe(&e)
		if err = fn(&e); err != nil {
			return 0, err
		}
	}
	switch {
	case errors.Is(err, capture.ErrTruncated):
		fmt.Fprintf(os.Stderr, "sysray: warning: %v\n", err)
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

// syscallNames is arch's syscall table, for a capture header: a reader
// elsewhere names the calls as this sysray did.
func syscallNames(arch event.Arch) []string {
	names := make([]string, event.MaxSyscall(arch)+1)
	for i := range names {
		names[i] = event.SyscallName(arch, uint32(i))
	}
	return names
}
