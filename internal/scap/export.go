package scap

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/filter"
	"github.com/sysray/sysray/internal/session"
)

// ExportStats counts what Export wrote.
type ExportStats struct {
	Events     uint64 // scap events written
	Calls      uint64 // calls written with their exit
	Unfinished uint64 // calls cut off: an enter event alone
	Generic    uint64 // calls written as the generic pair
	Exits      uint64 // procexit events
	// ChildReturns are the new threads' own returns from clone: a call
	// that made a thread returns twice in scap, as in the kernel.
	ChildReturns uint64
	Threads      int               // process list entries
	Containers   int               // containers described (those of the exported threads)
	Left         map[string]uint64 // sysray events scap has no counterpart written for, by kind
	Truncated    bool              // the capture ends inside a block: exported up to it
	Signals      uint64            // signal deliveries (signaldeliver)
	Faults       uint64            // page faults (page_fault)
	OutOfOrder   uint64            // events written after a later one (past maxQueued held back)
}

// Export writes the sysray capture at path to w as a scap file: the
// threads the capture saw as the process list, each call as its enter and
// exit events (an enter alone for a call cut off), each thread's exit as
// procexit. Events are written in time order (see maxQueued).
func Export(path string, w io.Writer) (*ExportStats, error) {
	x := &exporter{threads: map[uint32]*Thread{}, forks: map[[2]uint32]bool{}, execs: map[uint32]*event.Proc{},
		born: map[uint32]bool{}, cloneCall: map[uint32]string{}, firstAt: map[uint32]uint64{}, st: &ExportStats{Left: map[string]uint64{}},
		ctrOf: map[uint32]filter.Container{}, execCtr: map[uint32]filter.Container{}}
	cpus, err := x.learn(path)
	if err != nil {
		return nil, err
	}
	list := make([]Thread, 0, len(x.order))
	for _, tid := range x.order {
		if !x.born[tid] {
			list = append(list, *x.threads[tid])
		}
	}
	x.st.Threads = len(list)
	x.w, err = NewWriter(w, MachineInfo{CPUs: cpus, Hostname: x.hdr.Hostname}, list)
	if err != nil {
		return nil, err
	}
	if err := x.containers(); err != nil {
		return x.st, err
	}
	x.ctrs = nil // the second pass learns the containers anew, event by event
	// The process list is the state when the capture began: from here on
	// the exports' own execs and forks change it.
	if err := x.each(path, x.event); err != nil {
		return x.st, err
	}
	return x.st, x.flush(^uint64(0))
}

type exporter struct {
	hdr     *capture.Header
	threads map[uint32]*Thread
	order   []uint32
	forks   map[[2]uint32]bool // (parent tid, child tid) → a thread, not a process
	born    map[uint32]bool    // threads the capture saw begin
	// cloneCall is the call (clone, clone3, fork, vfork) that made a thread.
	cloneCall map[uint32]string
	firstAt   map[uint32]uint64      // each thread's earliest event
	execs     map[uint32]*event.Proc // a thread's exec, until its execve's event
	w         *Writer
	st        *ExportStats
	q         outQueue
	seq       uint64
	// lateness is how far before the latest event read so far an event
	// of the capture can begin (the capture has a call when it returns,
	// so a blocking call comes late): the first pass measures it, and
	// the second writes an event once the capture is that far past it.
	lateness, seen uint64
	last           uint64 // time of the last event written
	// ctrs names the container of each event, as sysray's readers do;
	// ctrOf is the container of each thread's first event, execCtr the
	// container of a thread's exec until its execve's event.
	ctrs    *session.Captured
	ctrOf   map[uint32]filter.Container
	execCtr map[uint32]filter.Container
}

// container is the container of an event, as sysray's readers name it
// (session.Captured: the header's table, then the cgroup paths of execs).
func (x *exporter) container(e *event.Event) filter.Container {
	if x.ctrs == nil {
		x.ctrs = session.NewCaptured(x.hdr.Meta[session.MetaContainers])
	}
	x.ctrs.Observe(e)
	return x.ctrs.Container(e.PID, e.Cgroup)
}

