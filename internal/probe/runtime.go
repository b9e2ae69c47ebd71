package probe

import (
	"time"
)

// RunTimes is the kernel's account of how long each of the probe's
// programs has run, by the kernel's name for it (at most 15 characters,
// as bpftool shows it). The kernel keeps it only while
// kernel.bpf_stats_enabled is 1 or a process holds BPF_ENABLE_STATS; it is
// zero otherwise. A program the kernel cannot describe is left out.
//
// It asks the kernel about the programs the probe holds, one call each:
// the agent reads it with every snapshot, and finding them through
// /proc/self/fdinfo, a file per descriptor, was a ninth of its CPU under
// load.
func (p *Probe) RunTimes() map[string]time.Duration {
	p.knamesOnce.Do(func() {
		p.knames = make(map[string]string, len(p.progs))
		for name, prog := range p.progs {
			if info, err := prog.Info(); err == nil {
				p.knames[name] = info.Name
			}
		}
	})
	out := make(map[string]time.Duration, len(p.knames))
	for name, kname := range p.knames {
		if st, err := p.progs[name].Stats(); err == nil {
			out[kname] += st.Runtime
		}
	}
	return out
}
