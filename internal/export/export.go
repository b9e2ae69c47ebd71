package export

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/output"
)

// Export reads src twice and writes its timeline to sink.
func Export(src Source, sink Sink, opt Options) (Stats, error) {
	bucket := uint64(cmp.Or(opt.RateBucket, DefaultRateBucket))
	if opt.RateBucket < 0 {
		return Stats{}, errors.New("export: the rate bucket must be positive")
	}
	p := newPlan(&src, bucket)
	if err := src.Events(func(e *event.Event) error { p.observe(&src, e); return nil }); err != nil {
		return Stats{}, err
	}
	p.finish()

	var st Stats
	for _, t := range p.tracks {
		switch t.Kind {
		case TrackProcess:
			st.Processes++
		case TrackThread:
			st.Threads++
		case TrackLane:
			st.Lanes++
		}
	}
	st.WakeFlows = p.wakeFlows
	if err := sink.Begin(Header{BootTime: src.BootTime, First: p.first, Last: p.last, RateBucket: bucket}, p.tracks); err != nil {
		return st, err
	}
	w := &walker{p: p, arch: src.Arch, sink: sink, st: &st, pending: map[sigKey]uint64{}, execs: map[threadID]*Item{}}
	if err := w.counters(); err != nil {
		return st, err
	}
	if err := src.Events(w.event); err != nil {
		return st, err
	}
	held := slices.SortedFunc(maps.Keys(w.execs), func(a, b threadID) int {
		return cmp.Or(cmp.Compare(a.pid, b.pid), cmp.Compare(a.tid, b.tid))
	})
	for _, id := range held {
		if err := w.flushExec(id); err != nil {
			return st, err
		}
	}
	return st, sink.End()
}

var errChanged = errors.New("export: the capture changed between its two readings")

// sigKey matches a signal's delivery to its generation.
type sigKey struct {
	target uint32 // tid, or pid for a signal sent to the whole process
	sig    int32
	group  bool
}

// walker is the second pass: events in, items out.
type walker struct {
	p       *plan
	arch    event.Arch
	sink    Sink
	st      *Stats
	it      Item
	pending map[sigKey]uint64 // signal flows generated and not yet delivered
	// execs holds each thread's exec until its execve has been written: a
	// reader hands the exec over first (the call returns after it), and
	// the two may share a timestamp, which a viewer orders by file order,
	// so the exec would land beside its execve rather than inside it.
	execs map[threadID]*Item
}

func (w *walker) flushExec(id threadID) error {
	it := w.execs[id]
	delete(w.execs, id)
	w.st.Instants++
	return w.sink.Item(it)
}