// containers writes one container event (two for some, see
// containerEvents) for each container a thread of the export is in,
// before the events, at the time of the first one.
func (x *exporter) containers() error {
	seen := map[string]bool{}
	var first uint64 = ^uint64(0)
	for _, at := range x.firstAt {
		first = min(first, at)
	}
	if first == ^uint64(0) {
		first = 0
	} else if first > 0 {
		first-- // ahead of a thread's own return a nanosecond before its first event
	}
	for _, tid := range x.order {
		c, ok := x.ctrOf[tid]
		if !ok || seen[c.ID] || len(cgroupsOf(c)) == 0 {
			continue
		}
		seen[c.ID] = true
		x.st.Containers++
		for _, j := range containerEvents(c) {
			x.st.Events++
			// tid -1, as libsinsp writes them: a container event is no
			// thread's.
			if err := x.w.Event(0, x.time(first), ^uint64(0), evContainerJSONE, [][]byte{strParam(string(j))}); err != nil {
				return err
			}
		}
	}
	return nil
}

// each reads the capture's events; a capture cut short is read to its
// last whole block.
func (x *exporter) each(path string, fn func(*event.Event) error) error {
	r, err := capture.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	x.hdr = r.Header()
	var e event.Event
	for {
		if err := r.Next(&e); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			if errors.Is(err, capture.ErrTruncated) {
				x.st.Truncated = true
				return nil
			}
			return err
		}
		if err := fn(&e); err != nil {
			return err
		}
	}
}

// learn is the first pass: every thread the capture saw, as it was when
// first seen, which of them it saw begin (and by which call), and how
// many CPUs the events ran on. The threads that began before the capture
// make the process list; the others begin in the file with their own
// return from clone, as in a file libscap writes.
func (x *exporter) learn(path string) (uint32, error) {
	var cpus uint32
	add := func(tid, pid, ptid uint32, comm, exe string, args []string) {
		if _, ok := x.threads[tid]; ok || tid == 0 {
			return
		}
		x.threads[tid] = &Thread{TID: uint64(tid), PID: uint64(pid), PTID: uint64(ptid), Comm: comm, Exe: exe, Args: args}
		x.order = append(x.order, tid)
	}
	first := true
	var seen uint64
	forkSeen := map[uint32]uint64{} // the latest time read when a thread's fork was
	err := x.each(path, func(e *event.Event) error {
		if e.Kind != event.KindDrop {
			if e.Time < seen {
				x.lateness = max(x.lateness, seen-e.Time)
			}
			seen = max(seen, e.Time)
			if t, ok := x.firstAt[e.TID]; !ok || e.Time < t {
				x.firstAt[e.TID] = e.Time
			}
		}
		if e.Kind == event.KindFork {
			forkSeen[e.Proc.ChildTID] = seen
		}
		if first {
			first = false
			for _, p := range x.hdr.Procs {
				tids := p.Threads
				if len(tids) == 0 {
					tids = []uint32{p.PID}
				}
				for _, tid := range tids {
					add(tid, p.PID, p.PPID, p.Comm, p.Exe, p.Cmdline)
				}
			}
		}
		if e.Kind == event.KindDrop {
			return nil
		}
		cpus = max(cpus, e.CPU+1)
		c := x.container(e)
		if _, ok := x.ctrOf[e.TID]; !ok {
			x.ctrOf[e.TID] = c
		}
		switch e.Kind {
		case event.KindFork:
			// Before add: the child's entry is made from its parent.
			if parent := x.threads[e.TID]; parent != nil {
				add(e.Proc.ChildTID, e.Proc.ChildPID, e.TID, e.Proc.ChildComm, parent.Exe, parent.Args)
			} else {
				add(e.Proc.ChildTID, e.Proc.ChildPID, e.TID, e.Proc.ChildComm, "", nil)
			}
			x.born[e.Proc.ChildTID] = true
			if e.Proc.Thread {
				x.forks[[2]uint32{e.TID, e.Proc.ChildTID}] = true
			}
		case event.KindSyscall:
			if sc := &e.Syscall; sc.Ret > 0 && !sc.Unfinished {
				switch name := x.syscallName(sc.Nr); name {
				case "clone", "clone3", "fork", "vfork":
					x.cloneCall[uint32(sc.Ret)] = name
				}
			}
		}
		add(e.TID, e.PID, 0, e.Comm, "", nil)
		return nil
	})
	// A capture with no events still has its process table.
	if first && x.hdr != nil {
		for _, p := range x.hdr.Procs {
			add(p.PID, p.PID, p.PPID, p.Comm, p.Exe, p.Cmdline)
		}
	}
	// Threads of the header's table that did nothing are where the table
	// puts their process.
	for _, tid := range x.order {
		t := x.threads[tid]
		c, ok := x.ctrOf[tid]
		if !ok && x.hdr != nil {
			if x.ctrs == nil {
				x.ctrs = session.NewCaptured(x.hdr.Meta[session.MetaContainers])
			}
			c = x.ctrs.Container(uint32(t.PID), x.procCgroup(uint32(t.PID)))
			x.ctrOf[tid] = c
		}
		t.Cgroups = cgroupsOf(c)
	}
	// A child's own return goes before its first event, which may come
	// before its fork (a capture imported from strace has the fork when
	// the parent's clone returns).
	for child, at := range forkSeen {
		if t, ok := x.firstAt[child]; ok && t < at+1 {
			x.lateness = max(x.lateness, at+1-t)
		}
	}
	return max(cpus, 1), err
}

