package scap

import (
	"bytes"
	"maps"
	"path"
	"slices"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/redact"
)

// Converter turns scap events into sysray events: it pairs each thread's
// enter event with its exit into one call, and follows the process list,
// clone, execve and procexit to know each thread's process and name.
// Syscalls are numbered as on x86-64, where scap's drivers run.
type Converter struct {
	emit    func(*event.Event) error
	threads map[uint64]*thread
	live    map[uint32]int    // by process: threads not yet exited
	pending map[uint64]*Event // a call's enter event, per thread (a copy)
	last    uint64
	St      *Stats
	ctrIdx  map[string]int // place in St.Containers, by libsinsp's id
}

type thread struct {
	pid  uint32
	comm string
	ctr  string // the container's id as libsinsp names it; "" on the host
}

// NewConverter returns a converter that gives each event to emit (the
// event is reused after emit returns; emit may be nil to only count).
func NewConverter(emit func(*event.Event) error) *Converter {
	return &Converter{emit: emit, threads: map[uint64]*thread{}, live: map[uint32]int{},
		pending: map[uint64]*Event{}, St: newStats(), ctrIdx: map[string]int{}}
}

// Learn takes the threads of a process list block.
func (c *Converter) Learn(ts []Thread) {
	for _, t := range ts {
		if _, ok := c.threads[t.TID]; ok {
			continue
		}
		c.threads[t.TID] = &thread{pid: uint32(t.PID), comm: t.Comm, ctr: cgroupContainer(t.Cgroups)}
		c.live[uint32(t.PID)]++
	}
}

func (c *Converter) thread(tid uint64) *thread {
	if t := c.threads[tid]; t != nil {
		return t
	}
	t := &thread{pid: uint32(tid)}
	c.threads[tid] = t
	c.live[t.pid]++
	return t
}

func (c *Converter) send(e *event.Event) error {
	c.St.Events++
	if c.emit == nil {
		return nil
	}
	return c.emit(e)
}

func (c *Converter) base(kind event.Kind, x *Event, at uint64) event.Event {
	t := c.thread(x.TID)
	return event.Event{Kind: kind, Time: at, CPU: uint32(x.CPU), PID: t.pid, TID: uint32(x.TID), Comm: t.comm, Cgroup: c.cgroup(t.ctr)}
}

// Feed converts one event.
func (c *Converter) Feed(x *Event) error {
	c.last = max(c.last, x.Time)
	if c.St.First == 0 || x.Time < c.St.First {
		c.St.First = x.Time
	}
	c.St.Last = max(c.St.Last, x.Time)
	info := &eventTypes[x.Type]
	if info.flags&efSyscall == 0 {
		switch info.name {
		case "procexit":
			return c.exit(x)
		case "signaldeliver":
			return c.signal(x)
		case "page_fault":
			return c.fault(x)
		case "container":
			c.container(x)
		}
		c.St.Other[info.name]++
		return nil
	}
	if x.Enter() {
		if p := c.pending[x.TID]; p != nil {
			// A thread enters a call only once the last one returned: the
			// exit of this one was lost (dropped by the tracer).
			if err := c.cutOff(p, x.Time); err != nil {
				return err
			}
		}
		c.pending[x.TID] = x.clone()
		return nil
	}
	en := c.pending[x.TID]
	if en != nil && en.Type != x.Type-1 {
		if err := c.cutOff(en, x.Time); err != nil {
			return err
		}
		en = nil
	}
	delete(c.pending, x.TID)
	return c.call(en, x)
}

// clone copies an event out of the block it points into.
func (x *Event) clone() *Event {
	n := 0
	for _, p := range x.Params {
		n += len(p)
	}
	buf := make([]byte, 0, n)
	y := *x
	y.Params = make([][]byte, len(x.Params))
	for i, p := range x.Params {
		buf = append(buf, p...)
		y.Params[i] = buf[len(buf)-len(p) : len(buf) : len(buf)]
	}
	return &y
}

