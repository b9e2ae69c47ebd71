package probe

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/sysray/sysray/internal/event"
)

// Config is what to trace. The zero value traces every process on the host
// (except sysray itself).
type Config struct {
	PIDs       []uint32 // trace only these processes (thread groups)
	Children   bool     // also trace processes that PIDs fork from now on
	Cgroups    []uint64 // trace only these cgroup v2 ids
	Syscalls   []uint32 // trace only these syscall numbers; nil means all
	MinLatency uint64   // drop syscalls faster than this many ns
	AllFaults  bool     // every user page fault, not only the ones that matter
	Stacks     bool     // follow where syscalls sleep (sched_switch, sched_waking)
	// FastRows sizes the whole-host fast path's table (a power of two, at
	// least 2); 0 sizes it from the host's thread count.
	FastRows uint32
	// RunQueue follows time threads spend runnable without a CPU
	// (sched_wakeup, sched_wakeup_new, sched_switch): KindCPUWait events.
	RunQueue bool
	// LeanStacks, with Stacks, keeps only what the doctor reads: where
	// calls slept (kernel stacks) and who woke them (pid, tid, name), not
	// the waker's stack or the call's user stack. The waker's stack was
	// most of the cost of following sleeps (bench/HISTORY.md).
	LeanStacks bool
	// WaitCalls, with LeanStacks, are syscalls that wait by design (poll,
	// epoll_wait, nanosleep...): an interruptible sleep of theirs shorter
	// than DeferNS carries no stack, which is taken, for the longer ones,
	// as the call wakes rather than at every switch-out (without the
	// scheduler's own frames, __sched, which the kernel leaves out of a
	// sleeping task's stack: schedule_timeout, do_nanosleep, the lock slow
	// paths). An uninterruptible sleep is not the wait asked for (an audit
	// backlog's, a lock's) and keeps its stack.
	WaitCalls []uint32
	DeferNS   uint64 // 0 means a sixteenth of Slow
	Slow      uint64 // with Stacks: syscalls at least this slow carry their sleeps; 0 means 10 ms
	Stat      bool   // count syscalls in the kernel (Stats) instead of emitting them
	// Sample, with Stat, still emits failed calls, the call after a failure,
	// calls slower than Slow, and one in Sample others (a power of two).
	Sample uint32
	// SampleGap, with Sample, keeps a thread's sampled calls at least this
	// many ns apart.
	SampleGap uint64
	// Firsts, with Sample, also emits a process's first calls of each
	// syscall on each CPU (the 1st, 2nd, 4th ... 64th), so a syscall it
	// makes a few times shows how its latency moves.
	Firsts bool
	// TickNS is the kernel's jiffy in ns, when known: under Budget it
	// bounds the latency of a long call the clock did not time.
	TickNS uint64
	// Budget, with Stat, is budgeted timing: the clock times every call of
	// a syscall while its thread has made fewer than Budget of them in the
	// current jiffy, then a random 1 in Every (a power of two, 2 to
	// 65536); the histogram weighs each by what it stands for
	// (Cell.Timed). With Sample, sampled calls and records cross over only
	// from timed calls (and long ones), and failures that were not timed
	// cross with an estimated latency (Syscall.Approx). 0 times every
	// call.
	Budget uint32
	Every  uint32
	// Launch marks the probe as following a command sysray will start:
	// pids may be added later with Expect or StartChild.
	Launch   bool
	RingSize int // bytes per CPU ring; 0 picks one from the CPU count
	// SlowOpens says opening a file may take long on this host (its audit
	// backlog is full: every audited open waits, and waits queue up). The
	// kernel's types are then read through the bpf syscall rather than
	// from /sys/kernel/btf, and the caller reads fewer files.
	SlowOpens bool
	// Poll is how long a reader sleeps on an idle ring (0: 5 ms). Longer
	// costs less CPU when little happens and delays events by as much: a
	// long-lived agent that names no user frames can wait.
	Poll time.Duration
	// Futex, with Stacks, sums every futex wait and wake in the kernel by
	// thread and address (bpf/futex.h) and hands the sums to Run's reader
	// as futex events every 250 ms: the waits of a contended lock are
	// microseconds long, under any slow bar.
	Futex bool
	// FaultWait, with Stacks, follows sleeps outside syscalls (page
	// faults) into event.FaultWait windows (bpf/faultwait.h).
	FaultWait bool
	// Compaction follows global direct reclaim and direct compaction in
	// the page allocator (bpf/reclaim.h) into event.Reclaim events: time a
	// thread spends on the CPU inside a page fault or a syscall, which
	// sleep stacks do not show.
	Compaction bool
	// After loads the probe to take over from a probe still attached: its
	// programs attach at once but take no call or event until Take, and
	// from Take on After takes none, while it still finishes the calls it
	// saw enter (bpf/state.h, owner). A reload then loses only calls in
	// flight across it that outlast After's detach, and counts none twice.
	After *Probe
}

