package probe

import (
	"testing"
	"unsafe"

	"github.com/sysray/sysray/internal/event"
)

// struct runq_rec in bpf/sysray.h against the object and decodeCPUWait.
func TestRunqLayout(t *testing.T) {
	spec, err := loadSysray()
	if err != nil {
		t.Fatal(err)
	}
	if st := structOf(t, spec.Types, "runq_rec"); st != nil && int(st.Size) != runqSize {
		t.Errorf("sizeof(struct runq_rec) = %d, decode.go says %d", st.Size, runqSize)
	}
	if got := unsafe.Sizeof(sysrayRunqRec{}); int(got) != runqSize {
		t.Errorf("bpf2go's runq_rec is %d bytes, decode.go says %d", got, runqSize)
	}
	offs := map[string]int{"wait": 48, "sum": 56, "woken": 57, "prio": 58, "policy": 59, "nr": 60, "allowed": 64,
		"nr_allowed": 72, "nr_running": 76, "idle_ns": 80, "group": 88, "held": runqHeld, "s": runqHeld + runqHolders*runqHolderSize}
	st := structOf(t, spec.Types, "runq_rec")
	if st == nil {
		return
	}
	for _, m := range st.Members {
		if want, ok := offs[m.Name]; ok {
			if int(m.Offset.Bytes()) != want {
				t.Errorf("runq_rec.%s at %d, decode reads %d", m.Name, m.Offset.Bytes(), want)
			}
			delete(offs, m.Name)
		}
	}
	for n := range offs {
		t.Errorf("runq_rec.%s is gone", n)
	}
	if h := structOf(t, spec.Types, "runq_holder"); h != nil {
		if int(h.Size) != runqHolderSize {
			t.Errorf("sizeof(struct runq_holder) = %d, decode says %d", h.Size, runqHolderSize)
		}
		hoffs := map[string]int{"ns": 0, "cgroup": 8, "allowed": 16, "group": 24, "pid": 32, "tid": 36, "nr_allowed": 40, "prio": 44, "policy": 45, "comm": 48}
		for _, m := range h.Members {
			if want, ok := hoffs[m.Name]; ok && int(m.Offset.Bytes()) != want {
				t.Errorf("runq_holder.%s at %d, decode reads %d", m.Name, m.Offset.Bytes(), want)
			}
		}
	}
	sum := structOf(t, spec.Types, "runq_sum")
	soffs := map[string]int{"run": 0, "wait_woken": 8, "wait_preempted": 16, "wait_idle": 24, "wait_sys": 32,
		"max": 40, "waits": 48, "hist": 52}
	if sum != nil {
		for _, m := range sum.Members {
			if want, ok := soffs[m.Name]; ok && int(m.Offset.Bytes()) != want {
				t.Errorf("runq_sum.%s at %d, decode reads %d", m.Name, m.Offset.Bytes(), want)
			}
		}
	}
}

func TestDecodeCPUWait(t *testing.T) {
	b := make([]byte, runqSize)
	b[0] = byte(event.KindCPUWait)
	le.PutUint32(b[4:], 1)    // cpu
	le.PutUint32(b[8:], 700)  // pid
	le.PutUint32(b[12:], 701) // tid
	le.PutUint64(b[48:], 9_000_000)
	b[57], b[58], b[59] = 1, 120, 0
	le.PutUint32(b[60:], 230)
	le.PutUint64(b[64:], 2)
	le.PutUint32(b[72:], 1)
	le.PutUint32(b[76:], 3)
	le.PutUint64(b[80:], 1000)
	le.PutUint64(b[88:], 0xabc)
	h := b[runqHeld:]
	le.PutUint64(h, 8_000_000)
	le.PutUint64(h[8:], 55)
	le.PutUint64(h[16:], 2)
	le.PutUint64(h[24:], 0xabc)
	le.PutUint32(h[32:], 800)
	le.PutUint32(h[36:], 801)
	le.PutUint32(h[40:], 1)
	h[44] = 110
	copy(h[48:], "hog")
	var e event.Event
	if err := decode(b, &e, &comms{}, nil); err != nil {
		t.Fatal(err)
	}
	w := e.CPUWait
	if e.Kind != event.KindCPUWait || e.CPU != 1 || e.TID != 701 || w.Summary || w.Wait != 9_000_000 || !w.Woken ||
		w.Nr != 230 || w.Task.Prio != 120 || w.Task.Allowed != 2 || w.Task.Group != 0xabc || w.NrRunning != 3 || w.IdleNS != 1000 || len(w.Held) != 1 ||
		w.Held[0] != (event.SchedTask{NS: 8_000_000, PID: 800, TID: 801, Comm: "hog", Cgroup: 55, Group: 0xabc, Prio: 110, NrAllowed: 1, Allowed: 2}) {
		t.Errorf("decoded as %+v", w)
	}
	b[56] = 1 // a summary
	const o = runqHeld + runqHolders*runqHolderSize
	le.PutUint64(b[o:], 10)
	le.PutUint64(b[o+8:], 20)
	le.PutUint64(b[o+16:], 30)
	le.PutUint32(b[o+48:], 4)
	le.PutUint32(b[o+52+4*7:], 2)
	if err := decode(b, &e, &comms{}, nil); err != nil {
		t.Fatal(err)
	}
	s := e.CPUWait.Sum
	if !e.CPUWait.Summary || s.Run != 10 || s.Waited() != 50 || s.Waits != 4 || s.Hist[7] != 2 || e.CPUWait.Held != nil {
		t.Errorf("summary decoded as %+v", e.CPUWait)
	}
	if err := decode(b[:runqSize-1], &e, &comms{}, nil); err == nil {
		t.Error("a short record decoded")
	}
}