// aliases maps the event table's names that differ from the x86-64
// syscall table's. The table's 32-bit names (stat64, mmap2, llseek, ...)
// have no x86-64 number: such calls are skipped and named.
var aliases = map[string]string{
	"pread": "pread64", "pwrite": "pwrite64", "umount": "umount2", "prlimit": "prlimit64",
	"fstatat": "newfstatat",
}

// syscallNr names the call of an event pair: the event's name, or for
// the generic events (syscalls without an event pair of their own) the
// PPM_SC code they carry, and failing that the host's number.
func syscallNr(en, x *Event) (uint32, string, bool) {
	name := x.Name()
	if name == "syscall" {
		for _, e := range []*Event{x, en} {
			if e == nil {
				continue
			}
			if id, ok := e.IntNamed("ID"); ok {
				// Code 0 is the tracer's "unknown": a syscall its table
				// lacked when it wrote the file.
				if n, ok := scNames[uint16(id)]; ok && id != 0 {
					name = n
					break
				}
			}
		}
		if name == "syscall" {
			for _, e := range []*Event{x, en} {
				if e == nil {
					continue
				}
				if nr, ok := e.IntNamed("nativeID"); ok {
					return uint32(nr), event.SyscallName(event.ArchAMD64, uint32(nr)), true
				}
			}
			return 0, "<unknown>", false
		}
	}
	if a, ok := aliases[name]; ok {
		name = a
	}
	nr, ok := event.SyscallByName(event.ArchAMD64, name)
	return nr, name, ok
}

// integral says a parameter type is a plain number the registers held
// as such (flags are re-encoded by the tracer: flagConv converts some).
func integral(t uint8) bool {
	switch t {
	case ptInt8, ptInt16, ptInt32, ptInt64, ptUint8, ptUint16, ptUint32, ptUint64, ptFD, ptPID, ptSigtype:
		return true
	}
	return false
}

// argNames maps sysray's argument names to the event table's.
var argNames = map[string]string{"count": "size", "protocol": "proto", "len": "length"}

// isPath says a parameter is a path: typed so, or, in older events that
// typed paths as plain strings, named so.
func isPath(name string, t uint8) bool {
	if name == "trusted_exepath" {
		return false // execve's resolved executable, not an argument
	}
	switch t {
	case ptFSPath, ptFSRelPath:
		return true
	case ptCharbuf:
		switch name {
		case "name", "path", "pathname", "filename", "oldpath", "newpath", "target", "linkpath":
			return true
		}
	}
	return false
}

// decode fills a call's arguments from its two events: descriptors,
// sizes and other plain numbers by name, and paths in order.
func decode(nr uint32, en, x *Event, sc *event.Syscall) {
	spec := event.Lookup(event.ArchAMD64, nr)
	if spec == nil {
		return
	}
	var paths []string
	for _, e := range []*Event{x, en} {
		if e == nil {
			continue
		}
		for i := range e.Params {
			if p := eventTypes[e.Type].params; i < len(p) && isPath(p[i].name, p[i].typ) {
				paths = append(paths, e.Str(i))
			}
		}
		if len(paths) > 0 {
			break
		}
	}
	for i, a := range spec.Args {
		if i >= 6 {
			break
		}
		if a.Kind == event.ArgPath {
			if len(paths) > 0 {
				sc.Data[i] = []byte(paths[0])
				paths = paths[1:]
			}
			continue
		}
		name := a.Name
		if n, ok := argNames[name]; ok {
			name = n
		}
		_, toLinux := flagConv(a.Kind)
		for _, e := range []*Event{en, x} {
			if e == nil {
				continue
			}
			if j, ok := e.param(name); ok && toLinux != nil {
				if v, ok := e.Int(j); ok {
					sc.Args[i] = toLinux(uint64(v))
					break
				}
			}
			if j, ok := e.param(name); ok && integral(e.paramType(j)) {
				if v, ok := e.Int(j); ok {
					sc.Args[i] = uint64(v)
					break
				}
			}
		}
	}
}

// ret is what the call returned: the exit event's first parameter where
// the table calls it the result (res, or the descriptor an open made).
func ret(x *Event) (int64, bool) {
	ps := eventTypes[x.Type].params
	if len(ps) == 0 || len(x.Params) == 0 {
		return 0, false
	}
	switch ps[0].name {
	case "res", "fd", "ret":
		return x.Int(0)
	}
	return 0, false
}