// futexOn: the futex sums need the sleep tracking for the time asleep.
func (c *Config) futexOn() bool { return c.Futex && c.Stacks }

// SlowNS is the threshold in effect: calls at least this slow carry their
// sleeps (with Stacks).
func (c *Config) SlowNS() uint64 {
	if c.Slow == 0 {
		return event.DefaultSlow
	}
	return c.Slow
}

// Probe is the loaded and attached set of BPF programs.
type Probe struct {
	objs     sysrayObjects
	links    []link.Link
	rings    []*ebpf.Map
	arch     event.Arch
	stacksOn bool
	runqOn   bool
	// compactOn attaches direct reclaim's and compaction's tracepoints.
	compactOn bool
	budget    bool // budgeted timing: threads keep counts pending (Stats)
	fast      bool // the fast path (bpf/fast.h); in stat its rows keep counts pending too
	poll      time.Duration
	futex     bool // Config.Futex: Run reads the futex sums
	fwOn      bool // fault waits followed (faultwait.go)

	progs map[string]*ebpf.Program // every program, by its name in bpf/ (load)

	linkMu sync.Mutex
	// duty are the places in links of the programs PauseSyscalls
	// detaches, which hold nil there while they are off.
	duty map[string]int
	// quiet says the per-syscall programs are paused, and resumed is
	// closed (and replaced) when they attach again: the readers sleep
	// their whole poll on a quiet ring, and the resume ends that sleep
	// (readRing).
	quiet    atomic.Bool
	resumed  atomic.Pointer[chan struct{}]
	gen      uint64    // attach_gen in the kernel: serial<<32, plus one for each attach
	serial   uint64    // one more than After's: no two probes' gens are alike
	owner    *ebpf.Map // bpf/state.h's .data.owner, shared with the probes that take over (Config.After)
	Warnings []string  // features that could not be enabled; the rest works

	// Stats reads the count table in batches into these, kept from read
	// to read: a reader every few seconds (the agent) would otherwise
	// allocate each cell's per-CPU values anew each time.
	statMu    sync.Mutex
	statKeys  []sysrayStatKey
	statVals  []sysrayStatVal
	pcKeys    []uint32 // ProcCounts' batches, kept as statKeys are
	pcVals    []sysrayPcount
	lastCells int
}

// Feature names the tracepoints so a missing one can be reported by what it gives.
var features = []struct {
	prog   string
	what   string
	stacks bool // only with Config.Stacks
}{
	{"sys_enter", "syscalls", false},
	{"sys_exit", "syscalls", false},
	// Threads cache their ids and name until one of these (or an exec)
	// says they may have changed.
	{"cgroup_attach_task", "syscalls", false},
	{"cgroup_transfer_tasks", "syscalls", false},
	{"task_rename", "syscalls", false},
	{"page_fault_user", "page faults", false},
	{"emulate_vsyscall", "vsyscall emulation", false},
	{"signal_generate", "signals", false},
	{"signal_deliver", "signals", false},
	{"sched_process_fork", "fork", false},
	{"sched_process_exec", "exec", false},
	{"sched_process_exit", "exit", false},
	{"memcg_reclaim_begin", "memory-cgroup reclaim", false},
	{"memcg_reclaim_end", "memory-cgroup reclaim", false},
	{"sched_switch", "sleep stacks", true},
	{"sched_waking", "wakers of sleeping syscalls", true},
}

