package strace

import (
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/audit"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/redact"
)

// Converter turns parsed lines into events. Feed it the lines in the order
// strace wrote them (for -ff files, merged by time), then call Close.
type Converter struct {
	arch event.Arch
	emit func(*event.Event) error

	threads  map[uint32]*thread
	live     map[uint32]int          // by process: threads not yet exited
	rel      map[uint32]relation     // child tid → who made it
	root     uint32                  // the tid of lines without one, learnt
	pending  map[uint32]*call        // a call's first half, per thread
	dying    map[uint32]*event.Event // exit, exit_group and the like ("= ?"), until the thread's end
	last     uint64                  // the latest time seen
	Unknown  map[string]uint64       // syscall names the arch's table lacks
	Unpaired uint64                  // "resumed" halves without their start
	Undecode uint64                  // arguments not mapped back to a number
	Audit    []audit.Fact            // what the traced processes told the kernel's audit
	Events   uint64
}

type thread struct {
	pid  uint32
	comm string
}

type relation struct {
	parent uint32
	thread bool // CLONE_THREAD: the child joins the parent's process
}

type call struct {
	name string
	args string
	time uint64
}

// NewConverter returns a converter for syscalls numbered as on arch. emit
// receives each event; the event is reused after emit returns.
func NewConverter(arch event.Arch, emit func(*event.Event) error) *Converter {
	return &Converter{arch: arch, emit: emit, threads: map[uint32]*thread{}, live: map[uint32]int{},
		rel: map[uint32]relation{}, pending: map[uint32]*call{}, dying: map[uint32]*event.Event{},
		Unknown: map[string]uint64{}}
}

// Learn gives a converter what an earlier pass over the same lines found
// out about who created which thread, so that a thread whose first lines
// come before its creator's clone returned is put in the right process.
func (c *Converter) Learn(from *Converter) {
	for k, v := range from.rel {
		c.rel[k] = v
	}
	c.root = from.root
}

func (c *Converter) thread(tid uint32) *thread {
	if t := c.threads[tid]; t != nil {
		return t
	}
	t := &thread{pid: tid}
	if r, ok := c.rel[tid]; ok {
		if p := c.threads[r.parent]; p != nil {
			t.comm = p.comm
			if r.thread {
				t.pid = p.pid
			}
		}
	}
	c.threads[tid] = t
	c.live[t.pid]++
	return t
}

func (c *Converter) send(e *event.Event) error {
	c.Events++
	if c.emit == nil {
		return nil
	}
	return c.emit(e)
}

func (c *Converter) base(kind event.Kind, tid uint32, t *thread, at uint64) event.Event {
	return event.Event{Kind: kind, Time: at, PID: t.pid, TID: tid, Comm: t.comm}
}

// Feed converts one line; tid stands in for a line without a pid column
// (strace without -f, or one of -ff's files).
func (c *Converter) Feed(l *Line, tid uint32) error {
	if l.TID != 0 {
		tid = l.TID
	}
	if tid == 0 {
		tid = c.alone()
	}
	if l.HasTime {
		c.last = max(c.last, l.Time)
	}
	switch l.Kind {
	case LineCall:
		return c.complete(tid, l.Name, l.Args, l.Time, l)
	case LineUnfinished:
		if p := c.pending[tid]; p != nil {
			// A thread starts a call only after the last one ended; an
			// unpaired half is a line strace lost.
			c.Unpaired++
		}
		c.thread(tid)
		c.pending[tid] = &call{name: l.Name, args: l.Args, time: l.Time}
		return nil
	case LineResumed:
		p := c.pending[tid]
		if p == nil || p.name != l.Name {
			// Begun before the log (strace -p attached to a thread inside
			// it) or its start line lost: the return and the latency are
			// known, the arguments printed before the split are not.
			c.Unpaired++
			at := l.Time
			if l.HasLat && l.HasTime && l.Time >= l.Latency {
				at = l.Time - l.Latency
			}
			return c.complete(tid, l.Name, "", at, &Line{Ret: l.Ret, NoReturn: l.NoReturn, Latency: l.Latency, HasLat: l.HasLat})
		}
		delete(c.pending, tid)
		args := p.args
		if l.Args != "" {
			args = strings.TrimRight(args, " ") + l.Args
		}
		return c.complete(tid, l.Name, args, p.time, l)
	case LineSignal:
		return c.signal(tid, l)
	case LineExited, LineKilled:
		return c.exit(tid, l)
	}
	return nil
}

// syscallNr reads a syscall's name, also strace's syscall_0x1b6 for numbers
// it has no name for.
func syscallNr(a event.Arch, name string) (uint32, bool) {
	if h, ok := strings.CutPrefix(name, "syscall_0x"); ok {
		if n, err := strconv.ParseUint(h, 16, 32); err == nil {
			name = "syscall_" + strconv.FormatUint(n, 10)
		}
	}
	return event.SyscallByName(a, name)
}

