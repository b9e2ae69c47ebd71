package probe

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// The sys record layout comes from the BPF object's BTF (bpf2go generates
// sysraySysSlow); decode must agree with it field by field.
func TestDecodeSyscallMatchesBTFLayout(t *testing.T) {
	var big sysraySysSlow
	r := &big.R
	r.H.Kind = uint8(event.KindSyscall)
	r.H.Cpu = 1
	r.H.Pid = 4242
	r.H.Tid = 4243
	r.H.Ts = 123456789
	r.H.Cgroup = 77
	for i, c := range "bash" {
		r.H.Comm[i] = int8(c)
	}
	r.Latency = 12000
	r.Ret = -2
	r.Args = [6]uint64{0xffffffffffffff9c, 0x7ffd0000, 0x80000, 0, 5, 6}
	r.Nr = 257
	path := "/etc/ld.so.cache"
	r.Dlen[0] = uint16(len(path))
	r.Darg[0] = 1
	r.Dset = 1
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, &big.R); err != nil {
		t.Fatal(err)
	}
	buf.WriteString(path)
	b := buf.Bytes()
	le.PutUint16(b[2:], uint16(len(b)))

	var e event.Event
	if err := decode(b, &e, &comms{}, nil); err != nil {
		t.Fatal(err)
	}
	s := e.Syscall
	if e.Kind != event.KindSyscall || e.CPU != 1 || e.PID != 4242 || e.TID != 4243 || e.Time != 123456789 ||
		e.Cgroup != 77 || e.Comm != "bash" {
		t.Errorf("header decoded as %+v", e)
	}
	if s.Nr != 257 || s.Ret != -2 || s.Latency != 12000 || s.Args != r.Args {
		t.Errorf("syscall decoded as %+v", s)
	}
	if string(s.Data[1]) != path || s.Data[0] != nil || s.Truncated[1] {
		t.Errorf("data decoded as %q", s.Data)
	}
}

// struct reclaim_rec in bpf/sysray.h: a pass of memory-cgroup reclaim, with
// its stack looked up by id.
func TestDecodeReclaim(t *testing.T) {
	b := make([]byte, reclaimSize)
	b[0] = byte(event.KindReclaim)
	le.PutUint16(b[2:], reclaimSize)
	le.PutUint32(b[8:], 7)
	le.PutUint64(b[16:], 5000)
	le.PutUint64(b[48:], 2_500_000)
	le.PutUint64(b[56:], 96)
	le.PutUint32(b[64:], uint32(0xffffffff)) // -1: outside a syscall
	le.PutUint32(b[68:], 3)
	le.PutUint64(b[72:], 0x7f0000200000)
	le.PutUint16(b[80:], uint16(event.ReclaimCompact))
	le.PutUint16(b[82:], 9)
	le.PutUint32(b[84:], 5)
	stacks := func(id int32) []uint64 {
		if id != 3 {
			t.Errorf("stack id %d, want 3", id)
		}
		return []uint64{0xffffffff81000010, 0xffffffff81000020}
	}
	var e event.Event
	if err := decode(b, &e, &comms{}, stacks); err != nil {
		t.Fatal(err)
	}
	r := e.Reclaim
	if e.Kind != event.KindReclaim || e.PID != 7 || e.Time != 5000 || r.Duration != 2_500_000 || r.Pages != 96 || r.Nr != -1 ||
		len(r.Stack) != 2 || r.Stack[1].Addr != 0xffffffff81000020 || r.FaultAddr != 0x7f0000200000 ||
		r.What != event.ReclaimCompact || r.Order != 9 || r.Status != 5 {
		t.Errorf("decoded as %+v", e)
	}
	if err := decode(b[:reclaimSize-1], &e, &comms{}, nil); err == nil {
		t.Error("a short reclaim record decoded")
	}
}

func TestDecodeRejectsShortAndUnknown(t *testing.T) {
	var e event.Event
	cm := &comms{}
	if err := decode(make([]byte, 10), &e, cm, nil); err == nil {
		t.Error("a 10-byte record decoded")
	}
	rec := make([]byte, hdrSize)
	rec[0] = 99
	if err := decode(rec, &e, cm, nil); err == nil {
		t.Error("an unknown kind decoded")
	}
	rec = make([]byte, faultSize-1)
	rec[0] = byte(event.KindPageFault)
	if err := decode(rec, &e, cm, nil); err == nil {
		t.Error("a short fault record decoded")
	}
	// A captured argument that claims more bytes than the record holds.
	rec = make([]byte, sysSize)
	rec[0] = byte(event.KindSyscall)
	le.PutUint16(rec[116:], 300)
	rec[123] = 1
	if err := decode(rec, &e, cm, nil); err == nil {
		t.Error("an overrunning argument decoded")
	}
}