// childReturn writes a new thread's own return from the call that made
// it (0, in the child), before anything the thread does. sysdig takes the
// thread from it; without it, the parent's return, which may come after
// the child has run and exec'd, would make the child anew from the parent.
func (x *exporter) childReturn(e *event.Event) error {
	child := x.threads[e.Proc.ChildTID]
	if child == nil {
		return nil
	}
	name := x.cloneCall[e.Proc.ChildTID]
	if name == "" {
		name = "clone"
	}
	typ, ok := writePairs[name]
	if !ok {
		typ = writePairs["clone"]
	}
	typ++
	ps := writeEvents[typ].params
	params := make([][]byte, len(ps))
	exe := child.Exe
	if len(child.Args) > 0 {
		exe = child.Args[0]
	}
	for i, p := range ps {
		params[i] = emptyParam(p.typ)
		switch p.name {
		case "exe":
			params[i] = strParam(exe)
		case "args":
			params[i] = []byte(argBytes(child.Args, 1))
		case "comm":
			params[i] = strParam(child.Comm)
		case "cgroups":
			params[i] = cgroupsBytes(child.Cgroups)
		case "tid", "vtid":
			params[i] = intParam(p.typ, child.TID)
		case "pid", "vpid":
			params[i] = intParam(p.typ, child.PID)
		case "ptid":
			params[i] = intParam(p.typ, uint64(e.TID))
		case "flags":
			if e.Proc.Thread {
				params[i] = intParam(p.typ, ppmCLThread)
			}
		}
	}
	x.st.ChildReturns++
	ce := *e
	ce.TID, ce.PID = e.Proc.ChildTID, e.Proc.ChildPID
	// At the fork, or a nanosecond before the thread's first event if
	// that came first: ahead of the event's enter at the same time.
	at := e.Time
	if t, ok := x.firstAt[e.Proc.ChildTID]; ok && t <= at && t > 0 {
		at = t - 1
	}
	return x.push(x.time(at), &ce, typ, params)
}

func (x *exporter) time(t uint64) uint64 { return uint64(int64(t) + x.hdr.BootTime) }

