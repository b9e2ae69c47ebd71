package htmlreport

import (
	"bufio"
	"io"
	"path/filepath"
	"time"

	"github.com/sysray/sysray/internal/checkup"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/outfile"
	"github.com/sysray/sysray/internal/session"
)

// Summary is what Capture wrote.
type Summary struct {
	Findings int
	Events   uint64 // the events the doctor read
	Bytes    int64  // the page's size
}

// Capture writes the page of a capture file (CaptureTo) to the file out
// (0600), replacing out only once the page is complete (outfile).
func Capture(capPath, out, title string) (Summary, error) {
	f, err := outfile.Create(out, capPath)
	if err != nil {
		return Summary{}, err
	}
	defer f.Close()
	s, err := CaptureTo(capPath, f, title)
	if err != nil {
		return Summary{}, err
	}
	return s, f.Finish()
}

// CaptureTo runs the doctor on a capture file, aggregates its events and
// writes the page to out. title names the page; "" names it for the
// capture file, which the page then cites.
func CaptureTo(capPath string, out io.Writer, title string) (Summary, error) {
	rep, err := checkup.Capture(capPath)
	if err != nil {
		return Summary{}, err
	}
	c, err := session.Open(capPath)
	if err != nil {
		return Summary{}, err
	}
	defer c.Close()
	h := c.Header
	b := New(h.Arch, Names{
		Container: func(pid uint32, cg uint64) string { return session.Describe(c.Ctrs.Container(pid, cg)) },
		Command:   c.Procs.Cmdline,
	}, Limits{})
	drops, err := c.Each(func(e *event.Event) error { b.Observe(e); return nil })
	if err != nil {
		return Summary{}, err
	}
	facts := map[string]string{}
	for k, v := range h.Meta {
		if k != session.MetaContainers {
			facts[k] = v
		}
	}
	meta := Meta{Hostname: h.Hostname, Kernel: h.Kernel, Arch: h.Arch.String(),
		VsyscallMode: h.Meta["vsyscall_mode"], Command: h.Command, Start: h.Start, BootTime: h.BootTime,
		Drops: drops, Facts: facts, Generated: time.Now().UnixNano()}
	if t := c.Trailer(); t != nil {
		meta.End = t.End
		meta.DropsPerCPU = t.Drops
	} else {
		meta.Warning = "The capture has no trailer (its writer did not finish): this report covers its events up to its last whole block."
	}
	if title == "" {
		// Read from a file: the report is named for it.
		meta.File = capPath
		title = filepath.Base(capPath)
	}
	sum := Summary{Findings: len(rep.Findings), Events: rep.Events}
	cw := &counter{w: out}
	w := bufio.NewWriter(cw)
	if err := Write(w, b.Data(meta, rep), title); err != nil {
		return Summary{}, err
	}
	if err := w.Flush(); err != nil {
		return Summary{}, err
	}
	sum.Bytes = cw.n
	return sum, nil
}

// counter counts what passes through it: the page may go to a pipe,
// which cannot say where it is.
type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