// counters writes each process's syscall rate: the rate of every bucket
// with calls, and a zero after each run of them, so the line drops back to
// zero where the process made no calls.
func (w *walker) counters() error {
	pids := make([]uint32, 0, len(w.p.procs))
	for pid, pp := range w.p.procs {
		if pp.counter != nil {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	perSec := int64(1e9 / w.p.bucket)
	for _, pid := range pids {
		pp := w.p.procs[pid]
		bs := make([]uint64, 0, len(pp.buckets))
		for b := range pp.buckets {
			bs = append(bs, b)
		}
		slices.Sort(bs)
		for i, b := range bs {
			if err := w.counter(pp.counter, b*w.p.bucket, pp.buckets[b]*perSec); err != nil {
				return err
			}
			if i+1 == len(bs) || bs[i+1] != b+1 {
				if err := w.counter(pp.counter, (b+1)*w.p.bucket, 0); err != nil {
					return err
				}
			}
		}
		pp.buckets = nil
	}
	return nil
}

func (w *walker) counter(t *Track, at uint64, v int64) error {
	w.st.Counters++
	w.it = Item{Kind: Counter, Track: t, Time: at, Value: v}
	return w.sink.Item(&w.it)
}

func (w *walker) event(e *event.Event) error {
	it := &w.it
	args := it.Args[:0]
	*it = Item{Kind: Instant, Time: e.Time}
	if e.Kind == event.KindDrop {
		if w.p.global == nil {
			return errChanged
		}
		it.Track, it.Cat, it.Name = w.p.global, "sysray", "lost events"
		it.Args = append(args, Arg{Name: "cpu", Kind: ArgUint, Uint: uint64(e.CPU)}, Arg{Name: "count", Kind: ArgUint, Uint: e.Drop.Count})
		w.st.Instants++
		return w.sink.Item(it)
	}
	t := w.p.threads[threadID{e.PID, e.TID}]
	if t == nil || t.track == nil {
		return fmt.Errorf("%w: thread %d is new", errChanged, e.TID)
	}
	it.Track = t.track
	switch e.Kind {
	case event.KindSyscall:
		s := &e.Syscall
		key := callKey{threadID{e.PID, e.TID}, e.Time, e.End()}
		if ls := w.p.lane[key]; len(ls) > 0 {
			if ls[0] > 0 {
				it.Track = t.lanes[ls[0]-1]
			}
			w.p.lane[key] = ls[1:]
		}
		if s.Latency > 0 {
			it.Kind, it.Dur = Slice, s.Latency
		}
		it.Cat, it.Name = "syscall", event.SyscallName(w.arch, s.Nr)
		it.Args = syscallArgs(args, w.arch, s)
		// Only the first of calls with the same times carries their flows.
		it.FlowOut, it.FlowIn = w.p.flowOut[key], w.p.flowIn[key]
		delete(w.p.flowOut, key)
		delete(w.p.flowIn, key)
		w.st.Slices++
		if err := w.sink.Item(it); err != nil {
			return err
		}
		if _, ok := w.execs[key.thread]; ok {
			return w.flushExec(key.thread)
		}
		return nil
	case event.KindPageFault:
		f := &e.Fault
		it.Cat, it.Name = "fault", "page_fault"
		args = append(args, hexArg("addr", f.Addr), hexArg("ip", f.IP), Arg{Name: "error", Kind: ArgString, Str: event.FaultFlags(f.Error)})
		if f.SP != 0 {
			args = append(args, hexArg("sp", f.SP))
		}
		it.Args = args
	case event.KindVsyscall:
		it.Cat, it.Name = "fault", "vsyscall "+event.VsyscallName(e.Vsyscall.Nr)+"()"
		it.Args = append(args, hexArg("caller", e.Vsyscall.CallerIP))
	case event.KindSignalGenerate, event.KindSignalDeliver:
		w.signal(e, args)
	case event.KindFork:
		it.Cat, it.Name = "process", "fork"
		if e.Proc.Thread {
			it.Name = "clone thread"
		}
		it.Args = append(args, Arg{Name: "child_pid", Kind: ArgUint, Uint: uint64(e.Proc.ChildPID)},
			Arg{Name: "child_tid", Kind: ArgUint, Uint: uint64(e.Proc.ChildTID)},
			Arg{Name: "child_comm", Kind: ArgString, Str: e.Proc.ChildComm})
	case event.KindExec:
		it.Cat, it.Name = "process", "exec"
		args = append(args, Arg{Name: "filename", Kind: ArgString, Str: e.Proc.Filename},
			Arg{Name: "argv", Kind: ArgString, Str: strings.Join(e.Proc.Argv, " ")})
		if e.Proc.ArgvTruncated {
			args = append(args, Arg{Name: "argv_truncated", Kind: ArgBool, Bool: true})
		}
		if e.Proc.OldTID != 0 && e.Proc.OldTID != e.TID {
			args = append(args, Arg{Name: "old_tid", Kind: ArgUint, Uint: uint64(e.Proc.OldTID)})
		}
		id := threadID{e.PID, e.TID}
		if _, ok := w.execs[id]; ok {
			if err := w.flushExec(id); err != nil {
				return err
			}
		}
		held := *it
		held.Args = slices.Clone(args)
		w.execs[id] = &held
		return nil
	case event.KindExit:
		code, sig, core := e.Proc.Status()
		it.Cat, it.Name = "process", "exit"
		args = append(args, Arg{Name: "status", Kind: ArgString, Str: output.ExitText(&e.Proc)},
			Arg{Name: "code", Kind: ArgInt, Int: int64(code)},
			Arg{Name: "group_dead", Kind: ArgBool, Bool: e.Proc.GroupDead})
		if sig != 0 {
			args = append(args, Arg{Name: "signal", Kind: ArgString, Str: sigName(int32(sig))}, Arg{Name: "core_dumped", Kind: ArgBool, Bool: core})
		}
		it.Args = args
	default:
		return nil // a kind this build does not know
	}
	w.st.Instants++
	return w.sink.Item(it)
}

// signal fills in a signal instant and links a generation to its delivery.
func (w *walker) signal(e *event.Event, args []Arg) {
	it, s := &w.it, &e.Signal
	name := sigName(s.Sig)
	args = append(args, Arg{Name: "signal", Kind: ArgString, Str: name},
		Arg{Name: "code", Kind: ArgString, Str: cmp.Or(event.SigCodeName(int(s.Sig), int(s.Code)), strconv.Itoa(int(s.Code)))})
	switch s.Sig {
	case 4, 5, 7, 8, 11: // SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV carry a fault address
		args = append(args, hexArg("addr", s.Addr))
	}
	if s.Sig == event.SIGSYS && s.Code == event.SysSeccomp {
		args = append(args, Arg{Name: "refused_syscall", Kind: ArgString, Str: s.SeccompCall()})
	}
	it.Cat = "signal"
	if e.Kind == event.KindSignalGenerate {
		it.Name = "signal_generate " + name
		args = append(args, Arg{Name: "sender_pid", Kind: ArgUint, Uint: uint64(s.SenderPID)},
			Arg{Name: "target_pid", Kind: ArgUint, Uint: uint64(s.TargetPID)},
			Arg{Name: "target_tid", Kind: ArgUint, Uint: uint64(s.TargetTID)},
			Arg{Name: "group", Kind: ArgBool, Bool: s.Group})
		if s.Result != 0 {
			args = append(args, Arg{Name: "result", Kind: ArgInt, Int: int64(s.Result)})
		} else {
			key := sigKey{s.TargetTID, s.Sig, false}
			if s.Group || s.TargetTID == 0 {
				key = sigKey{s.TargetPID, s.Sig, true}
			}
			w.p.nextFlow++
			w.pending[key] = w.p.nextFlow
			it.FlowOut = []uint64{w.p.nextFlow}
		}
	} else {
		it.Name = "signal_deliver " + name
		args = append(args, Arg{Name: "handler", Kind: ArgString, Str: handlerName(s.Handler)})
		for _, key := range []sigKey{{e.TID, s.Sig, false}, {e.PID, s.Sig, true}} {
			if id, ok := w.pending[key]; ok {
				delete(w.pending, key)
				it.FlowIn = []uint64{id}
				w.st.SignalFlows++
				break
			}
		}
	}
	it.Args = args
}

func sigName(sig int32) string {
	if n := event.SignalName(int(sig)); n != "" {
		return n
	}
	return "SIG" + strconv.Itoa(int(sig))
}

func handlerName(h uint64) string {
	switch h {
	case 0:
		return "SIG_DFL"
	case 1:
		return "SIG_IGN"
	}
	return "0x" + strconv.FormatUint(h, 16)
}

func hexArg(name string, v uint64) Arg {
	return Arg{Name: name, Kind: ArgString, Str: "0x" + strconv.FormatUint(v, 16)}
}
