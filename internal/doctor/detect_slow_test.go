package doctor

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// A call's time waiting for a CPU is the host's load: a 300 ms execve of
// which 250 ms were spent runnable is not a 300 ms stall of the kernel.
func TestSlowWarnsWithoutTheCPUQueue(t *testing.T) {
	const nrExecve = 59
	queued := sys(70, 100, nrExecve, 0, 300_000_000)
	queued.Syscall.Sleeps = []event.Sleep{{Duration: 250_000_000, Preempted: true,
		Stack: frames("__schedule+0x618", "preempt_schedule_irq+0x3b", "load_elf_binary+0x2a")}}
	f := byID(findings([]event.Event{queued}), "slow-syscall")
	if f == nil || f.Severity != Info {
		t.Fatalf("mostly queued: want an info slow-syscall, got %+v", f)
	}
	locked := sys(70, 100, nrExecve, 0, 300_000_000)
	locked.Syscall.Sleeps = []event.Sleep{{Duration: 250_000_000,
		Stack: frames("__schedule+0x618", "schedule+0x23", "rwsem_down_write_slowpath+0x1e0", "down_write+0x30", "begin_new_exec+0x2a")}}
	f = byID(findings([]event.Event{locked}), "slow-syscall")
	if f == nil || f.Severity != Warning {
		t.Fatalf("asleep on a lock: want a warning slow-syscall, got %+v", f)
	}
}

// The sleep slots keep a call's four longest places; its wait for a CPU
// elsewhere is in the kernel's count (Queued). A 300 ms execve preempted
// 40 ms at a time in five places keeps four of them (160 ms), its
// Queued says 250 ms: it stalled 50 ms, not 140.
func TestSlowQueuedBeyondTheSlots(t *testing.T) {
	const nrExecve = 59
	e := sys(70, 100, nrExecve, 0, 300_000_000)
	for i := range 4 {
		e.Syscall.Sleeps = append(e.Syscall.Sleeps, event.Sleep{Duration: 40_000_000, Preempted: true,
			Stack: frames("__schedule+0x618", "preempt_schedule_irq+0x3b", "load_elf_binary+0x"+string(rune('a'+i)))})
	}
	e.Syscall.Queued = 250_000_000
	f := byID(findings([]event.Event{e}), "slow-syscall")
	if f == nil || f.Severity != Info {
		t.Fatalf("mostly queued, beyond the slots: want an info slow-syscall, got %+v", f)
	}
	if !strings.Contains(f.Summary, "250.00ms went to waiting for a CPU") {
		t.Errorf("summary does not give the kernel's count of the wait: %s", f.Summary)
	}
}

// Five opens of a FIFO, each asleep about 30 ms for its writer, traced
// live with --slow 50ms: the probe carries sleeps only from 50 ms, so the
// opens come without any, and nothing says they ran. They are under the
// bar: no slow-syscall finding, and above all none "running in the
// kernel". At the default bar the same opens would have carried their
// sleeps.
func TestSlowBarFollowsSlowFlag(t *testing.T) {
	var evs []event.Event
	for i := range 5 {
		evs = append(evs, sys(uint32(80+i), uint64(i+1)*100_000_000, nrOpenat, 3, 30_000_000+uint64(i)*1_000_000))
	}
	live := host
	live.Live, live.Slow = true, 50_000_000
	d := New(live, nil)
	for i := range evs {
		d.Observe(&evs[i])
	}
	rep := checked(d.Report())
	if f := byID(rep.Findings, SlowSyscall); f != nil {
		t.Fatalf("--slow 50ms, opens of 30 ms without sleeps: want no slow-syscall, got %q", f.Title)
	}
	n := nearByID(rep, SlowSyscall)
	if n == nil || !strings.Contains(n.Short, "from 50.00ms") {
		t.Errorf("the near miss does not give --slow's bar: %+v", n)
	}
	// The capture's header says the same (stacks_slow): checkup.Capture sets
	// Host.Slow from it, as golden.json shows for testdata/golden/fifo-slow50.sysray.
}

