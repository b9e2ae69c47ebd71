package probe

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf/btf"

	"github.com/sysray/sysray/internal/event"
)

// decode reads records by hand at fixed offsets (decode.go). Every size and
// offset it relies on is checked here against the BTF of the committed BPF
// object, so a field added to bpf/sysray.h without the decoder following
// fails this test, not a live run.
func TestLayoutsMatchBTF(t *testing.T) {
	spec, err := loadSysray()
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int{
		"hdr": hdrSize, "sys_rec": sysSize, "fault_rec": faultSize, "vsys_rec": vsysSize,
		"sig_rec": sigSize, "fork_rec": forkSize, "exec_rec": execSize, "exit_rec": exitSize,
		"recent_rec": recentSize, "reclaim_rec": reclaimSize, "sleep": sleepSize, "sleeps": sleepsSize,
		"recent_call": 32, "blocked_rec": blockedRecSize, "fw_rec": fwSize, "fw_slot": fwSlotSize,
	}
	for name, want := range sizes {
		st := structOf(t, spec.Types, name)
		if st == nil {
			continue
		}
		if int(st.Size) != want {
			t.Errorf("sizeof(struct %s) = %d in the object, decode.go says %d", name, st.Size, want)
		}
	}
	// bpf2go's Go types of the same records agree (gen.go lists them).
	for name, got := range map[string]uintptr{
		"hdr": unsafe.Sizeof(sysrayHdr{}), "sys_rec": unsafe.Sizeof(sysraySysRec{}),
		"fault_rec": unsafe.Sizeof(sysrayFaultRec{}), "vsys_rec": unsafe.Sizeof(sysrayVsysRec{}),
		"sig_rec": unsafe.Sizeof(sysraySigRec{}), "fork_rec": unsafe.Sizeof(sysrayForkRec{}),
		"exec_rec": unsafe.Sizeof(sysrayExecRec{}), "exit_rec": unsafe.Sizeof(sysrayExitRec{}),
		"recent_rec": unsafe.Sizeof(sysrayRecentRec{}), "reclaim_rec": unsafe.Sizeof(sysrayReclaimRec{}),
		"sleeps": unsafe.Sizeof(sysraySleeps{}), "blocked_rec": unsafe.Sizeof(sysrayBlockedRec{}),
		"fw_rec": unsafe.Sizeof(sysrayFwRec{}),
	} {
		if int(got) != sizes[name] {
			t.Errorf("bpf2go's struct %s is %d bytes, decode.go says %d", name, got, sizes[name])
		}
	}
	// The offsets decode.go reads, by field path.
	offsets := []struct {
		path string
		off  int
	}{
		{"hdr.kind", 0}, {"hdr.flags", 1}, {"hdr.size", 2}, {"hdr.cpu", 4}, {"hdr.pid", 8}, {"hdr.tid", 12},
		{"hdr.ts", 16}, {"hdr.cgroup", 24}, {"hdr.comm", 32},
		{"sys_rec.latency", 48}, {"sys_rec.ret", 56}, {"sys_rec.args", 64}, {"sys_rec.nr", 112},
		{"sys_rec.dlen", 116}, {"sys_rec.darg", 120}, {"sys_rec.dtrunc", 122}, {"sys_rec.dset", 123},
		{"sys_rec.maps", 124}, {"sys_rec.queued", 128},
		{"sleeps.ustack", 0}, {"sleeps.n", 4}, {"sleeps.s", 8},
		{"sleep.dur", 0}, {"sleep.count", 8}, {"sleep.kstack", 12}, {"sleep.waker_pid", 16},
		{"sleep.waker_tid", 20}, {"sleep.waker_kstack", 24}, {"sleep.preempted", 28}, {"sleep.waker_comm", 32},
		{"fault_rec.addr", 48}, {"fault_rec.ip", 56}, {"fault_rec.error", 64}, {"fault_rec.sp", 72},
		{"vsys_rec.caller", 48}, {"vsys_rec.nr", 56},
		{"sig_rec.sig", 48}, {"sig_rec.code", 52}, {"sig_rec.sender", 56}, {"sig_rec.target_pid", 60},
		{"sig_rec.target_tid", 64}, {"sig_rec.result", 68}, {"sig_rec.addr", 72}, {"sig_rec.handler", 80},
		{"sig_rec.syscall", 88}, {"sig_rec.arch", 92},
		{"fork_rec.child_pid", 48}, {"fork_rec.child_tid", 52}, {"fork_rec.child_comm", 56},
		{"exec_rec.old_tid", 48}, {"exec_rec.flen", 52}, {"exec_rec.alen", 54}, {"exec_rec.filename", 56},
		{"exec_rec.argv", 56 + dataSlot}, {"exec_rec.cgroup", 56 + dataSlot + argvLen},
		{"exit_rec.code", 48},
		{"recent_rec.n", 48}, {"recent_rec.c", 56},
		{"recent_call.ts", 0}, {"recent_call.latency", 8}, {"recent_call.ret", 16}, {"recent_call.nr", 24},
		{"reclaim_rec.dur", 48}, {"reclaim_rec.pages", 56}, {"reclaim_rec.nr", 64}, {"reclaim_rec.kstack", 68},
		{"reclaim_rec.addr", 72}, {"reclaim_rec.what", 80}, {"reclaim_rec.order", 82}, {"reclaim_rec.status", 84},
		{"blocked_rec.pid", 0}, {"blocked_rec.tid", 4}, {"blocked_rec.nr", 8}, {"blocked_rec.nframes", 12},
		{"blocked_rec.comm", 16}, {"blocked_rec.ips", 32},
		// Not a record: the table's rows are trimmed to this outside the doctor (probe.go).
		{"fast_row.recent", fastRowLean},
	}
	for _, o := range offsets {
		name, field, _ := strings.Cut(o.path, ".")
		st := structOf(t, spec.Types, name)
		if st == nil {
			continue
		}
		found := false
		for _, m := range st.Members {
			if m.Name == field {
				found = true
				if got := int(m.Offset.Bytes()); got != o.off {
					t.Errorf("%s is at byte %d in the object, decode.go reads byte %d", o.path, got, o.off)
				}
			}
		}
		if !found {
			t.Errorf("%s: no such field in the object", o.path)
		}
	}
	// The enums: record kinds are event.Kind's numbering, header flags
	// decode.go's, capture kinds event.CaptureKind's.
	sameEnum(t, spec.Types, "kind", map[string]uint64{
		"K_SYSCALL": uint64(event.KindSyscall), "K_FAULT": uint64(event.KindPageFault),
		"K_VSYSCALL": uint64(event.KindVsyscall), "K_SIG_GEN": uint64(event.KindSignalGenerate),
		"K_SIG_DELIVER": uint64(event.KindSignalDeliver), "K_FORK": uint64(event.KindFork),
		"K_EXEC": uint64(event.KindExec), "K_EXIT": uint64(event.KindExit),
		"K_RECENT": uint64(event.KindRecent), "K_RECLAIM": uint64(event.KindReclaim),
		"K_FAULTWAIT": uint64(event.KindFaultWait),
		"K_RUNQ":      uint64(event.KindCPUWait),
	})
	sameEnum(t, spec.Types, "hdr_flag", map[string]uint64{
		"F_UNFINISHED": fUnfinished, "F_THREAD": fThread, "F_GROUP_DEAD": fGroupDead, "F_GROUP": fGroup,
		"F_SLEEPS": fSleeps, "F_APPROX": fApprox, "F_REFUSED": fRefused,
	})
	sameEnum(t, spec.Types, "cap_kind", map[string]uint64{
		"CAP_PATH": uint64(event.CapPath), "CAP_SOCKADDR": uint64(event.CapSockaddr),
		"CAP_SOCKADDR_OUT": uint64(event.CapSockaddrOut), "CAP_DNS": uint64(event.CapDNS), "CAP_DNS_MMSG": uint64(event.CapDNSMmsg), "CAP_DNS_IOV": uint64(event.CapDNSIov), "CAP_DNS_ANS": uint64(event.CapDNSAns),
	})
}

// sameEnum checks the object's enum name against the values Go uses.
func sameEnum(t *testing.T, types *btf.Spec, name string, want map[string]uint64) {
	t.Helper()
	var e *btf.Enum
	if err := types.TypeByName(name, &e); err != nil {
		t.Errorf("enum %s: %v", name, err)
		return
	}
	seen := map[string]bool{}
	for _, v := range e.Values {
		w, ok := want[v.Name]
		switch {
		case !ok:
			t.Errorf("enum %s has %s = %d, which Go does not know", name, v.Name, v.Value)
		case w != v.Value:
			t.Errorf("%s = %d in the object, Go says %d", v.Name, v.Value, w)
		}
		seen[v.Name] = true
	}
	for n := range want {
		if !seen[n] {
			t.Errorf("%s is gone from the object's enum %s", n, name)
		}
	}
}

func structOf(t *testing.T, types *btf.Spec, name string) *btf.Struct {
	t.Helper()
	var st *btf.Struct
	if err := types.TypeByName(name, &st); err != nil {
		t.Errorf("struct %s is not in the object's BTF: %v", name, err)
		return nil
	}
	return st
}
