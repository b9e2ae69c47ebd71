package probe

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// The sys record layout comes from the BPF object's BTF (bpf2go generates
// sysraySysBig); decode must agree with it field by field.
func TestDecodeSyscallMatchesBTFLayout(t *testing.T) {
	var big sysraySysBig
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
	for i := range len(path) {
		big.Data[i] = int8(path[i])
	}
	r.Dlen[0] = uint16(len(path))
	r.Darg[0] = 1
	r.Dset = 1
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, &big); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()[:sysSize+len(path)]
	le.PutUint16(b[2:], uint16(len(b)))

	var e event.Event
	if err := decode(b, &e, &comms{}); err != nil {
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

func TestDecodeRejectsShortAndUnknown(t *testing.T) {
	var e event.Event
	cm := &comms{}
	if err := decode(make([]byte, 10), &e, cm); err == nil {
		t.Error("a 10-byte record decoded")
	}
	rec := make([]byte, hdrSize)
	rec[0] = 99
	if err := decode(rec, &e, cm); err == nil {
		t.Error("an unknown kind decoded")
	}
	rec = make([]byte, faultSize-1)
	rec[0] = byte(event.KindPageFault)
	if err := decode(rec, &e, cm); err == nil {
		t.Error("a short fault record decoded")
	}
	// A captured argument that claims more bytes than the record holds.
	rec = make([]byte, sysSize)
	rec[0] = byte(event.KindSyscall)
	le.PutUint16(rec[116:], 300)
	rec[123] = 1
	if err := decode(rec, &e, cm); err == nil {
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
