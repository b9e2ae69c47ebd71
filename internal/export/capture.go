package export

import (
	"errors"
	"io"
	"os"
	"strings"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/filter"
	"github.com/sysray/sysray/internal/outfile"
	"github.com/sysray/sysray/internal/output"
	"github.com/sysray/sysray/internal/session"
)

// Capture exports the capture file in to out ("-" for stdout) in the
// format newSink writes. The file is written 0600, since the trace holds
// paths and arguments, and takes out's place only once whole (outfile).
func Capture(in, out string, newSink func(io.Writer) Sink, opt Options) (Stats, error) {
	c, err := session.Open(in)
	if err != nil {
		return Stats{}, err
	}
	defer c.Close()

	if out == "-" {
		return Export(captureSource(c, in), newSink(os.Stdout), opt)
	}
	f, err := outfile.Create(out, in)
	if err != nil {
		return Stats{}, err
	}
	defer f.Close()
	st, err := Export(captureSource(c, in), newSink(f), opt)
	if err != nil {
		return st, err
	}
	return st, f.Finish()
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