func (c *Converter) call(en, x *Event) error {
	nr, name, ok := syscallNr(en, x)
	if !ok {
		c.St.Unknown[name]++
		return nil
	}
	at := x.Time
	if en != nil {
		at = en.Time
	} else {
		c.St.Unpaired++
	}
	e := c.base(event.KindSyscall, x, at)
	sc := &e.Syscall
	sc.Nr = nr
	if en != nil && x.Time >= en.Time {
		sc.Latency = x.Time - en.Time
	}
	if r, ok := ret(x); ok {
		sc.Ret = r
	} else {
		c.St.NoReturn++
	}
	decode(nr, en, x, sc)
	c.St.Calls++
	if !sc.Failed() {
		if err := c.effects(name, en, x, &e); err != nil {
			return err
		}
	}
	return c.send(&e)
}

// cutOff emits a call whose exit never came, lasting until end.
func (c *Converter) cutOff(en *Event, end uint64) error {
	nr, name, ok := syscallNr(nil, en)
	if !ok {
		c.St.Unknown[name]++
		return nil
	}
	e := c.base(event.KindSyscall, en, en.Time)
	e.Syscall.Nr = nr
	e.Syscall.Unfinished = true
	if end > en.Time {
		e.Syscall.Latency = end - en.Time
	}
	decode(nr, en, nil, &e.Syscall)
	c.St.Unfinished++
	return c.send(&e)
}

const ppmCloneThread = 1 << 13 // PPM_CL_CLONE_THREAD in the clone events' flags

// effects keeps the thread table current and emits the lifecycle events
// a successful call implies.
func (c *Converter) effects(name string, en, x *Event, e *event.Event) error {
	t := c.thread(x.TID)
	switch name {
	case "execve", "execveat":
		f := c.base(event.KindExec, x, x.Time)
		exe, _ := x.StrNamed("exe")
		f.Proc.Filename = exe
		for _, ev := range []*Event{en, x} {
			if ev == nil {
				continue
			}
			if s, ok := ev.StrNamed("filename"); ok && s != "" {
				// Newer tracers record execve's path argument; older
				// ones only argv[0] (exe), which is not the path.
				f.Proc.Filename = s
				if len(e.Syscall.Data[0]) == 0 {
					e.Syscall.Data[0] = []byte(s)
				}
			}
		}
		if exe != "" {
			f.Proc.Argv = append(f.Proc.Argv, exe)
		}
		if i, ok := x.param("args"); ok {
			if b := bytes.TrimRight(x.Params[i], "\x00"); len(b) > 0 {
				for _, a := range bytes.Split(b, []byte{0}) {
					f.Proc.Argv = append(f.Proc.Argv, string(a))
				}
			}
		}
		f.Proc.Argv = redact.Argv(f.Proc.Argv)
		f.Proc.OldTID = uint32(x.TID)
		comm, _ := x.StrNamed("comm")
		if comm == "" && f.Proc.Filename != "" {
			comm = path.Base(f.Proc.Filename)
			if len(comm) > 15 {
				comm = comm[:15]
			}
		}
		if pid, ok := x.IntNamed("pid"); ok && pid > 0 {
			c.move(t, uint32(pid))
		}
		if comm != "" {
			t.comm = comm
		}
		// libsinsp looks for the thread's container anew at an exec.
		if i, ok := x.param("cgroups"); ok {
			t.ctr = cgroupContainer(splitCgroups(x.Params[i]))
		}
		f.PID, f.Comm, e.PID, e.Comm = t.pid, t.comm, t.pid, t.comm
		f.Cgroup, e.Cgroup = c.cgroup(t.ctr), c.cgroup(t.ctr)
		return c.send(&f)
	case "clone", "clone3", "fork", "vfork":
		if e.Syscall.Ret == 0 {
			// The child's return: its own view of who it is.
			if pid, ok := x.IntNamed("pid"); ok && pid > 0 {
				c.move(t, uint32(pid))
			}
			if comm, ok := x.StrNamed("comm"); ok && comm != "" {
				t.comm = comm
			}
			if i, ok := x.param("cgroups"); ok {
				t.ctr = cgroupContainer(splitCgroups(x.Params[i]))
			}
			e.PID, e.Comm, e.Cgroup = t.pid, t.comm, c.cgroup(t.ctr)
			return nil
		}
		child := uint64(e.Syscall.Ret)
		flags, _ := x.IntNamed("flags")
		isThread := flags&ppmCloneThread != 0
		ct := c.threads[child]
		if ct == nil {
			ct = &thread{pid: uint32(child), comm: t.comm, ctr: t.ctr}
			if i, ok := x.param("cgroups"); ok {
				ct.ctr = cgroupContainer(splitCgroups(x.Params[i]))
			}
			if isThread {
				ct.pid = t.pid
			}
			c.threads[child] = ct
			c.live[ct.pid]++
		}
		f := c.base(event.KindFork, x, x.Time)
		f.Proc.ChildPID, f.Proc.ChildTID, f.Proc.Thread, f.Proc.ChildComm = ct.pid, uint32(child), isThread, ct.comm
		return c.send(&f)
	case "prctl":
		// PR_SET_NAME's new name is not in the events: the next execve
		// or clone tells it.
	}
	return nil
}

