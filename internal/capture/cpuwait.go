package capture

import "github.com/sysray/sysray/internal/event"

// Kind 12 (event.CPUWait), as docs/capture-format.md lays it out: a
// length-prefixed body, which a reader that predates the kind skips.

const (
	cwSummary = 1 << iota
	cwWoken
)

func appendSchedTask(v []byte, t *event.SchedTask, holder bool) []byte {
	if holder {
		v = appendUvarint(v, t.NS)
		v = appendUvarint(v, uint64(t.PID))
		v = appendUvarint(v, uint64(t.TID))
		v = appendBytes(v, []byte(t.Comm))
		v = appendUvarint(v, t.Cgroup)
	}
	v = appendUvarint(v, uint64(t.Prio))
	v = appendUvarint(v, uint64(t.Policy))
	v = appendUvarint(v, t.Allowed)
	v = appendUvarint(v, uint64(t.NrAllowed))
	return appendUvarint(v, t.Group)
}

func appendCPUWait(v []byte, w *event.CPUWait) []byte {
	var f uint64
	if w.Summary {
		f |= cwSummary
	}
	if w.Woken {
		f |= cwWoken
	}
	v = appendUvarint(v, f)
	v = appendUvarint(v, w.Wait)
	v = appendUvarint(v, zigzag(int64(w.Nr)))
	v = appendUvarint(v, uint64(w.NrRunning))
	v = appendUvarint(v, w.IdleNS)
	v = appendSchedTask(v, &w.Task, false)
	if w.Held == nil {
		v = appendUvarint(v, 0)
	} else {
		v = appendUvarint(v, uint64(len(w.Held))+1)
	}
	for i := range w.Held {
		v = appendSchedTask(v, &w.Held[i], true)
	}
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
		t.NS = y.uvarint()
		t.PID = uint32(y.uvarint())
		t.TID = uint32(y.uvarint())
		t.Comm = string(y.bytes())
		t.Cgroup = y.uvarint()
	}
	t.Prio = uint8(y.uvarint())
	t.Policy = uint8(y.uvarint())
	t.Allowed = y.uvarint()
	t.NrAllowed = uint32(y.uvarint())
	t.Group = y.uvarint()
}

func (y *blockDecoder) cpuWait(w *event.CPUWait) {
	f := y.uvarint()
	w.Summary, w.Woken = f&cwSummary != 0, f&cwWoken != 0
	w.Wait = y.uvarint()
	w.Nr = int32(unzigzag(y.uvarint()))
	w.NrRunning = uint32(y.uvarint())
	w.IdleNS = y.uvarint()
	y.schedTask(&w.Task, false)
	// A count+1, 0 for nil; no more than the body's bytes could hold.
	if n := y.uvarint(); n > 0 {
		n--
		if n > uint64(len(y.buf)) {
			y.fail("cpu_wait: more holders than bytes")
			return
		}
		w.Held = make([]event.SchedTask, n)
		for i := range w.Held {
			y.schedTask(&w.Held[i], true)
		}
	}
	s := &w.Sum
	for _, p := range []*uint64{&s.Run, &s.WaitWoken, &s.WaitPreempted, &s.WaitIdle, &s.WaitSyscall, &s.Max} {
		*p = y.uvarint()
	}
	s.Waits = uint32(y.uvarint())
	for i := range s.Hist {
		s.Hist[i] = uint32(y.uvarint())
	}
}