func (x *exporter) syscallName(nr uint32) string {
	if int(nr) < len(x.hdr.Syscalls) && x.hdr.Syscalls[nr] != "" {
		return x.hdr.Syscalls[nr]
	}
	return event.SyscallName(x.hdr.Arch, nr)
}

// event writes what an event of the capture becomes, and then every
// queued event that nothing still to come can precede.
func (x *exporter) event(e *event.Event) error {
	if err := x.write(e); err != nil {
		return err
	}
	if e.Kind == event.KindDrop {
		return nil
	}
	x.seen = max(x.seen, e.Time)
	if x.seen > x.lateness {
		if err := x.flush(x.time(x.seen - x.lateness)); err != nil {
			return err
		}
	}
	// A capture with calls that blocked long holds many events back:
	// past maxQueued, write the earliest anyway.
	for len(x.q) > maxQueued {
		if err := x.pop(); err != nil {
			return err
		}
	}
	return nil
}

// maxQueued bounds the events held back for their time (about 150 bytes
// each with their queue entry, some 40 MB): those of 130,000 calls made
// while another call blocked.
const maxQueued = 1 << 18

func (x *exporter) write(e *event.Event) error {
	if e.Kind != event.KindExec && e.Kind != event.KindDrop {
		x.container(e) // the table learns from every event, as a reader's does
	}
	switch e.Kind {
	case event.KindSyscall:
		return x.call(e)
	case event.KindFork:
		return x.childReturn(e)
	case event.KindSignalDeliver, event.KindPageFault:
		return x.other(e)
	case event.KindExec:
		p := e.Proc
		p.Argv = append([]string(nil), p.Argv...)
		x.execs[e.TID] = &p
		x.execCtr[e.TID] = x.container(e)
		return nil
	case event.KindExit:
		code, sig, core := e.Proc.Status()
		ps := writeEvents[evProcexit1E].params
		params := make([][]byte, len(ps))
		for i, p := range ps {
			switch p.name {
			case "status":
				params[i] = intParam(p.typ, uint64(int64(e.Proc.ExitCode)))
			case "ret":
				params[i] = intParam(p.typ, uint64(int64(code)))
			case "sig":
				params[i] = intParam(p.typ, uint64(sig))
			case "core":
				if core {
					params[i] = intParam(p.typ, 1)
				} else {
					params[i] = intParam(p.typ, 0)
				}
			default:
				params[i] = emptyParam(p.typ)
			}
		}
		x.st.Exits++
		return x.push(x.time(e.Time), e, evProcexit1E, params)
	}
	x.st.Left[e.Kind.String()]++
	return nil
}

// other writes a signal's delivery and a page fault as the tracer's own
// events.
func (x *exporter) other(e *event.Event) error {
	typ := uint16(evSignalDeliverE)
	if e.Kind == event.KindPageFault {
		typ = evPageFaultE
	}
	ps := writeEvents[typ].params
	params := make([][]byte, len(ps))
	for i, p := range ps {
		params[i] = emptyParam(p.typ)
		switch p.name {
		case "spid":
			// Only a signal a process sent (si_code <= 0) has a sender;
			// the kernel's own (a fault's) has si_addr in its place.
			if e.Signal.Code <= 0 {
				params[i] = intParam(p.typ, uint64(e.Signal.SenderPID))
			}
		case "dpid":
			params[i] = intParam(p.typ, uint64(e.TID))
		case "sig":
			params[i] = intParam(p.typ, uint64(e.Signal.Sig))
		case "addr":
			params[i] = intParam(p.typ, e.Fault.Addr)
		case "ip":
			params[i] = intParam(p.typ, e.Fault.IP)
		case "error":
			var flags uint64
			for _, f := range ppmFault {
				if e.Fault.Error&f.x86 != 0 {
					flags |= f.ppm
				}
			}
			params[i] = intParam(p.typ, flags)
		}
	}
	if e.Kind == event.KindPageFault {
		x.st.Faults++
	} else {
		x.st.Signals++
	}
	return x.push(x.time(e.Time), e, typ, params)
}