// cp -r of a gigabyte of libraries: copy_file_range calls of 25-130 MB
// took 200 ms to a second each, on the CPU, at 70-160 MB/s under a loaded
// host. That is the copy the program asked for, not a stall: info. A
// copy_file_range that moved 4 KiB in the same 650 ms, or a 300 ms read
// of 64 bytes, did something besides the work asked: a warning.
func TestSlowBulkWorkIsNotAStall(t *testing.T) {
	const nrCopyFileRange, nrRead = 326, 0
	bulk := sys(70, 100, nrCopyFileRange, 117_308_864, 646_000_000)
	bulk.Syscall.Sleeps = []event.Sleep{{Duration: 1_000_000, Preempted: true,
		Stack: frames("__schedule+0x618", "__cond_resched+0x30", "filemap_get_pages+0x9a")}}
	f := byID(findings([]event.Event{bulk}), "slow-syscall")
	if f == nil || f.Severity != Info {
		t.Fatalf("a 112 MiB copy in 646 ms: want an info slow-syscall, got %+v", f)
	}
	if f.Evidence["bulk_calls"] != uint64(1) {
		t.Errorf("bulk_calls = %v, want 1", f.Evidence["bulk_calls"])
	}
	for _, e := range []event.Event{sys(70, 100, nrCopyFileRange, 4096, 646_000_000), sys(70, 100, nrRead, 64, 300_000_000)} {
		e.Syscall.Sleeps = bulk.Syscall.Sleeps
		f := byID(findings([]event.Event{e}), "slow-syscall")
		if f == nil || f.Severity != Warning {
			t.Errorf("%d bytes in %d ms: want a warning slow-syscall, got %+v", e.Syscall.Ret, e.Syscall.Latency/1e6, f)
		}
	}
}

// A getdents64 that never switched out took 100 ms in a guest whose
// hypervisor took its CPU for 70 of them (the benign corpus's go test saw
// this on a loaded VM): 30 ms of its own is not a stall. The same call
// with nothing stolen, or on the other CPU, still warns.
func TestSlowStealIsNotTheCallsTime(t *testing.T) {
	const nrGetdents64 = 217
	run := func(cpu uint32, steal []uint64) *Finding {
		d := New(Host{Arch: event.ArchAMD64, Live: true}, nil)
		log := NewStealLog()
		log.Add(1_000_000_000, []uint64{0, 0})
		log.Add(1_050_000_000, []uint64{0, 0})
		log.Add(1_100_000_000, steal)
		log.Add(1_200_000_000, steal)
		d.Steal(log)
		e := sys(70, 1_000_000_000, nrGetdents64, 112, 100_000_000)
		e.CPU = cpu
		d.Observe(&e)
		return byID(checked(d.Report()).Findings, "slow-syscall")
	}
	if f := run(1, []uint64{0, 95_000_000}); f != nil {
		t.Errorf("95 of 100 ms stolen: 5 ms of its own is not slow, got %+v", f)
	}
	f := run(1, []uint64{0, 70_000_000})
	if f == nil || f.Severity != Info {
		t.Fatalf("70 of 100 ms stolen: want an info slow-syscall, got %+v", f)
	}
	if got := f.Evidence["stolen_ns"]; got != uint64(70_000_000) {
		t.Errorf("stolen_ns = %v, want 70000000", got)
	}
	if !strings.Contains(f.Title, "steal") || !strings.Contains(f.Summary, "70.00ms the hypervisor gave") {
		t.Errorf("the text does not say the time was stolen: %s / %s", f.Title, f.Summary)
	}
	for _, c := range []struct {
		cpu   uint32
		steal []uint64
	}{{1, []uint64{0, 0}}, {0, []uint64{0, 70_000_000}}} {
		f := run(c.cpu, c.steal)
		if f == nil || f.Severity != Warning {
			t.Errorf("cpu %d, steal %v: want a warning slow-syscall, got %+v", c.cpu, c.steal, f)
		}
	}
}

// The log interpolates between reads and keeps a run of unchanged reads
// as its two ends.
func TestStealLogDuring(t *testing.T) {
	l := NewStealLog()
	for i := range uint64(10) {
		l.Add(i*100, []uint64{0})
	}
	l.Add(1000, []uint64{50})
	l.Add(1100, []uint64{50})
	if n := len(l.at); n != 4 {
		t.Errorf("%d reads kept, want 4 (two ends of the flat run, the step, its end)", n)
	}
	for _, c := range []struct{ from, to, want uint64 }{
		{0, 900, 0}, {900, 1000, 50}, {950, 1000, 25}, {900, 950, 25}, {0, 2000, 50}, {1000, 1100, 0}, {950, 960, 5}, {2000, 3000, 0},
	} {
		if got := l.During(0, c.from, c.to); got != c.want {
			t.Errorf("During(%d, %d) = %d, want %d", c.from, c.to, got, c.want)
		}
	}
	if got := l.During(3, 0, 2000); got != 0 {
		t.Errorf("a CPU the log does not have: %d stolen", got)
	}
	var none *StealLog
	if got := none.During(0, 0, 10); got != 0 {
		t.Errorf("no log: %d stolen", got)
	}
}

