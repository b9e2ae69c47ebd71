package output

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sysray/sysray/internal/event"
)

// Record is the JSON form of an event (docs/json.md). Fields that do not
// apply to the event's type are omitted.
type Record struct {
	Time   string `json:"time"` // RFC 3339, nanoseconds
	TS     uint64 `json:"ts"`   // CLOCK_MONOTONIC ns
	Type   string `json:"type"` // syscall name, or the event kind
	Kind   string `json:"kind"`
	CPU    uint32 `json:"cpu"`
	PID    uint32 `json:"pid"`
	TID    uint32 `json:"tid"`
	Comm   string `json:"comm"`
	Cgroup uint64 `json:"cgroup"`
	Text   string `json:"text"` // the human line's body

	Container *Container `json:"container,omitempty"` // absent on the host

	Syscall *SyscallJSON `json:"syscall,omitempty"`
	Fault   *FaultJSON   `json:"fault,omitempty"`
	Vsys    *VsysJSON    `json:"vsyscall,omitempty"`
	Signal  *SignalJSON  `json:"signal,omitempty"`
	Fork    *ForkJSON    `json:"fork,omitempty"`
	Exec    *ExecJSON    `json:"exec,omitempty"`
	Exit    *ExitJSON    `json:"exit,omitempty"`
	Drop    *DropJSON    `json:"drop,omitempty"`
	Reclaim *ReclaimJSON `json:"reclaim,omitempty"`
	CPUWait *CPUWaitJSON `json:"cpu_wait,omitempty"`
}

type ArgJSON struct {
	Name      string `json:"name"`
	Raw       uint64 `json:"raw"`
	Value     string `json:"value"`
	Truncated bool   `json:"truncated,omitempty"`
}

type SyscallJSON struct {
	Name       string      `json:"name"`
	Nr         uint32      `json:"nr"`
	Args       []ArgJSON   `json:"args"`
	Ret        int64       `json:"ret"`
	Errno      string      `json:"errno,omitempty"`
	LatencyNS  uint64      `json:"latency_ns"`
	QueuedNS   uint64      `json:"queued_ns,omitempty"`
	Unfinished bool        `json:"unfinished,omitempty"`
	Approx     bool        `json:"latency_approx,omitempty"`
	Refused    bool        `json:"refused,omitempty"`
	UserStack  []string    `json:"user_stack,omitempty"`
	Sleeps     []SleepJSON `json:"sleeps,omitempty"`
}

// SleepJSON is one place a slow syscall waited off CPU.
type SleepJSON struct {
	DurationNS uint64     `json:"duration_ns"`
	Count      uint32     `json:"count"`
	Preempted  bool       `json:"preempted,omitempty"`
	Stack      []string   `json:"stack"`
	Waker      *WakerJSON `json:"waker,omitempty"`
}

// WakerJSON is the thread that last woke a sleeping syscall.
type WakerJSON struct {
	PID   uint32   `json:"pid"`
	TID   uint32   `json:"tid"`
	Comm  string   `json:"comm"`
	Stack []string `json:"stack,omitempty"`
}

func frameTexts(fs []event.Frame) []string {
	if len(fs) == 0 {
		return nil
	}
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = FrameText(f)
	}
	return out
}

type FaultJSON struct {
	Addr  uint64 `json:"addr"`
	IP    uint64 `json:"ip"`
	Error uint64 `json:"error"`
	Flags string `json:"flags"`
	SP    uint64 `json:"sp,omitempty"`
}

type VsysJSON struct {
	Call     string `json:"call"`
	Nr       uint32 `json:"nr"`
	CallerIP uint64 `json:"caller_ip"`
}