// CheckPrivileges returns a one-line error when the process cannot load BPF.
func CheckPrivileges() error {
	var hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("reading capabilities: %w", err)
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	if has(unix.CAP_SYS_ADMIN) || (has(unix.CAP_BPF) && has(unix.CAP_PERFMON)) {
		return nil
	}
	return errors.New("sysray needs root, or CAP_BPF and CAP_PERFMON (try sudo)")
}

// CheckBTF reports whether the kernel describes itself with BTF, which CO-RE needs.
func CheckBTF() error {
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return errors.New("this kernel has no BTF (/sys/kernel/btf/vmlinux is missing); sysray needs CONFIG_DEBUG_INFO_BTF=y")
	}
	return nil
}

// Open loads and attaches the probe. Tracing starts at once; call Run to
// read events and Close to detach.
func Open(cfg Config) (*Probe, error) {
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	if err := CheckBTF(); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raising the memlock limit: %w", err)
	}
	spec, err := loadSysray()
	if err != nil {
		return nil, fmt.Errorf("reading the BPF object: %w", err)
	}
	arch := event.HostArch()
	// The generated specs name every map and variable the loader touches:
	// a name the object lacks fails here, at once, not as a nil map later.
	var specs sysraySpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, fmt.Errorf("BPF object: %w", err)
	}
	if err := configure(&specs.sysrayVariableSpecs, cfg, arch); err != nil {
		return nil, err
	}

	ncpu, err := possibleCPUs()
	if err != nil {
		return nil, err
	}
	specs.Rings.MaxEntries = uint32(ncpu)
	specs.Stages.MaxEntries = uint32(ncpu)
	rows := uint32(1)
	if cfg.fastPath() {
		rows = cfg.FastRows
		if rows == 0 {
			rows = fastRows(cfg.SlowOpens)
		}
	}
	specs.FastRows.MaxEntries = rows
	if !cfg.fastDoctor() {
		// The rows' recent calls are the doctor's alone (bpf/state.h):
		// the other modes' programs never reach them, and their table
		// is a third smaller without. The kernel holds a map's value to
		// the size of its BTF type, so the trimmed table has none.
		specs.FastRows.ValueSize = fastRowLean
		specs.FastRows.Key, specs.FastRows.Value = nil, nil
	}
	if err := specs.CfgFastShift.Set(uint32(32 - bits.TrailingZeros32(rows))); err != nil {
		return nil, err
	}
	specs.Spill.MaxEntries = spillCells(cfg.Stat, ncpu)
	if !cfg.Stacks {
		specs.Stacks.MaxEntries = 1 // unused; do not pin memory for it
		specs.StackIds.MaxEntries = 1
	}
	if !cfg.futexOn() {
		specs.Futexes.MaxEntries = 1 // an LRU map is preallocated
	}
	size := cfg.RingSize
	if size == 0 {
		// A ring must absorb the reader's pauses at millions of events a
		// second; 64 MiB in all covers ~50 ms on this design's 2-CPU hosts
		// without pinning gigabytes on large ones.
		size = min(max((64<<20)/ncpu, 8<<20), 64<<20)
	}
	size = roundRing(size)
	specs.Rings.InnerMap.MaxEntries = uint32(size)
	if err := specs.CfgWakeupBytes.Set(uint64(size / 8)); err != nil {
		return nil, err
	}

	p := &Probe{arch: arch, stacksOn: cfg.Stacks, runqOn: cfg.RunQueue, compactOn: cfg.Compaction, budget: cfg.Stat && cfg.Budget > 0, fast: cfg.fastPath(), poll: cfg.Poll,
		futex: cfg.futexOn()}
	resumed := make(chan struct{})
	p.resumed.Store(&resumed)
	var opts ebpf.CollectionOptions
	if cfg.After != nil {
		// Taking over: the owner is After's serial until Take, so After
		// owns the calls.
		p.serial = cfg.After.serial + 1
		opts.MapReplacements = map[string]*ebpf.Map{".data.owner": cfg.After.owner}
	}
	p.gen = p.serial<<32 | 1
	if err := specs.AttachGen.Set(p.gen); err != nil {
		return nil, err
	}
	if cfg.SlowOpens {
		// CO-RE then needs no listing of /sys/kernel/btf for modules
		// (attach targets still read /sys/kernel/btf/vmlinux once).
		if types, err := kernelTypes(); err == nil {
			opts.Programs.KernelTypes = types
		}
	}
	if p.progs, p.owner, err = load(spec, opts, &p.objs); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			// err names the program ("program flush_pending: ..."); the
			// verifier's log, whole, is ve's: both, once each.
			which := strings.TrimSuffix(strings.TrimSuffix(err.Error(), ve.Error()), ": ")
			return nil, fmt.Errorf("the kernel rejected sysray's BPF program (%s): %+v", which, ve)
		}
		return nil, fmt.Errorf("loading BPF: %w", err)
	}
	for i := 0; i < ncpu; i++ {
		m, err := ebpf.NewMap(specs.Rings.InnerMap)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("creating ring buffer for CPU %d: %w", i, err)
		}
		p.rings = append(p.rings, m)
		if err := p.objs.Rings.Put(uint32(i), m); err != nil {
			p.Close()
			return nil, fmt.Errorf("installing ring buffer for CPU %d: %w", i, err)
		}
	}
	for _, pid := range cfg.PIDs {
		v := uint8(selActive)
		if cfg.Children {
			v |= selFollow
		}
		if err := p.objs.Pids.Put(pid, v); err != nil {
			p.Close()
			return nil, fmt.Errorf("selecting pid %d: %w", pid, err)
		}
	}
	for _, cg := range cfg.Cgroups {
		if err := p.objs.Cgroups.Put(cg, uint8(1)); err != nil {
			p.Close()
			return nil, fmt.Errorf("selecting cgroup %d: %w", cg, err)
		}
	}
	if err := p.attach(); err != nil {
		p.Close()
		return nil, err
	}
	if cfg.FaultWait && cfg.Stacks {
		p.attachFaultWait()
	}
	return p, nil
}

