package checkup

import (
	"strconv"

	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/session"
)

// Capture diagnoses a capture file, as `sysray doctor -r` does: the host
// facts its header recorded, its processes and containers kept by the
// capture's session, every event in order.
func Capture(path string) (*doctor.Report, error) {
	c, err := session.Open(path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	h := c.Header
	facts := doctor.Host{Arch: h.Arch, Kernel: h.Meta["kernel"], VsyscallMode: h.Meta["vsyscall_mode"], Meta: h.Meta}
	if facts.Kernel == "" {
		facts.Kernel = h.Kernel
	}
	if v, err := strconv.ParseUint(h.Meta[session.MetaStacksSlow], 10, 64); err == nil {
		facts.Slow = v
	}
	facts.Container = func(pid uint32, cg uint64) string { return session.Describe(c.Container(pid, cg)) }
	d := doctor.New(facts, c.Procs)
	d.ProcsKeptByCaller()
	if _, err := c.Each(func(e *event.Event) error { d.Observe(e); return nil }); err != nil {
		return nil, err
	}
	return d.Report(), nil
}