// A call is slow for its own time: a clone of 18 ms of which 13 were spent
// runnable without a CPU is the host's load (cpu-wait's), not a slow call;
// with 5 of them queued it is one.
func TestSlowBarIsTheCallsOwnTime(t *testing.T) {
	for _, c := range []struct {
		queued uint64
		want   bool
	}{{13_000_000, false}, {5_000_000, true}} {
		e := sys(70, 100, nrClone, 71, 18_000_000)
		e.Syscall.Sleeps = []event.Sleep{{Duration: c.queued, Preempted: true,
			Stack: frames("__schedule+0x618", "preempt_schedule_irq+0x3b", "copy_process+0x2a")}}
		if f := byID(findings([]event.Event{e}), "slow-syscall"); (f != nil) != c.want {
			t.Errorf("18 ms clone, %d ns queued: slow-syscall %+v, want one: %v", c.queued, f, c.want)
		}
	}
}

// Trim keeps the last read before the cut, so a call that began before it
// is still read whole.
func TestStealLogTrim(t *testing.T) {
	l := NewStealLog()
	for i := range uint64(10) {
		l.Add(i*100, []uint64{i * 10})
	}
	l.Trim(450)
	if len(l.at) != 6 || l.at[0] != 400 {
		t.Fatalf("kept %v, want 400 to 900", l.at)
	}
	if got := l.During(0, 420, 900); got != 48 {
		t.Errorf("During(420, 900) = %d, want 48", got)
	}
	l.Trim(0)
	l.Trim(10_000)
	if len(l.at) != 1 || l.at[0] != 900 {
		t.Errorf("after a cut past the end, kept %v, want the last read", l.at)
	}
}

// A write to vm.nr_hugepages that compacted memory for most of its 180 ms
// ran on the CPU, with no sleep to show why: its passes, in events of
// their own before its exit, make it compaction-stall's. Passes that are
// less than half the call, or that began before it (an earlier call's,
// which may not have crossed over), leave it slow-syscall's.
func TestSlowLeavesCompactionStalls(t *testing.T) {
	const ms = 1_000_000
	// Its one sleep: migration waiting for a page's lock.
	call := func(start uint64) event.Event {
		e := sys(7, start+180*ms, nrWrite, 2, 180*ms)
		e.Syscall.Sleeps = []event.Sleep{{Duration: 5 * ms,
			Stack: frames("__schedule+0x618", "schedule+0x23", "io_schedule+0x12", "folio_wait_bit_common+0x13d", "migrate_pages_batch+0x6b2")}}
		return e
	}
	pass := func(end, dur uint64) event.Event {
		return event.Event{Kind: event.KindReclaim, Time: end, PID: 7, TID: 7, Comm: "writer",
			Reclaim: event.Reclaim{Duration: dur, Nr: nrWrite, What: event.ReclaimCompact, Order: 9}}
	}
	other := pass(1e9+170*ms, 150*ms)
	other.TID = 8
	for _, c := range []struct {
		name string
		evs  []event.Event
		slow bool
	}{
		{"compacted", []event.Event{pass(1e9+60*ms, 50*ms), pass(1e9+170*ms, 100*ms), call(1e9)}, false},
		{"compacted, after a call that did not cross over", []event.Event{pass(1e9-10*ms, 2*ms), pass(1e9+170*ms, 150*ms), call(1e9)}, false},
		{"no passes", []event.Event{call(1e9)}, true},
		{"a third compacting", []event.Event{pass(1e9+70*ms, 60*ms), call(1e9)}, true},
		{"an earlier call's", []event.Event{pass(1e9-10*ms, 150*ms), call(1e9)}, true},
		{"taken by the call before", []event.Event{pass(1e9-10*ms, 150*ms), sys(7, 1e9-5*ms, nrWrite, 2, 160*ms), call(1e9)}, true},
		{"another thread's", []event.Event{other, call(1e9)}, true},
	} {
		fs := findings(c.evs)
		if got := byID(fs, "slow-syscall") != nil; got != c.slow {
			t.Errorf("%s: slow-syscall %v, want %v: %+v", c.name, got, c.slow, fs)
		}
	}
}