const (
	selActive  = 1
	selFollow  = 2
	selPending = 4
)

// Expect selects pid from its next execve on, with its descendants. The
// launcher calls it between fork and exec so nothing of sysray's own start-up
// is traced, yet the execve is.
func (p *Probe) Expect(pid uint32) error {
	return p.objs.Pids.Put(pid, uint8(selPending|selFollow))
}

// Arch is the syscall table of the traced kernel.
func (p *Probe) Arch() event.Arch { return p.arch }

func (p *Probe) attach() error {
	progs := map[string]*ebpf.Program{
		"sys_enter":             p.objs.SysEnter,
		"sys_exit":              p.objs.SysExit,
		"page_fault_user":       p.objs.PageFaultUser,
		"emulate_vsyscall":      p.objs.EmulateVsyscall,
		"signal_generate":       p.objs.SignalGenerate,
		"signal_deliver":        p.objs.SignalDeliver,
		"sched_process_fork":    p.objs.SchedProcessFork,
		"sched_process_exec":    p.objs.SchedProcessExec,
		"sched_process_exit":    p.objs.SchedProcessExit,
		"sched_switch":          p.objs.SchedSwitch,
		"sched_waking":          p.objs.SchedWaking,
		"cgroup_attach_task":    p.objs.CgroupAttachTask,
		"cgroup_transfer_tasks": p.objs.CgroupTransferTasks,
		"task_rename":           p.objs.TaskRename,
		"memcg_reclaim_begin":   p.objs.MemcgReclaimBegin,
		"memcg_reclaim_end":     p.objs.MemcgReclaimEnd,
	}
	if err := p.attachRunq(); err != nil {
		return err
	}
	p.attachCompaction()
	for _, f := range features {
		if f.stacks && !p.stacksOn {
			continue
		}
		l, err := link.AttachTracing(link.TracingOptions{Program: progs[f.prog]})
		if err != nil {
			if f.what == "syscalls" {
				return fmt.Errorf("attaching to tracepoint %s: %w", f.prog, err)
			}
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s are not traced: tracepoint %s: %v", f.what, f.prog, err))
			continue
		}
		p.links = append(p.links, l)
		if slices.Contains(dutyProgs, f.prog) {
			if p.duty == nil {
				p.duty = map[string]int{}
			}
			p.duty[f.prog] = len(p.links) - 1
		}
	}
	return nil
}

