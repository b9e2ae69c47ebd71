package profile

import (
	"strings"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/probe"
)

func TestFrame(t *testing.T) {
	if got := Frame("main.loop", 0x401000); got != "main.loop" {
		t.Errorf("named: %q", got)
	}
	if got := Frame("", 0x401000); got != "0x401000" {
		t.Errorf("unnamed: %q", got)
	}
}

func TestFromSamples(t *testing.T) {
	arch := event.HostArch()
	write, _ := event.SyscallByName(arch, "write")
	user := map[uint64]string{0x10: "main", 0x20: "work"}
	kernel := map[uint64]string{0xa0: "ksys_write", 0xb0: "vfs_write"}
	samples := []probe.Sample{
		// Innermost first, as the kernel gives them.
		{PID: 7, Comm: "app", Count: 5, Syscall: int32(write), User: []uint64{0x30, 0x20, 0x10}, Kernel: []uint64{0xb0, 0xa0}},
		{PID: 8, Comm: "spin", Count: 2, Syscall: -1, User: []uint64{0x10}},
	}
	got := FromSamples(samples, arch,
		func(pid uint32, a uint64) string {
			if pid != 7 && pid != 8 {
				t.Errorf("user frame asked for pid %d", pid)
			}
			return user[a]
		},
		func(a uint64) string { return kernel[a] })
	if len(got) != 2 {
		t.Fatalf("%d stacks", len(got))
	}
	s := got[0]
	if s.PID != 7 || s.Comm != "app" || s.Count != 5 || s.Syscall != "write" ||
		strings.Join(s.User, ";") != "main;work;0x30" || strings.Join(s.Kernel, ";") != "ksys_write;vfs_write" {
		t.Errorf("first stack %+v", s)
	}
	if s := got[1]; s.Syscall != "" || strings.Join(s.User, ";") != "main" || len(s.Kernel) != 0 {
		t.Errorf("a sample in user space %+v", s)
	}
	// Without the kernel's symbols, its frames are addresses.
	got = FromSamples(samples[:1], arch, func(uint32, uint64) string { return "" }, nil)
	if k := strings.Join(got[0].Kernel, ";"); k != "0xa0;0xb0" {
		t.Errorf("kernel frames without symbols: %q", k)
	}
}

func slept(pid uint32, d time.Duration, user []event.Frame, kernel ...event.Frame) *event.Event {
	return &event.Event{Kind: event.KindSyscall, PID: pid, Comm: "db", Syscall: event.Syscall{
		UserStack: user, Sleeps: []event.Sleep{{Duration: uint64(d), Stack: kernel}}}}
}

func TestOffCPU(t *testing.T) {
	user := []event.Frame{{Name: "read_page", Addr: 0x2}, {Name: "", Addr: 0x1}} // innermost first
	sched := []event.Frame{{Name: "schedule", Addr: 0xa}, {Name: "io_schedule", Addr: 0xb}}
	o := NewOffCPU(100) // a sample is 10 ms
	o.Add(slept(9, 35*time.Millisecond, user, sched...))
	o.Add(slept(9, 20*time.Millisecond, user, sched...)) // the same stack: folded
	o.Add(slept(9, 9*time.Millisecond, user, sched...))  // under a sample: not counted
	o.Add(slept(9, 10*time.Millisecond, user, event.Frame{Name: "futex_wait", Addr: 0xc}))
	o.Add(slept(10, 10*time.Millisecond, user, sched...)) // another process
	o.Add(&event.Event{Kind: event.KindPageFault, PID: 9})
	got := o.Stacks()
	if len(got) != 3 {
		t.Fatalf("%d stacks: %+v", len(got), got)
	}
	first := got[0]
	if first.PID != 9 || first.Comm != "db" || first.Syscall != "off-cpu" || first.Count != 5 ||
		strings.Join(first.User, ";") != "0x1;read_page;[off-cpu]" || strings.Join(first.Kernel, ";") != "io_schedule;schedule" {
		t.Errorf("first stack %+v, want 3+2 samples of io_schedule;schedule", first)
	}
	if got[1].Count != 1 || got[1].Kernel[0] != "futex_wait" || got[2].PID != 10 || got[2].Count != 1 {
		t.Errorf("other stacks %+v %+v", got[1], got[2])
	}
}
