package probe

import (
	"encoding/binary"
	"testing"
	"unsafe"
)

func TestBlockedRecordSize(t *testing.T) {
	if n := int(unsafe.Sizeof(sysrayBlockedRec{})); n != blockedRecSize {
		t.Fatalf("struct blocked_rec is %d bytes, decodeBlocked reads %d", n, blockedRecSize)
	}
}

func TestDecodeBlocked(t *testing.T) {
	rec := func(pid, tid uint32, nr int32, comm string, ips ...uint64) []byte {
		b := make([]byte, blockedRecSize)
		binary.LittleEndian.PutUint32(b[0:], pid)
		binary.LittleEndian.PutUint32(b[4:], tid)
		binary.LittleEndian.PutUint32(b[8:], uint32(nr))
		binary.LittleEndian.PutUint32(b[12:], uint32(len(ips)))
		copy(b[16:32], comm)
		for i, a := range ips {
			binary.LittleEndian.PutUint64(b[32+8*i:], a)
		}
		return b
	}
	b := append(rec(10, 11, 257, "sysray", 0xffffffff81000010, 0xffffffff81000020),
		rec(2, 2, -1, "kworker/0:1", 0xffffffff81000030)...)
	b = append(b, 1, 2, 3) // a partial record is not one
	got := decodeBlocked(b)
	if len(got) != 2 {
		t.Fatalf("%d tasks, want 2: %+v", len(got), got)
	}
	if g := got[0]; g.PID != 10 || g.TID != 11 || g.Syscall != 257 || g.Comm != "sysray" || len(g.Kernel) != 2 || g.Kernel[1] != 0xffffffff81000020 {
		t.Errorf("first %+v", g)
	}
	if g := got[1]; g.Syscall != -1 || g.Comm != "kworker/0:1" || len(g.Kernel) != 1 {
		t.Errorf("second %+v", g)
	}
}