type SignalJSON struct {
	Sig       int32  `json:"sig"`
	Name      string `json:"name"`
	Code      int32  `json:"code"`
	CodeName  string `json:"code_name"`
	Addr      uint64 `json:"addr,omitempty"`
	SenderPID uint32 `json:"sender_pid,omitempty"`
	TargetPID uint32 `json:"target_pid"`
	TargetTID uint32 `json:"target_tid"`
	Group     bool   `json:"group,omitempty"`
	Result    int32  `json:"result,omitempty"`
	Handler   string `json:"handler,omitempty"`
	// SIGSYS from seccomp only: the refused call.
	Syscall   string `json:"syscall,omitempty"`
	SyscallNr *int32 `json:"syscall_nr,omitempty"`
}

type ForkJSON struct {
	ChildPID  uint32 `json:"child_pid"`
	ChildTID  uint32 `json:"child_tid"`
	ChildComm string `json:"child_comm"`
	Thread    bool   `json:"thread"`
}

type ExecJSON struct {
	Filename      string   `json:"filename"`
	Argv          []string `json:"argv"`
	ArgvTruncated bool     `json:"argv_truncated,omitempty"`
	ArgvEscaped   bool     `json:"argv_escaped,omitempty"`
	OldTID        uint32   `json:"old_tid"`
	CgroupPath    string   `json:"cgroup_path,omitempty"`
}

// jsonArgv returns argv for JSON, and whether it is escaped. Arguments are
// bytes: encoding/json would turn those that are not UTF-8 into U+FFFD and
// lose them. When any is not UTF-8, every argument is written as the text
// output quotes it, without the quotes (a Go string literal's body: \xff
// for such a byte, \\ for a backslash), so that strconv.Unquote gives each
// back exactly.
func jsonArgv(argv []string) ([]string, bool) {
	valid := true
	for _, a := range argv {
		if !utf8.ValidString(a) {
			valid = false
			break
		}
	}
	if valid {
		return argv, false
	}
	out := make([]string, len(argv))
	for i, a := range argv {
		q := strconv.Quote(a)
		out[i] = q[1 : len(q)-1]
	}
	return out, true
}

type ExitJSON struct {
	Status     int32  `json:"status"` // raw wait status
	Code       int    `json:"code"`
	Signal     string `json:"signal,omitempty"`
	CoreDumped bool   `json:"core_dumped,omitempty"`
	GroupDead  bool   `json:"group_dead"`
}

type DropJSON struct {
	Count uint64 `json:"count"`
}

// ReclaimJSON is one pass of memory-cgroup reclaim. Syscall is empty when
// the thread was in none (a page fault in user mode).
type ReclaimJSON struct {
	DurationNS uint64   `json:"duration_ns"`
	Pages      uint64   `json:"pages"`
	Syscall    string   `json:"syscall,omitempty"`
	Stack      []string `json:"stack,omitempty"`
	// What: "memcg reclaim", "direct reclaim" or "direct compaction".
	What      string `json:"what"`
	Order     int16  `json:"order,omitempty"`
	Status    int32  `json:"status,omitempty"`
	FaultAddr uint64 `json:"fault_addr,omitempty"`
}

