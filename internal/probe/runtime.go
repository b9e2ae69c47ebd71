package probe

import (
	"time"
)

// RunTimes is the kernel's account of how long each of the probe's
// programs has run, by its function's name in bpf/ (as bpftool shows it,
// from the program's BTF). The kernel keeps it only while
// kernel.bpf_stats_enabled is 1 or a process holds BPF_ENABLE_STATS; it is
// zero otherwise. A program the kernel cannot describe is left out.
//
// It asks the kernel about the programs the probe holds, one bpf() call
// each and no file: the agent reads it with every snapshot, also while a
// full audit backlog makes every open wait (ebpf.Program.Info reads
// /proc/self/fdinfo). Finding the programs through /proc/self/fdinfo, a
// file per descriptor, was a ninth of the agent's CPU under load.
func (p *Probe) RunTimes() map[string]time.Duration {
	out := make(map[string]time.Duration, len(p.progs))
	for name, prog := range p.progs {
		if st, err := prog.Stats(); err == nil {
			out[name] = st.Runtime
		}
	}
	return out
}