// Take makes p the probe that takes new calls and events, in one write to
// the map p shares with the probe it takes over from (Config.After),
// which from then on only finishes the calls it saw enter. It should be
// closed once those have ended: calls it is still in then are lost.
func (p *Probe) Take() error {
	p.linkMu.Lock()
	defer p.linkMu.Unlock()
	if err := p.objs.Owner.Set(p.serial); err != nil {
		return fmt.Errorf("taking over tracing: %w", err)
	}
	return nil
}

// PauseSyscalls detaches the programs that run on every syscall and every
// context switch: sys_enter and sys_exit, and sched_switch and
// sched_waking, which follow only the sleeps of the syscalls those see.
// Syscalls are then neither counted nor emitted until ResumeSyscalls, and
// cost nothing (the agent's duty cycling). The rest stays attached.
func (p *Probe) PauseSyscalls() {
	p.linkMu.Lock()
	defer p.linkMu.Unlock()
	if p.links == nil {
		return
	}
	// sys_enter first: a call whose entry was seen still finds sys_exit,
	// and its sleeps the scheduler's programs.
	for _, name := range dutyProgs {
		if i, ok := p.duty[name]; ok && p.links[i] != nil {
			p.links[i].Close()
			p.links[i] = nil
		}
	}
	p.quiet.Store(true)
}

// dutyProgs are the programs PauseSyscalls detaches, in that order;
// ResumeSyscalls attaches them in the reverse one, so that every call whose
// entry is seen has its sleeps followed from the start.
var dutyProgs = []string{"sys_enter", "sys_exit", "sched_switch", "sched_waking"}

// ResumeSyscalls attaches them again. Calls that were in flight across
// the pause are not reported: the kernel ignores the state of any call
// entered under an earlier attach (attach_gen).
func (p *Probe) ResumeSyscalls() error {
	p.linkMu.Lock()
	defer p.linkMu.Unlock()
	if i, ok := p.duty["sys_enter"]; p.links == nil || !ok || p.links[i] != nil {
		return nil // not paused, or detached for good
	}
	// Only the low 32 bits move: the serial, which owns() compares, stays.
	p.gen++
	if err := p.objs.AttachGen.Set(p.gen); err != nil {
		return fmt.Errorf("resuming syscall tracing: %w", err)
	}
	progs := map[string]*ebpf.Program{"sys_enter": p.objs.SysEnter, "sys_exit": p.objs.SysExit,
		"sched_switch": p.objs.SchedSwitch, "sched_waking": p.objs.SchedWaking}
	got := map[string]link.Link{}
	for j := len(dutyProgs) - 1; j >= 0; j-- {
		name := dutyProgs[j]
		if _, ok := p.duty[name]; !ok {
			continue // not attached in the first place (no stacks)
		}
		l, err := link.AttachTracing(link.TracingOptions{Program: progs[name]})
		if err != nil {
			for _, l := range got {
				l.Close() // all or none: the next resume tries again
			}
			return fmt.Errorf("resuming syscall tracing: %s: %w", name, err)
		}
		got[name] = l
	}
	for name, l := range got {
		p.links[p.duty[name]] = l
	}
	// Quiet no more, then wake the readers: one that loads the new channel
	// sees quiet false (readRing loads them in the other order).
	p.quiet.Store(false)
	next := make(chan struct{})
	if old := p.resumed.Swap(&next); old != nil {
		close(*old)
	}
	return nil
}