func TestSplitArgv(t *testing.T) {
	got := splitArgv([]byte("ls\x00-l\x00/tmp\x00"))
	if len(got) != 3 || got[0] != "ls" || got[1] != "-l" || got[2] != "/tmp" {
		t.Errorf("splitArgv = %q", got)
	}
	if splitArgv(nil) != nil {
		t.Error("empty argv not nil")
	}
}

func TestDecodeSleeps(t *testing.T) {
	var big sysraySysSlow
	big.R.H.Kind = uint8(event.KindSyscall)
	big.R.H.Flags = fSleeps
	big.R.Nr = 35
	big.R.Latency = 50_000_000
	big.Sl.Ustack = 7
	big.Sl.N = 2
	s0, s1 := &big.Sl.S[0], &big.Sl.S[1]
	s0.Dur, s0.Count, s0.Kstack, s0.WakerKstack = 1000, 1, 1, -1
	s1.Dur, s1.Count, s1.Kstack, s1.WakerPid, s1.WakerTid, s1.WakerKstack = 49_000_000, 1, 2, 9, 10, 3
	for i, c := range "swapper/1" {
		big.Sl.S[1].WakerComm[i] = int8(c)
	}
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, &big.R)
	binary.Write(&buf, binary.LittleEndian, &big.Sl)
	b := buf.Bytes()
	le.PutUint16(b[2:], uint16(len(b)))

	stacks := map[int32][]uint64{1: {0xa, 0xb}, 2: {0xc}, 3: {0xd, 0xe, 0xf}, 7: {0x401000}}
	var e event.Event
	if err := decode(b, &e, &comms{}, func(id int32) []uint64 { return stacks[id] }); err != nil {
		t.Fatal(err)
	}
	s := e.Syscall
	if len(s.UserStack) != 1 || s.UserStack[0].Addr != 0x401000 {
		t.Errorf("user stack %+v", s.UserStack)
	}
	if len(s.Sleeps) != 2 {
		t.Fatalf("sleeps %+v", s.Sleeps)
	}
	// longest first
	l := s.Sleeps[0]
	if l.Duration != 49_000_000 || l.WakerPID != 9 || l.WakerTID != 10 || l.WakerComm != "swapper/1" ||
		len(l.Stack) != 1 || l.Stack[0].Addr != 0xc || len(l.WakerStack) != 3 {
		t.Errorf("longest sleep %+v", l)
	}
	if s.Sleeps[1].WakerStack != nil {
		t.Errorf("a missing waker stack decoded as %+v", s.Sleeps[1].WakerStack)
	}
}

// A thread's last calls (bpf/sysray.h struct recent_rec): oldest first.
func TestDecodeRecent(t *testing.T) {
	b := make([]byte, recentSize)
	b[0] = byte(event.KindRecent)
	le.PutUint16(b[2:], recentSize)
	le.PutUint32(b[12:], 7)
	le.PutUint32(b[48:], 2)
	for i, c := range []event.RecentCall{{Time: 10, Latency: 3, Ret: -12, Nr: 9}, {Time: 20, Latency: 4, Ret: 3, Nr: 257}} {
		o := b[56+32*i:]
		le.PutUint64(o, c.Time)
		le.PutUint64(o[8:], c.Latency)
		le.PutUint64(o[16:], uint64(c.Ret))
		le.PutUint32(o[24:], c.Nr)
	}
	var e event.Event
	if err := decode(b, &e, &comms{}, nil); err != nil {
		t.Fatal(err)
	}
	want := []event.RecentCall{{Time: 10, Latency: 3, Ret: -12, Nr: 9}, {Time: 20, Latency: 4, Ret: 3, Nr: 257}}
	if e.Kind != event.KindRecent || e.TID != 7 || len(e.Proc.Recent) != 2 || e.Proc.Recent[0] != want[0] || e.Proc.Recent[1] != want[1] {
		t.Fatalf("decoded %+v", e)
	}
	// The merger folds the list into the thread's exit and passes nothing else on.
	var got []event.Event
	m := newMerger(1, func(e *event.Event) error { got = append(got, *e); return nil }, nil)
	exit := event.Event{Kind: event.KindExit, TID: 7, PID: 7}
	if err := m.emit(&e); err != nil {
		t.Fatal(err)
	}
	if err := m.emit(&exit); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Kind != event.KindExit || len(got[0].Proc.Recent) != 2 {
		t.Fatalf("merger passed on %+v", got)
	}
}

