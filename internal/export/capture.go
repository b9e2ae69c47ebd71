package export

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/filter"
	"github.com/sysray/sysray/internal/output"
	"github.com/sysray/sysray/internal/session"
)

// Capture exports the capture file in to out ("-" for stdout) in the
// format newSink writes. The file is created 0600, since the trace holds
// paths and arguments; a partly written one is removed.
func Capture(in, out string, newSink func(io.Writer) Sink, opt Options) (Stats, error) {
	c, err := session.Open(in)
	if err != nil {
		return Stats{}, err
	}
	defer c.Close()

	var w io.Writer = os.Stdout
	var f *os.File
	if out != "-" {
		// Writing over the capture would destroy it before it is read.
		if a, err := os.Stat(in); err == nil {
			if b, err := os.Stat(out); err == nil && os.SameFile(a, b) {
				return Stats{}, fmt.Errorf("export: %s is the capture being exported", out)
			}
		}
		if f, err = os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
			return Stats{}, err
		}
		// An existing file keeps its mode through O_TRUNC: it is made
		// private before anything is written.
		if err := f.Chmod(0o600); err != nil {
			f.Close()
			return Stats{}, err
		}
		w = f
	}
	st, err := Export(captureSource(c, in), newSink(w), opt)
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(out)
		}
	}
	return st, err
}

// captureSource is an opened capture as a Source. Its first pass reads
// through the session, which learns the processes and containers; later
// passes read the file at path again as it is.
func captureSource(c *session.Capture, path string) Source {
	h := c.Header
	passes := 0
	return Source{
		Arch:     h.Arch,
		BootTime: h.BootTime,
		Procs:    h.Procs,
		Container: func(pid uint32, cg uint64) string {
			return containerLabel(c.Ctrs.Container(pid, cg))
		},
		Events: func(fn func(*event.Event) error) error {
			passes++
			if passes == 1 {
				_, err := c.Each(fn)
				return err
			}
			// Later passes: the first already warned of a cut-off file.
			r, err := capture.Open(path)
			if err != nil {
				return err
			}
			defer r.Close()
			var e event.Event
			for {
				if err := r.Next(&e); err != nil {
					if errors.Is(err, io.EOF) || errors.Is(err, capture.ErrTruncated) {
						return nil
					}
					return err
				}
				if err := fn(&e); err != nil {
					return err
				}
			}
		},
	}
}

// containerLabel names a container for a process's label: its name (or
// short id), image and pod, as far as the capture knows them.
func containerLabel(x filter.Container) string {
	if x.ID == "" && x.Name == "" {
		return ""
	}
	oc := output.Container{ID: x.ID, Name: x.Name}
	s := "container " + oc.Short()
	var more []string
	if x.Image != "" {
		more = append(more, x.Image)
	}
	if x.PodName != "" {
		more = append(more, "pod "+x.PodNamespace+"/"+x.PodName)
	}
	if len(more) > 0 {
		s += " (" + strings.Join(more, ", ") + ")"
	}
	return s
}