// call writes a syscall's enter event now and queues its exit for its
// time.
func (x *exporter) call(e *event.Event) error {
	sc := &e.Syscall
	name := x.syscallName(sc.Nr)
	typ, ok := writePairs[name]
	if !ok {
		typ = evGenericE
		x.st.Generic++
	}
	spec := event.Lookup(x.hdr.Arch, sc.Nr)
	if err := x.push(x.time(e.Time), e, typ, x.params(typ, name, spec, e, false)); err != nil {
		return err
	}
	if sc.Unfinished {
		x.st.Unfinished++
		return nil
	}
	x.st.Calls++
	params := x.params(typ+1, name, spec, e, true)
	x.effects(typ+1, name, e, params)
	return x.push(x.time(e.Time+sc.Latency), e, typ+1, params)
}

// exportNames maps more of sysray's argument names to the event table's
// (beyond argNames, which the import shares).
var exportNames = map[string]string{"sockfd": "fd", "len": "size"}

// sockaddrParam encodes a struct sockaddr as scap keeps one: its family
// (PPM_AF_*, the Linux numbers for these three), then the address and the
// port in host order, or a Unix socket's path and its NUL.
func sockaddrParam(b []byte) []byte {
	if len(b) < 2 {
		return nil
	}
	switch fam := binary.LittleEndian.Uint16(b); fam {
	case 2: // AF_INET
		if len(b) >= 8 {
			out := append([]byte{2}, b[4:8]...)
			return binary.LittleEndian.AppendUint16(out, binary.BigEndian.Uint16(b[2:]))
		}
	case 10: // AF_INET6
		if len(b) >= 24 {
			out := append([]byte{10}, b[8:24]...)
			return binary.LittleEndian.AppendUint16(out, binary.BigEndian.Uint16(b[2:]))
		}
	case 1: // AF_UNIX
		path := b[2:]
		if i := bytes.IndexByte(path, 0); i >= 0 {
			path = path[:i]
		}
		return append(append([]byte{1}, path...), 0)
	}
	return nil
}

// specArg is the raw value of the call's argument that scap names name,
// where sysray keeps it as a number.
func specArg(spec *event.Spec, sc *event.Syscall, name string) (uint64, bool) {
	if spec == nil {
		return 0, false
	}
	for i, a := range spec.Args {
		if i >= 6 {
			break
		}
		switch a.Kind {
		case event.ArgPath, event.ArgString, event.ArgSockaddr, event.ArgSockaddrOut:
			continue
		}
		if a.Name == name || argNames[a.Name] == name || exportNames[a.Name] == name || (name == "dirfd" && a.Kind == event.ArgDirFd) {
			v := sc.Args[i]
			// A descriptor is a C int: AT_FDCWD and -1 arrive as 32
			// bits, and scap keeps them as 64-bit negatives.
			if (a.Kind == event.ArgFd || a.Kind == event.ArgDirFd) && v>>32 == 0 {
				v = uint64(int64(int32(v)))
			}
			return v, true
		}
	}
	return 0, false
}

// specFlagArg is the argument of a flags parameter and its kind.
func specFlagArg(spec *event.Spec, sc *event.Syscall, name string) (event.ArgKind, uint64, bool) {
	if spec == nil {
		return 0, 0, false
	}
	for i, a := range spec.Args {
		if i < 6 && (a.Name == name || argNames[a.Name] == name || exportNames[a.Name] == name) {
			return a.Kind, sc.Args[i], true
		}
	}
	return 0, 0, false
}