// move puts a thread in process pid.
func (c *Converter) move(t *thread, pid uint32) {
	if t.pid == pid {
		return
	}
	c.live[t.pid]--
	if c.live[t.pid] <= 0 {
		delete(c.live, t.pid)
	}
	t.pid = pid
	c.live[pid]++
}

func (c *Converter) exit(x *Event) error {
	cut := false
	if p := c.pending[x.TID]; p != nil {
		delete(c.pending, x.TID)
		cut = true
		if err := c.cutOff(p, x.Time); err != nil {
			return err
		}
	}
	e := c.base(event.KindExit, x, x.Time)
	if st, ok := x.IntNamed("status"); ok {
		e.Proc.ExitCode = int32(st)
	} else {
		c.St.NoExitStatus++
	}
	t := c.threads[x.TID]
	c.live[t.pid]--
	e.Proc.GroupDead = c.live[t.pid] <= 0
	if e.Proc.GroupDead {
		delete(c.live, t.pid)
	}
	e.Proc.Unfinished = cut
	delete(c.threads, x.TID)
	c.St.Exits++
	return c.send(&e)
}

func (c *Converter) signal(x *Event) error {
	e := c.base(event.KindSignalDeliver, x, x.Time)
	sig, _ := x.IntNamed("sig")
	spid, _ := x.IntNamed("spid")
	dpid, _ := x.IntNamed("dpid")
	e.Signal.Sig, e.Signal.SenderPID, e.Signal.TargetTID = int32(sig), uint32(spid), uint32(dpid)
	e.Signal.TargetPID = e.PID
	c.St.Signals++
	return c.send(&e)
}

// ppmFault maps the tracer's page-fault flags to the x86 error code bits.
var ppmFault = [...]struct{ ppm, x86 uint64 }{
	{1 << 0, 1 << 0}, // protection violation: the page was present
	{1 << 2, 1 << 1}, // write
	{1 << 4, 1 << 2}, // user mode
	{1 << 6, 1 << 3}, // reserved bit set
	{1 << 7, 1 << 4}, // instruction fetch
}

func (c *Converter) fault(x *Event) error {
	e := c.base(event.KindPageFault, x, x.Time)
	addr, _ := x.IntNamed("addr")
	ip, _ := x.IntNamed("ip")
	flags, _ := x.IntNamed("error")
	e.Fault.Addr, e.Fault.IP = uint64(addr), uint64(ip)
	for _, f := range ppmFault {
		if uint64(flags)&f.ppm != 0 {
			e.Fault.Error |= f.x86
		}
	}
	c.St.PageFaults++
	return c.send(&e)
}

// Close emits the calls still open at the end of the file, cut off there.
func (c *Converter) Close() error {
	for _, tid := range slices.Sorted(maps.Keys(c.pending)) {
		if err := c.cutOff(c.pending[tid], c.last); err != nil {
			return err
		}
	}
	c.pending = map[uint64]*Event{}
	return nil
}
