package capture

import "github.com/sysray/sysray/internal/event"

// Kind 12 (event.CPUWait), as docs/capture-format.md lays it out: a
// length-prefixed body, which a reader that predates the kind skips.

const (
	cwSummary = 1 << iota
	cwWoken
	cwIdle
)

func appendSchedTask(v []byte, t *event.SchedTask, holder bool) []byte {
	if holder {
		v = appendUvarint(v, uint64(t.PID))
		v = appendUvarint(v, uint64(t.TID))
		v = appendBytes(v, []byte(t.Comm))
		v = appendUvarint(v, t.Cgroup)
	}
	v = appendUvarint(v, uint64(t.Prio))
	v = appendUvarint(v, uint64(t.Policy))
	v = appendUvarint(v, t.Allowed)
	return appendUvarint(v, uint64(t.NrAllowed))
}

func appendCPUWait(v []byte, w *event.CPUWait) []byte {
	var f uint64
	if w.Summary {
		f |= cwSummary
	}
	if w.Woken {
		f |= cwWoken
	}
	if w.Idle {
		f |= cwIdle
	}
	v = appendUvarint(v, f)
	v = appendUvarint(v, w.Wait)
	v = appendUvarint(v, zigzag(int64(w.Nr)))
	v = appendUvarint(v, uint64(w.NrRunning))
	v = appendSchedTask(v, &w.Task, false)
	v = appendSchedTask(v, &w.Holder, true)
	s := &w.Sum
	for _, x := range []uint64{s.Run, s.WaitWoken, s.WaitPreempted, s.WaitIdle, s.WaitSyscall, s.Max, uint64(s.Waits)} {
		v = appendUvarint(v, x)
	}
	for _, h := range s.Hist {
		v = appendUvarint(v, uint64(h))
	}
	return v
}

func (y *blockDecoder) schedTask(t *event.SchedTask, holder bool) {
	if holder {
		t.PID = uint32(y.uvarint())
		t.TID = uint32(y.uvarint())
		t.Comm = string(y.bytes())
		t.Cgroup = y.uvarint()
	}
	t.Prio = uint8(y.uvarint())
	t.Policy = uint8(y.uvarint())
	t.Allowed = y.uvarint()
	t.NrAllowed = uint32(y.uvarint())
}

func (y *blockDecoder) cpuWait(w *event.CPUWait) {
	f := y.uvarint()
	w.Summary, w.Woken, w.Idle = f&cwSummary != 0, f&cwWoken != 0, f&cwIdle != 0
	w.Wait = y.uvarint()
	w.Nr = int32(unzigzag(y.uvarint()))
	w.NrRunning = uint32(y.uvarint())
	y.schedTask(&w.Task, false)
	y.schedTask(&w.Holder, true)
	s := &w.Sum
	for _, p := range []*uint64{&s.Run, &s.WaitWoken, &s.WaitPreempted, &s.WaitIdle, &s.WaitSyscall, &s.Max} {
		*p = y.uvarint()
	}
	s.Waits = uint32(y.uvarint())
	for i := range s.Hist {
		s.Hist[i] = uint32(y.uvarint())
	}
}