// params fills an event's parameters from the call: the return value,
// descriptors, sizes and other plain numbers by name, paths in order;
// everything else empty, at its type's width.
func (x *exporter) params(typ uint16, name string, spec *event.Spec, e *event.Event, exit bool) [][]byte {
	sc := &e.Syscall
	ps := writeEvents[typ].params
	out := make([][]byte, len(ps))
	var paths []string
	if spec != nil {
		for i, a := range spec.Args {
			if i < 6 && a.Kind == event.ArgPath && sc.Data[i] != nil {
				paths = append(paths, string(sc.Data[i]))
			}
		}
	}
	for i, p := range ps {
		out[i] = emptyParam(p.typ)
		switch {
		case exit && i == 0 && (p.name == "res" || p.name == "fd" || p.name == "ret") && paramWidth(p.typ) > 0:
			out[i] = intParam(p.typ, uint64(sc.Ret))
		case p.typ == ptSyscallID:
			out[i] = intParam(p.typ, uint64(writeSC[name]))
		case p.name == "nativeID":
			out[i] = intParam(p.typ, uint64(sc.Nr))
		case p.typ == ptFlags32 && paramWidth(p.typ) > 0:
			if k, v, ok := specFlagArg(spec, sc, p.name); ok {
				if toScap, _ := flagConv(k); toScap != nil {
					out[i] = intParam(p.typ, toScap(v))
				}
			}
		case p.typ == ptSockaddr:
			if spec != nil {
				for j, a := range spec.Args {
					if j < 6 && (a.Kind == event.ArgSockaddr || a.Kind == event.ArgSockaddrOut) && sc.Data[j] != nil {
						out[i] = sockaddrParam(sc.Data[j])
						break
					}
				}
			}
		case isPath(p.name, p.typ):
			if len(paths) > 0 {
				out[i] = strParam(paths[0])
				paths = paths[1:]
			}
		case integral(p.typ):
			if v, ok := specArg(spec, sc, p.name); ok {
				out[i] = intParam(p.typ, v)
			}
		}
	}
	return out
}

// effects fills in the process parameters of a successful execve's or
// clone's exit (what sysdig's thread table takes from them).
func (x *exporter) effects(typ uint16, name string, e *event.Event, params [][]byte) {
	sc := &e.Syscall
	if sc.Failed() {
		return
	}
	t := x.threads[e.TID]
	var exe string
	var args []string
	var set func(pname string, v []byte)
	ps := writeEvents[typ].params
	set = func(pname string, v []byte) {
		for i, p := range ps {
			if p.name == pname {
				params[i] = v
			}
		}
	}
	num := func(pname string, v uint64) {
		for i, p := range ps {
			if p.name == pname && paramWidth(p.typ) > 0 {
				params[i] = intParam(p.typ, v)
			}
		}
	}
	switch name {
	case "execve", "execveat":
		// libsinsp looks for the thread's container anew at an exec, in
		// this event's cgroups: left empty, it moves the thread to the
		// host.
		var cg []string
		if ex := x.execs[e.TID]; ex != nil {
			delete(x.execs, e.TID)
			exe, args = ex.Filename, ex.Argv
			if t != nil {
				t.Exe, t.Args = ex.Filename, args
			}
			cg = cgroupsOf(x.execCtr[e.TID])
			delete(x.execCtr, e.TID)
		} else {
			// The exec's own event was not caught (it ran while the
			// probes attached, or was lost): the new program is not
			// known, but the thread's container is the exit's.
			if t != nil {
				exe, args = t.Exe, t.Args
			}
			cg = cgroupsOf(x.container(e))
		}
		if len(args) > 0 {
			exe = args[0]
		}
		set("cgroups", cgroupsBytes(cg))
		if t != nil {
			t.Comm, t.Cgroups = e.Comm, cg
		}
	case "clone", "clone3", "fork", "vfork":
		if sc.Ret <= 0 {
			return
		}
		if t != nil {
			exe, args = t.Exe, t.Args
			if len(args) > 0 {
				exe = args[0]
			}
		}
		if x.forks[[2]uint32{e.TID, uint32(sc.Ret)}] {
			// With the flags params filled from clone's argument.
			for i, p := range ps {
				if p.name == "flags" && len(params[i]) == 4 {
					params[i] = intParam(p.typ, uint64(binary.LittleEndian.Uint32(params[i]))|ppmCLThread)
				}
			}
		}
		// The child's: libsinsp makes the child from the parent's return
		// when that comes first.
		if child := x.threads[uint32(sc.Ret)]; child != nil {
			set("cgroups", cgroupsBytes(child.Cgroups))
		} else if t != nil {
			set("cgroups", cgroupsBytes(t.Cgroups))
		}
		num("vtid", uint64(e.TID))
		num("vpid", uint64(e.PID))
	default:
		return
	}
	set("exe", strParam(exe))
	set("args", []byte(argBytes(args, 1)))
	set("comm", strParam(e.Comm))
	num("tid", uint64(e.TID))
	num("pid", uint64(e.PID))
	if t != nil {
		num("ptid", t.PTID)
	}
}