// closeLinks detaches every program.
func (p *Probe) closeLinks() {
	p.linkMu.Lock()
	defer p.linkMu.Unlock()
	for _, l := range p.links {
		if l != nil {
			l.Close()
		}
	}
	p.links = nil
}

// Detach stops tracing, then emits the syscalls still in flight as unfinished.
// Events already queued stay readable.
func (p *Probe) Detach() error {
	// In attach order, so sys_enter stops before sys_exit. The other way
	// round, a call in flight at Run's cut could end unseen and its thread's
	// next entry overwrite it before the iterator below found it.
	p.closeLinks()
	// Staged syscall records reach the rings within one stage timer period.
	time.Sleep(stageFlush)
	if err := walkTasks(p.objs.Inflight); err != nil {
		return fmt.Errorf("listing syscalls in flight: %w", err)
	}
	p.flushFaultWaits()
	return nil
}

// walkTasks runs a task iterator over every task. The program does its work
// in the kernel (emitting, counting) and writes nothing: reading its file
// to the end is what walks the tasks.
func walkTasks(prog *ebpf.Program) error {
	it, err := link.AttachIter(link.IterOptions{Program: prog})
	if err != nil {
		return err
	}
	defer it.Close()
	rd, err := it.Open()
	if err != nil {
		return err
	}
	defer rd.Close()
	_, err = io.Copy(io.Discard, rd)
	return err
}

// stack reads one stack by its id (stack_id in bpf/sysray.bpf.c), innermost frame first.
func (p *Probe) stack(id int32) []uint64 {
	if id < 0 {
		return nil
	}
	var raw [stackDepth]uint64
	if err := p.objs.Stacks.Lookup(uint32(id), &raw); err != nil {
		return nil
	}
	n := 0
	for n < len(raw) && raw[n] != 0 {
		n++
	}
	return append([]uint64(nil), raw[:n]...)
}

const stackDepth = 64 // STACK_DEPTH in bpf/sysray.h

// Drops returns the events lost on each CPU because its ring was full.
func (p *Probe) Drops() ([]uint64, error) {
	var per []uint64
	if err := p.objs.Drops.Lookup(uint32(0), &per); err != nil {
		return nil, err
	}
	return per, nil
}

