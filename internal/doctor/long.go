package doctor

import "github.com/sysray/sysray/internal/proc"

// NewLong returns a doctor for what shows only over hours: the detectors
// that follow a process's state as it grows (a call that slows with the
// process's threads, mappings or files). An agent runs one beside its
// short windows' doctors and keeps it: a process that forks a few times a
// minute while its mappings grow all day gives no window enough calls,
// but this doctor all of them. Report may be called after every window;
// Forget then drops the processes that ended, so memory follows the
// living. procs names processes and is not updated here (the windows'
// doctors update it).
func NewLong(host Host, procs *proc.Table) *Doctor {
	d := &Doctor{env: &Env{Host: host, Procs: procs, cgroups: map[uint32]uint64{}, threads: map[uint32]*lifetime{}},
		long: true, ended: map[uint32]bool{}}
	d.detectors = detectors(&d.env.Host, true)
	return d
}

// forgetter is a detector that keeps per-process or per-thread state: a
// long doctor's Forget, and any doctor past MaxEnded ended processes, let
// go of ended ones (pids, and tids their threads).
type forgetter interface {
	forget(pids, tids map[uint32]bool)
}

// Forget drops what a long doctor holds of the processes that ended since
// the last Forget (their findings were reported by then).
func (d *Doctor) Forget() {
	if len(d.ended) == 0 {
		return
	}
	d.forget(d.ended)
	d.ended = map[uint32]bool{}
}

// forget drops what the doctor and its detectors hold of processes pids.
func (d *Doctor) forget(pids map[uint32]bool) {
	tids := map[uint32]bool{}
	for tid, t := range d.env.threads {
		if pids[t.pid] {
			tids[tid] = true
			delete(d.env.threads, tid)
		}
	}
	for pid := range pids {
		delete(d.env.cgroups, pid)
	}
	if d.env.Procs != nil && d.procsKept {
		// Their names are needed no more: no finding will name them. A
		// table the doctor keeps itself may be shared (an agent's windows
		// and its captures read it, and it prunes it on its own clock).
		d.env.Procs.Forget(pids)
	}
	if d.env.series != nil {
		d.env.series.forget(pids)
	}
	for _, det := range d.detectors {
		if f, ok := det.(forgetter); ok {
			f.forget(pids, tids)
		}
	}
}
