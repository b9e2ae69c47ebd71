package htmlreport

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/session"
)

// Summary is what Capture wrote.
type Summary struct {
	Findings int
	Events   uint64 // the events the doctor read
	Bytes    int64  // the page's size
}

// Capture runs the doctor on a capture file, aggregates its events and
// writes the page to out (0600), replacing out only once the page is
// complete. title names the page; "" names it for the capture file, which
// the page then cites.
func Capture(capPath, out, title string) (Summary, error) {
	rep, err := doctor.ReadCapture(capPath)
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
	err = writeAtomic(out, func(f *os.File) error {
		w := bufio.NewWriter(f)
		if err := Write(w, b.Data(meta, rep), title); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		sum.Bytes, err = f.Seek(0, io.SeekCurrent)
		return err
	})
	if err != nil {
		return Summary{}, err
	}
	return sum, nil
}

// writeAtomic writes a file 0600 next to path and renames it over path, so
// a failed report leaves no half page, and an old world-readable file is
// replaced rather than reused.
func writeAtomic(path string, fill func(*os.File) error) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if err := fill(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