// JSON converts an event to its JSON record.
func JSON(e *event.Event, arch event.Arch, boot int64) *Record {
	r := &Record{
		Time:   time.Unix(0, boot+int64(e.Time)).UTC().Format(time.RFC3339Nano),
		TS:     e.Time,
		Type:   e.Kind.String(),
		Kind:   e.Kind.String(),
		CPU:    e.CPU,
		PID:    e.PID,
		TID:    e.TID,
		Comm:   e.Comm,
		Cgroup: e.Cgroup,
		Text:   Body(e, arch),
	}
	switch e.Kind {
	case event.KindSyscall:
		s := &e.Syscall
		sj := &SyscallJSON{Name: event.SyscallName(arch, s.Nr), Nr: s.Nr, Ret: s.Ret, LatencyNS: s.Latency, QueuedNS: s.Queued, Unfinished: s.Unfinished, Approx: s.Approx, Refused: s.Refused, Args: []ArgJSON{}}
		if s.Failed() {
			sj.Errno = event.ErrnoName(int(-s.Ret))
		}
		if spec := event.Lookup(arch, s.Nr); spec != nil {
			for i, a := range spec.Args {
				if i >= 6 {
					break
				}
				sj.Args = append(sj.Args, ArgJSON{Name: a.Name, Raw: s.Args[i], Value: event.FormatArg(a, s.Args[i], s.Data[i], s.Truncated[i]), Truncated: s.Truncated[i]})
			}
		}
		sj.UserStack = frameTexts(s.UserStack)
		for _, sl := range s.Sleeps {
			j := SleepJSON{DurationNS: sl.Duration, Count: sl.Count, Preempted: sl.Preempted, Stack: frameTexts(sl.Stack)}
			if j.Stack == nil {
				j.Stack = []string{}
			}
			if sl.WakerPID != 0 || sl.WakerComm != "" {
				j.Waker = &WakerJSON{PID: sl.WakerPID, TID: sl.WakerTID, Comm: sl.WakerComm, Stack: frameTexts(sl.WakerStack)}
			}
			sj.Sleeps = append(sj.Sleeps, j)
		}
		r.Type = sj.Name
		r.Syscall = sj
	case event.KindPageFault:
		r.Fault = &FaultJSON{Addr: e.Fault.Addr, IP: e.Fault.IP, Error: e.Fault.Error, Flags: event.FaultFlags(e.Fault.Error), SP: e.Fault.SP}
	case event.KindVsyscall:
		r.Vsys = &VsysJSON{Call: event.VsyscallName(e.Vsyscall.Nr), Nr: e.Vsyscall.Nr, CallerIP: e.Vsyscall.CallerIP}
	case event.KindSignalGenerate, event.KindSignalDeliver:
		s := &e.Signal
		sj := &SignalJSON{Sig: s.Sig, Name: event.SignalName(int(s.Sig)), Code: s.Code, CodeName: event.SigCodeName(int(s.Sig), int(s.Code)),
			Addr: s.Addr, SenderPID: s.SenderPID, TargetPID: s.TargetPID, TargetTID: s.TargetTID, Group: s.Group, Result: s.Result}
		if e.Kind == event.KindSignalDeliver {
			sj.Handler = handlerName(s.Handler)
		}
		if s.Sig == event.SIGSYS && s.Code == event.SysSeccomp {
			nr := s.Syscall
			sj.Syscall, sj.SyscallNr = s.SeccompCall(), &nr
		}
		r.Signal = sj
	case event.KindFork:
		r.Fork = &ForkJSON{ChildPID: e.Proc.ChildPID, ChildTID: e.Proc.ChildTID, ChildComm: e.Proc.ChildComm, Thread: e.Proc.Thread}
	case event.KindExec:
		argv, escaped := jsonArgv(e.Proc.Argv)
		r.Exec = &ExecJSON{Filename: e.Proc.Filename, Argv: argv, ArgvTruncated: e.Proc.ArgvTruncated, ArgvEscaped: escaped,
			OldTID: e.Proc.OldTID, CgroupPath: e.Proc.CgroupPath}
	case event.KindExit:
		code, sig, core := e.Proc.Status()
		x := &ExitJSON{Status: e.Proc.ExitCode, Code: code, CoreDumped: core, GroupDead: e.Proc.GroupDead}
		if sig != 0 {
			x.Signal = event.SignalName(sig)
		}
		r.Exit = x
	case event.KindDrop:
		r.Drop = &DropJSON{Count: e.Drop.Count}
	case event.KindCPUWait:
		r.CPUWait = cpuWaitJSON(&e.CPUWait, arch)
	case event.KindReclaim:
		rj := &ReclaimJSON{DurationNS: e.Reclaim.Duration, Pages: e.Reclaim.Pages, Stack: frameTexts(e.Reclaim.Stack),
			What: e.Reclaim.What.String(), Order: e.Reclaim.Order, Status: e.Reclaim.Status, FaultAddr: e.Reclaim.FaultAddr}
		if e.Reclaim.Nr >= 0 {
			rj.Syscall = event.SyscallName(arch, uint32(e.Reclaim.Nr))
		}
		r.Reclaim = rj
	}
	return r
}