// Unseen returns how many sleeps ended where no program saw them end:
// their time was closed at the call's exit, and a stack deferred to the
// switch back in (Config.DeferNS) is missing.
func (p *Probe) Unseen() (uint64, error) {
	var per []uint64
	if err := p.objs.Unseen.Lookup(uint32(0), &per); err != nil {
		return 0, err
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n, nil
}

// HandoverLost returns how many calls p saw enter and had not seen end
// when it stopped with another probe owning new calls (Take): in flight
// across the handover for longer than p stayed attached, counted by
// neither probe. The stop's walk of the tasks counts them (Detach).
func (p *Probe) HandoverLost() (uint64, error) {
	var n uint64
	if err := p.objs.HandoverLost.Get(&n); err != nil {
		return 0, err
	}
	return n, nil
}

// CloseMaps detaches and frees the rings, leaving the programs and maps
// loaded until Close or the process's exit.
func (p *Probe) CloseMaps() {
	p.closeLinks()
	for _, m := range p.rings {
		m.Close()
	}
	p.rings = nil
}

// Close detaches and frees everything.
func (p *Probe) Close() error {
	p.closeLinks()
	for _, m := range p.rings {
		m.Close()
	}
	p.rings = nil
	if p.owner != nil {
		p.owner.Close()
	}
	return p.objs.Close()
}

// syscallMask is a bitmap of syscall numbers, as bpf/config.h's sys_mask
// and wait_mask hold them; numbers past maxSyscall are left out.
func syscallMask(nrs []uint32) (m [maxSyscall / 64]uint64) {
	for _, nr := range nrs {
		if nr < maxSyscall {
			m[nr/64] |= 1 << (nr % 64)
		}
	}
	return m
}

func configure(vars *sysrayVariableSpecs, cfg Config, arch event.Arch) error {
	b := func(v bool) uint8 {
		if v {
			return 1
		}
		return 0
	}
	mask, waits := syscallMask(cfg.Syscalls), syscallMask(cfg.WaitCalls)
	var rules [maxSyscall]sysrayCapRule
	for nr := uint32(0); nr < maxSyscall; nr++ {
		for i, c := range event.Captures(arch, nr) {
			if i >= len(rules[nr].Kind) {
				break
			}
			rules[nr].Kind[i] = uint8(c.Kind)
			rules[nr].Arg[i] = uint8(c.Arg)
			if c.LenArg >= 0 {
				rules[nr].Lenarg[i] = uint8(c.LenArg)
			}
		}
	}
	slow := cfg.SlowNS()
	deferNS := cfg.DeferNS
	if deferNS == 0 {
		// A wait's own sleeps are never what a detector reports, and
		// a sixteenth of the slow threshold is a small part of any call
		// it does report (an audit backlog's wait lasts up to seconds),
		// while a busy server's epoll_wait sleeps last microseconds.
		deferNS = slow / 16
	}
	if cfg.Sample&(cfg.Sample-1) != 0 {
		return fmt.Errorf("sample rate %d is not a power of two", cfg.Sample)
	}
	var shift uint32
	if cfg.Budget > 0 {
		if cfg.Budget > 255 {
			return fmt.Errorf("timing budget %d is over 255 calls a jiffy", cfg.Budget)
		}
		if cfg.Every < 2 || cfg.Every > 1<<16 || cfg.Every&(cfg.Every-1) != 0 {
			return fmt.Errorf("timing 1 call in %d: want a power of two from 2 to 65536", cfg.Every)
		}
		shift = uint32(bits.TrailingZeros32(cfg.Every))
	}
	execve, _ := event.SyscallByName(arch, "execve")
	execveat, _ := event.SyscallByName(arch, "execveat")
	sigreturn, _ := event.SyscallByName(arch, "rt_sigreturn")
	exit, _ := event.SyscallByName(arch, "exit")
	exitGroup, _ := event.SyscallByName(arch, "exit_group")
	futex, _ := event.SyscallByName(arch, "futex")
	sendto, _ := event.SyscallByName(arch, "sendto")
	futexWait, _ := event.SyscallByName(arch, "futex_wait")
	futexWake, _ := event.SyscallByName(arch, "futex_wake")
	if futexWait == 0 || futexWake == 0 {
		futexWait, futexWake = 0, 0 // the kernel side then looks at futex(2) only
	}
	for _, kv := range []struct {
		spec *ebpf.VariableSpec
		v    any
	}{
		{vars.CfgSelf, uint32(os.Getpid())},
		{vars.CfgPids, b(len(cfg.PIDs) > 0 || cfg.Launch)},
		{vars.CfgCgroups, b(len(cfg.Cgroups) > 0)},
		{vars.CfgSyscalls, b(cfg.Syscalls != nil)},
		{vars.CfgAllFaults, b(cfg.AllFaults)},
		{vars.CfgMinLatency, cfg.MinLatency},
		{vars.CfgStacks, b(cfg.Stacks)},
		{vars.CfgRunq, b(cfg.RunQueue)},
		{vars.CfgLeanStacks, b(cfg.LeanStacks)},
		{vars.CfgStat, b(cfg.Stat)},
		{vars.CfgSample, cfg.Sample},
		{vars.CfgSampleGap, cfg.SampleGap},
		{vars.CfgFirsts, b(cfg.Firsts)},
		{vars.CfgTickNs, cfg.TickNS},
		{vars.CfgBudget, cfg.Budget},
		{vars.CfgEveryShift, shift},
		{vars.CfgSlow, slow},
		{vars.CfgNrExecve, execve},
		{vars.CfgNrExecveat, execveat},
		{vars.CfgNrRtSigreturn, sigreturn},
		{vars.CfgNrExit, exit},
		{vars.CfgNrExitGroup, exitGroup},
		{vars.CfgFutex, b(cfg.futexOn())},
		{vars.CfgNrFutex, futex},
		{vars.CfgDnsClass, dnsClasses(arch)},
		{vars.CfgNrSendto, sendto},
		{vars.CfgNrFutexWait, futexWait},
		{vars.CfgNrFutexWake, futexWake},
		{vars.SysMask, mask},
		{vars.WaitMask, waits},
		{vars.CfgDeferNs, deferNS},
		{vars.CapRules, rules},
		{vars.CfgFaultwait, b(cfg.FaultWait && cfg.Stacks)},
	} {
		if err := kv.spec.Set(kv.v); err != nil {
			return fmt.Errorf("setting %s: %w", kv.spec.Name, err)
		}
	}
	return nil
}

const maxSyscall = 512

// dnsClasses says what each syscall is to a resolver's socket
// (bpf/dnswatch.h): the calls glibc's, musl's and Go's resolvers send,
// read and close with, and connect, which marks the socket.
func dnsClasses(arch event.Arch) [maxSyscall]uint8 {
	var out [maxSyscall]uint8
	for class, names := range [][]string{
		sysrayDnsClassDNS_RD:      {"read", "readv", "recvfrom", "recvmsg", "recvmmsg"},
		sysrayDnsClassDNS_WR:      {"write", "writev", "sendmsg", "sendmmsg"},
		sysrayDnsClassDNS_SENDTO:  {"sendto"},
		sysrayDnsClassDNS_CLOSE:   {"close"},
		sysrayDnsClassDNS_CONNECT: {"connect"},
	} {
		for _, name := range names {
			if nr, ok := event.SyscallByName(arch, name); ok && nr < maxSyscall {
				out[nr] = uint8(class)
			}
		}
	}
	return out
}

// stageFlush is comfortably more than STAGE_NS in bpf/sysray.bpf.c.
const stageFlush = 5 * time.Millisecond

// kernelTypes reads the kernel's BTF from the kernel itself (a BTF object
// handle), not from a file.
func kernelTypes() (*btf.Spec, error) {
	h, err := btf.FindHandle(func(i *btf.HandleInfo) bool { return i.IsVmlinux() })
	if err != nil {
		return nil, err
	}
	defer h.Close()
	return h.Spec(nil)
}

// possibleCPUs is the number of CPU ids the kernel may use. cilium/ebpf
// reads /sys/devices/system/cpu/possible once and keeps it: every open on
// the start-up path may wait when the host's audit backlog is full.
func possibleCPUs() (int, error) {
	return ebpf.PossibleCPU()
}

// roundRing returns a power of two multiple of the page size, as the kernel requires.
func roundRing(n int) int {
	page := os.Getpagesize()
	size := page
	for size < n {
		size <<= 1
	}
	return size
}

// attachCompaction attaches global direct reclaim's and direct
// compaction's tracepoints (bpf/reclaim.h) when Config.Compaction asks.
// They fire only when the page allocator runs short of free or contiguous
// memory, and in kcompactd, whose passes the programs leave at once.
func (p *Probe) attachCompaction() {
	if !p.compactOn {
		return
	}
	for _, pr := range []struct {
		name, what string
		prog       *ebpf.Program
	}{{"mm_vmscan_direct_reclaim_begin", "direct reclaim", p.objs.DirectReclaimBegin},
		{"mm_vmscan_direct_reclaim_end", "direct reclaim", p.objs.DirectReclaimEnd},
		{"mm_compaction_begin", "direct compaction", p.objs.CompactionBegin},
		{"mm_compaction_end", "direct compaction", p.objs.CompactionEnd}} {
		l, err := link.AttachTracing(link.TracingOptions{Program: pr.prog})
		if err != nil {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s is not traced: tracepoint %s: %v", pr.what, pr.name, err))
			continue
		}
		p.links = append(p.links, l)
	}
}