// push queues an event for its time: an exit is written once the
// capture's events (in entry order) have passed it.
func (x *exporter) push(ts uint64, e *event.Event, typ uint16, params [][]byte) error {
	body, err := encodeEvent(nil, uint16(e.CPU), ts, uint64(e.TID), typ, params)
	if err != nil {
		return fmt.Errorf("scap: %s of thread %d: %w", writeEvents[typ].name, e.TID, err)
	}
	x.seq++
	heap.Push(&x.q, queued{ts: ts, seq: x.seq, body: body})
	return nil
}

// flush writes the queued events earlier than ts.
func (x *exporter) flush(ts uint64) error {
	for len(x.q) > 0 && (x.q[0].ts < ts || ts == ^uint64(0)) {
		if err := x.pop(); err != nil {
			return err
		}
	}
	return nil
}

func (x *exporter) pop() error {
	it := heap.Pop(&x.q).(queued)
	if it.ts < x.last {
		x.st.OutOfOrder++
	}
	x.last = it.ts
	x.st.Events++
	return x.w.eventBody(it.body)
}

type queued struct {
	ts, seq uint64
	body    []byte
}

// outQueue orders events by time, then by when they were queued (an
// enter before its exit at the same nanosecond).
type outQueue []queued

func (q outQueue) Len() int { return len(q) }
func (q outQueue) Less(i, j int) bool {
	if q[i].ts != q[j].ts {
		return q[i].ts < q[j].ts
	}
	return q[i].seq < q[j].seq
}
func (q outQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *outQueue) Push(v any)   { *q = append(*q, v.(queued)) }
func (q *outQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}

// WrittenAs says how Export writes a call of the syscall name, and so how
// readers of the file name it: the name sysdig 0.29 gives it (its event
// pair's name, which is not always the syscall's: pread64 is "pread",
// pipe2 "pipe"; a generic event's syscall name; "<unknown>" for a syscall
// that libscap's table lacked), the name sysray's own import gives it
// back, and whether the exit carries the return value (the generic exit
// does not, so readers cannot tell a failed generic call).
func WrittenAs(name string) (sysdig, imported string, ret bool) {
	if typ, ok := writePairs[name]; ok {
		ev := writeEvents[typ+1]
		ret = len(ev.params) > 0 && (ev.params[0].name == "res" || ev.params[0].name == "fd")
		sysdig, imported = ev.name, ev.name
		if a, ok := aliases[imported]; ok {
			imported = a
		}
		return sysdig, imported, ret
	}
	if code, ok := writeSC[name]; ok && code != 0 {
		return writeSCNames[code], name, false
	}
	return "<unknown>", name, false
}

// procCgroup is the cgroup of a process of the header's table.
func (x *exporter) procCgroup(pid uint32) uint64 {
	for i := range x.hdr.Procs {
		if x.hdr.Procs[i].PID == pid {
			return x.hdr.Procs[i].Cgroup
		}
	}
	return 0
}