// alone is the thread of a line without a pid: strace -f prints none
// while it traces one thread alone (the first, until it clones, or the last
// left), and strace without -f never does. The first thread's tid is learnt
// from what its set_tid_address or gettid returned (Learn brings it to
// lines before those).
func (c *Converter) alone() uint32 {
	if len(c.threads) == 1 {
		for tid := range c.threads {
			return tid
		}
	}
	return c.root
}

func (c *Converter) complete(tid uint32, name, args string, at uint64, l *Line) error {
	t := c.thread(tid)
	nr, ok := syscallNr(c.arch, name)
	if !ok {
		c.Unknown[name]++
		return nil
	}
	if tid == 0 && c.root == 0 && (name == "set_tid_address" || name == "gettid") && l.Ret > 0 {
		c.root = uint32(l.Ret)
	}
	e := c.base(event.KindSyscall, tid, t, at)
	sc := &e.Syscall
	sc.Nr = nr
	sc.Ret = l.Ret
	sc.Latency = l.Latency
	if !l.HasLat && l.HasTime && l.Time > at {
		sc.Latency = l.Time - at // the halves' times, without -T
	}
	if name == "clone3" {
		// The structure strace shows again after the call, "=> {...}",
		// is not an argument.
		if i := strings.Index(args, " => "); i >= 0 {
			if j := strings.IndexByte(args[i:], ','); j >= 0 {
				args = args[:i] + args[i+j:]
			} else {
				args = args[:i]
			}
		}
	}
	d := decodeArgs(c.arch, nr, args, !l.NoReturn && l.Ret >= 0)
	sc.Args, sc.Data, sc.Truncated = d.args, d.data, d.trunc
	c.Undecode += uint64(d.undecoded)
	if l.NoReturn {
		// exit, exit_group, or a call the thread died in: strace waits for
		// the thread's end to say so; the call lasts until then.
		sc.Unfinished, sc.Ret = true, 0
		ev := e
		c.dying[tid] = &ev
		return nil
	}
	if !sc.Failed() {
		c.auditFacts(tid, at, name, args, sc.Ret)
		if err := c.effects(tid, t, name, args, &e); err != nil {
			return err
		}
	}
	return c.send(&e)
}

// effects emits the lifecycle events a successful call implies and keeps
// the thread table current.
func (c *Converter) effects(tid uint32, t *thread, name, args string, e *event.Event) error {
	sc := &e.Syscall
	end := e.Time + sc.Latency
	switch name {
	case "execve", "execveat":
		fi, ai := 0, 1
		if name == "execveat" {
			fi, ai = 1, 2
		}
		x := c.base(event.KindExec, tid, t, end)
		x.Proc.Filename = string(sc.Data[fi])
		if parts := splitArgs(args); ai < len(parts) {
			x.Proc.Argv, x.Proc.ArgvTruncated, _ = stringList(parts[ai])
			x.Proc.Argv = redact.Argv(x.Proc.Argv)
		}
		x.Proc.OldTID = tid
		// The kernel names a process after the file it executed, cut to
		// TASK_COMM_LEN-1 bytes.
		if x.Proc.Filename != "" {
			comm := path.Base(x.Proc.Filename)
			if len(comm) > 15 {
				comm = comm[:15]
			}
			t.comm = comm
		}
		x.Comm, e.Comm = t.comm, t.comm
		return c.send(&x)
	case "clone", "clone3", "fork", "vfork":
		if sc.Ret <= 0 {
			return nil
		}
		child := uint32(sc.Ret)
		isThread := false
		switch name {
		case "clone":
			isThread = sc.Args[0]&cloneThread != 0
		case "clone3":
			if parts := splitArgs(args); len(parts) > 0 {
				if f, ok := structField(parts[0], "flags"); ok {
					if nr, ok := event.SyscallByName(c.arch, "clone"); ok {
						v, _ := value(f, nameTable(c.arch, nr, 0))
						isThread = v&cloneThread != 0
					}
				}
			}
		}
		c.rel[child] = relation{parent: tid, thread: isThread}
		if old := c.threads[child]; old != nil && old.pid != tid && !isThread {
			old.pid = child // seen before its creator returned, without a first pass
		}
		ct := c.thread(child)
		if ct.comm == "" {
			ct.comm = t.comm
		}
		f := c.base(event.KindFork, tid, t, end)
		f.Proc.ChildPID, f.Proc.ChildTID, f.Proc.Thread, f.Proc.ChildComm = ct.pid, child, isThread, t.comm
		return c.send(&f)
	case "prctl":
		parts := splitArgs(args)
		if len(parts) >= 2 && stripComments(parts[0]) == "PR_SET_NAME" {
			if b, _, ok := unquote(parts[1]); ok {
				t.comm = string(b)
				e.Comm = t.comm
			}
		}
	}
	return nil
}

const cloneThread = 0x10000