// The merger decodes every record into one event: what a record of one
// kind left must not show through the next record, of any kind.
func TestDecodeReusesEvent(t *testing.T) {
	evs := []event.Event{
		{Kind: event.KindSyscall, Time: 1, TID: 2, Comm: "a", Syscall: event.Syscall{Nr: 257, Args: [6]uint64{1, 2}, Ret: -2, Latency: 5,
			Data: [6][]byte{1: []byte("/etc")}, Sleeps: []event.Sleep{{Duration: 3, Count: 1}}}},
		// A syscall after a syscall: only what the first carried is cleared.
		{Kind: event.KindSyscall, Time: 1, TID: 2, Comm: "a", Syscall: event.Syscall{Nr: 1, Latency: 2, Unfinished: true}},
		{Kind: event.KindSyscall, Time: 1, TID: 2, Comm: "a", Syscall: event.Syscall{Nr: 0, Args: [6]uint64{3}, Ret: 4, Latency: 2,
			Data: [6][]byte{1: []byte("ab")}}},
		{Kind: event.KindPageFault, Time: 2, TID: 3, Comm: "b", Fault: event.Fault{Addr: 9, IP: 8, Error: 4, SP: 7}},
		{Kind: event.KindSyscall, Time: 3, TID: 2, Comm: "a", Syscall: event.Syscall{Nr: 0, Latency: 1}},
		{Kind: event.KindPageFault, Time: 4, TID: 2, Comm: "a", Fault: event.Fault{Addr: 1}},
	}
	var e event.Event
	cm := &comms{}
	for i := range evs {
		if err := decode(record(t, &evs[i]), &e, cm, nil); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(e, evs[i]) {
			t.Fatalf("record %d decoded as %+v\nwant %+v", i, e, evs[i])
		}
	}
}

// comms names every key right, whether it is among the last few seen, only
// in the map, or the kernel's empty name.
func TestComms(t *testing.T) {
	names := []string{"redis-server", "redis-benchmark", "io_thd_1", "", "a", "exactly16bytes!!", "kworker/0:1"}
	var cm comms
	for i := range 200 {
		want := names[(i*i+i/3)%len(names)]
		var k [16]byte
		copy(k[:], want)
		if got := cm.get(k[:]); got != want {
			t.Fatalf("step %d: %q named %q", i, want, got)
		}
	}
}

// A fault-wait window: the fields at the offsets bpf/faultwait.h puts them,
// the places the kernel filled and no more.
func TestDecodeFaultWait(t *testing.T) {
	b := make([]byte, fwSize)
	b[0] = byte(event.KindFaultWait)
	le.PutUint32(b[8:], 10)
	le.PutUint32(b[12:], 11)
	le.PutUint64(b[16:], 5000)
	le.PutUint64(b[48:], 1000)
	le.PutUint64(b[56:], 3000)
	le.PutUint32(b[64:], 7)
	le.PutUint32(b[68:], 2)
	le.PutUint64(b[72:], 40)
	le.PutUint64(b[80:], 900)
	le.PutUint64(b[88:], 0x7f0000000000)
	le.PutUint64(b[96:], 0x7f0001000000)
	for i, v := range []struct {
		dur   uint64
		count uint32
		stack int32
		addr  uint64
	}{{2000, 5, 3, 0x7f0000001000}, {1000, 2, -1, 0}, {9, 9, 9, 9}} {
		s := b[104+fwSlotSize*i:]
		le.PutUint64(s, v.dur)
		le.PutUint32(s[8:], v.count)
		le.PutUint32(s[12:], uint32(v.stack))
		le.PutUint64(s[16:], v.addr)
	}
	var e event.Event
	stacks := func(id int32) []uint64 {
		if id == 3 {
			return []uint64{0xffffffff81000001}
		}
		return nil
	}
	if err := decode(b, &e, &comms{}, stacks); err != nil {
		t.Fatal(err)
	}
	w := e.FaultWait
	if e.PID != 10 || e.TID != 11 || e.Time != 5000 || w.Start != 1000 || w.Duration != 3000 || w.Count != 7 ||
		w.MajFaults != 40 || w.MinFaults != 900 || w.Lo != 0x7f0000000000 || w.Hi != 0x7f0001000000 {
		t.Fatalf("decoded %+v", e)
	}
	if len(w.Places) != 2 || w.Places[0].Duration != 2000 || w.Places[0].Count != 5 || w.Places[0].Addr != 0x7f0000001000 ||
		len(w.Places[0].Stack) != 1 || w.Places[1].Stack != nil || w.Places[1].Count != 2 {
		t.Errorf("places %+v", w.Places)
	}
}