// signal: strace sees a signal when the thread is about to take it. Its
// siginfo is what the sender generated, so it is stored as the generation
// (what the doctor matches a death against), for this thread, delivered.
// Whether a handler ran is not known, so no signal_deliver is made up.
func (c *Converter) signal(tid uint32, l *Line) error {
	t := c.thread(tid)
	sig, ok := event.SignalByName(l.Name)
	if !ok {
		return nil
	}
	e := c.base(event.KindSignalGenerate, tid, t, l.Time)
	s := &e.Signal
	s.Sig, s.TargetPID, s.TargetTID = int32(sig), t.pid, tid
	if v, ok := structField(l.Args, "si_code"); ok {
		s.Code = siCode(sig, v)
	}
	if v, ok := structField(l.Args, "si_pid"); ok {
		if n, ok := parseInt(v); ok {
			s.SenderPID = uint32(n)
		}
	}
	if v, ok := structField(l.Args, "si_addr"); ok {
		if n, ok := value(v, nil); ok {
			s.Addr = n
		}
	}
	if v, ok := structField(l.Args, "si_call_addr"); ok {
		if n, ok := value(v, nil); ok {
			s.Addr = n
		}
	}
	if v, ok := structField(l.Args, "si_syscall"); ok {
		if nr, ok := event.SyscallByName(c.arch, strings.TrimPrefix(v, "__NR_")); ok {
			s.Syscall = int32(nr)
		} else if n, ok := parseInt(v); ok {
			s.Syscall = int32(n)
		}
	}
	if v, ok := structField(l.Args, "si_arch"); ok {
		s.Arch = auditArch[v]
	}
	return c.send(&e)
}

// auditArch maps strace's names of si_arch to their AUDIT_ARCH_* values.
var auditArch = map[string]uint32{"AUDIT_ARCH_X86_64": 0xc000003e, "AUDIT_ARCH_AARCH64": 0xc00000b7, "AUDIT_ARCH_I386": 0x40000003}

// siCode maps si_code's name back through sysray's own table of them.
func siCode(sig int, name string) int32 {
	if n, ok := parseInt(name); ok {
		return int32(n)
	}
	for code := -64; code <= 64; code++ {
		if event.SigCodeName(sig, code) == name {
			return int32(code)
		}
	}
	return 0
}

func (c *Converter) exit(tid uint32, l *Line) error {
	t := c.thread(tid)
	at := l.Time
	cut := false
	if p := c.pending[tid]; p != nil {
		delete(c.pending, tid)
		cut = true
		if err := c.flushPending(tid, t, p, at); err != nil {
			return err
		}
	}
	if d := c.dying[tid]; d != nil {
		delete(c.dying, tid)
		cut = true
		if at > d.Time {
			d.Syscall.Latency = at - d.Time
		}
		if err := c.send(d); err != nil {
			return err
		}
	}
	e := c.base(event.KindExit, tid, t, at)
	if l.Kind == LineExited {
		e.Proc.ExitCode = int32(l.Status&0xff) << 8
	} else {
		sig, _ := event.SignalByName(l.Name)
		e.Proc.ExitCode = int32(sig & 0x7f)
		if l.Core {
			e.Proc.ExitCode |= 0x80
		}
	}
	c.live[t.pid]--
	e.Proc.GroupDead = c.live[t.pid] <= 0
	if e.Proc.GroupDead {
		delete(c.live, t.pid)
	}
	e.Proc.Unfinished = cut
	delete(c.threads, tid)
	return c.send(&e)
}

// flushPending emits a call whose second half never came, cut off at at.
func (c *Converter) flushPending(tid uint32, t *thread, p *call, at uint64) error {
	nr, ok := syscallNr(c.arch, p.name)
	if !ok {
		c.Unknown[p.name]++
		return nil
	}
	e := c.base(event.KindSyscall, tid, t, p.time)
	e.Syscall.Nr = nr
	e.Syscall.Unfinished = true
	if at > p.time {
		e.Syscall.Latency = at - p.time
	}
	d := decodeArgs(c.arch, nr, p.args, false)
	e.Syscall.Args, e.Syscall.Data, e.Syscall.Truncated = d.args, d.data, d.trunc
	return c.send(&e)
}

// Close emits the calls still open at the end of the log, cut off there,
// as a capture that stops mid-call does.
func (c *Converter) Close() error {
	// In thread order, so that two imports of a log are the same file.
	for _, tid := range slices.Sorted(maps.Keys(c.pending)) {
		if err := c.flushPending(tid, c.thread(tid), c.pending[tid], c.last); err != nil {
			return err
		}
	}
	for _, tid := range slices.Sorted(maps.Keys(c.dying)) {
		d := c.dying[tid]
		if c.last > d.Time {
			d.Syscall.Latency = c.last - d.Time
		}
		if err := c.send(d); err != nil {
			return err
		}
	}
	c.pending, c.dying = map[uint32]*call{}, map[uint32]*event.Event{}
	return nil
}
