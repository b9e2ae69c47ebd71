// Package output prints events for people (one strace-like line each) and
// for programs (one JSON object per line; schema in docs/json.md).
package output

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/units"
)

// Printer writes events to w. Call Flush when done.
type Printer struct {
	mu       sync.Mutex // Print and Flush against FlushEvery
	w        *bufio.Writer
	arch     event.Arch
	boot     int64 // Unix ns of CLOCK_MONOTONIC zero
	json     bool
	enc      *json.Encoder
	buf      []byte
	Location *time.Location
	// Containers, if set, names the container of an event (nil on the host).
	Containers func(pid uint32, cgroup uint64) *Container
}

// Container is the container column of a line and object of a JSON record.
type Container struct {
	ID           string `json:"id"`
	Name         string `json:"name,omitempty"`
	Image        string `json:"image,omitempty"`
	Runtime      string `json:"runtime,omitempty"`
	PodName      string `json:"pod,omitempty"`
	PodNamespace string `json:"namespace,omitempty"`
}

// Short is the container's name, or its id cut to 12 characters.
func (c *Container) Short() string {
	if c.Name != "" {
		return c.Name
	}
	if len(c.ID) > 12 {
		return c.ID[:12]
	}
	return c.ID
}

// New returns a text printer, or a JSON one when asJSON is set. boot converts
// event times to wall-clock time.
func New(w io.Writer, arch event.Arch, boot int64, asJSON bool) *Printer {
	bw := bufio.NewWriterSize(w, 64<<10)
	p := &Printer{w: bw, arch: arch, boot: boot, json: asJSON, Location: time.Local}
	if asJSON {
		p.enc = json.NewEncoder(bw)
		p.enc.SetEscapeHTML(false)
	}
	return p
}

// Flush writes out buffered lines.
func (p *Printer) Flush() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w.Flush()
}

// FlushEvery writes out buffered lines every d until stop is called, so
// that a reader of a live trace (sysray trace | grep) sees each event soon,
// not when 64 KiB of them have gathered. The first write error goes to
// failed, and flushing stops.
func (p *Printer) FlushEvery(d time.Duration, failed func(error)) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			p.mu.Lock()
			var err error
			if p.w.Buffered() > 0 {
				err = p.w.Flush()
			}
			p.mu.Unlock()
			if err != nil {
				failed(err)
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// Print writes one event.
func (p *Printer) Print(e *event.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ctr *Container
	if p.Containers != nil {
		ctr = p.Containers(e.PID, e.Cgroup)
	}
	if p.json {
		r := JSON(e, p.arch, p.boot)
		r.Container = ctr
		return p.enc.Encode(r)
	}
	b := p.buf[:0]
	t := time.Unix(0, p.boot+int64(e.Time)).In(p.Location)
	b = t.AppendFormat(b, "15:04:05.000000000")
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(e.CPU), 10)
	b = append(b, ' ')
	b = append(b, Escape(e.Comm)...)
	b = append(b, '(')
	b = strconv.AppendUint(b, uint64(e.PID), 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(e.TID), 10)
	b = append(b, ") "...)
	if ctr != nil {
		b = append(b, '[')
		b = append(b, Escape(ctr.Short())...)
		b = append(b, "] "...)
	}
	b = append(b, Body(e, p.arch)...)
	b = append(b, '\n')
	if e.Kind == event.KindSyscall && len(e.Syscall.Sleeps) > 0 {
		b = appendSleeps(b, &e.Syscall)
	}
	p.buf = b
	_, err := p.w.Write(b)
	return err
}

// Body is the part of a line after the process: what happened.
func Body(e *event.Event, arch event.Arch) string {
	switch e.Kind {
	case event.KindSyscall:
		s := &e.Syscall
		lat := fmt.Sprintf(" <%d.%06d>", s.Latency/1e9, s.Latency%1e9/1e3)
		if s.Approx {
			lat = fmt.Sprintf(" <~%d.%06d>", s.Latency/1e9, s.Latency%1e9/1e3)
		}
		if s.Unfinished {
			lat = fmt.Sprintf(" <unfinished %d.%06d>", s.Latency/1e9, s.Latency%1e9/1e3)
		}
		if s.Refused {
			lat = " <refused by seccomp>"
		}
		return event.FormatSyscall(arch, s) + lat
	case event.KindPageFault:
		f := &e.Fault
		return fmt.Sprintf("page_fault addr=%#x ip=%#x error=%s", f.Addr, f.IP, event.FaultFlags(f.Error))
	case event.KindVsyscall:
		return fmt.Sprintf("vsyscall %s() caller=%#x", event.VsyscallName(e.Vsyscall.Nr), e.Vsyscall.CallerIP)
	case event.KindSignalGenerate:
		s := &e.Signal
		var b strings.Builder
		fmt.Fprintf(&b, "signal_generate sig=%s code=%s", sigName(s.Sig), event.SigCodeName(int(s.Sig), int(s.Code)))
		if faultSig(s.Sig) {
			fmt.Fprintf(&b, " addr=%#x", s.Addr)
		}
		if s.Sig == event.SIGSYS && s.Code == event.SysSeccomp {
			fmt.Fprintf(&b, " syscall=%s call_addr=%#x", s.SeccompCall(), s.Addr)
		}
		fmt.Fprintf(&b, " sender=%d target=%d:%d", s.SenderPID, s.TargetPID, s.TargetTID)
		if s.Group {
			b.WriteString(" group")
		}
		if r := signalResult(s.Result); r != "" {
			b.WriteString(" result=" + r)
		}
		return b.String()
	case event.KindSignalDeliver:
		s := &e.Signal
		var b strings.Builder
		fmt.Fprintf(&b, "signal_deliver sig=%s code=%s", sigName(s.Sig), event.SigCodeName(int(s.Sig), int(s.Code)))
		if faultSig(s.Sig) {
			fmt.Fprintf(&b, " addr=%#x", s.Addr)
		}
		if s.Sig == event.SIGSYS && s.Code == event.SysSeccomp {
			fmt.Fprintf(&b, " syscall=%s call_addr=%#x", s.SeccompCall(), s.Addr)
		}
		b.WriteString(" handler=" + handlerName(s.Handler))
		return b.String()
	case event.KindFork:
		what := "fork"
		if e.Proc.Thread {
			what = "thread"
		}
		return fmt.Sprintf("%s child=%d:%d comm=%s", what, e.Proc.ChildPID, e.Proc.ChildTID, Escape(e.Proc.ChildComm))
	case event.KindExec:
		return fmt.Sprintf("exec filename=%q argv=%s", e.Proc.Filename, argvText(e.Proc.Argv, e.Proc.ArgvTruncated))
	case event.KindExit:
		return "exit " + ExitText(&e.Proc)
	case event.KindReclaim:
		r := &e.Reclaim
		in := "outside a syscall"
		if r.Nr >= 0 {
			in = "in " + event.SyscallName(arch, uint32(r.Nr))
		}
		switch r.What {
		case event.ReclaimDirect:
			return fmt.Sprintf("direct_reclaim order=%d pages=%d %s <%d.%06d>", r.Order, r.Pages, in, r.Duration/1e9, r.Duration%1e9/1e3)
		case event.ReclaimCompact:
			if r.FaultAddr != 0 {
				in = fmt.Sprintf("in a fault at 0x%x", r.FaultAddr)
			}
			return fmt.Sprintf("direct_compaction order=%d scanned=%d status=%d %s <%d.%06d>", r.Order, r.Pages, r.Status, in,
				r.Duration/1e9, r.Duration%1e9/1e3)
		}
		return fmt.Sprintf("memcg_reclaim pages=%d %s <%d.%06d>", r.Pages, in, r.Duration/1e9, r.Duration%1e9/1e3)
	case event.KindFutex:
		f := &e.Futex
		return fmt.Sprintf("futex_sums uaddr=0x%x waits=%d slept=%d woken=%d timeouts=%d wakes=%d woke=%d asleep=%d.%06d",
			f.Addr, f.Waits, f.Slept, f.Woken, f.Timeouts, f.Wakes, f.Woke, f.WaitNS/1e9, f.WaitNS%1e9/1e3)
	case event.KindFaultWait:
		return faultWaitText(&e.FaultWait)
	case event.KindCPUWait:
		return cpuWaitText(&e.CPUWait, arch)
	case event.KindDrop:
		return fmt.Sprintf("drop cpu=%d lost=%d events (ring buffer full; try --buffer-size or a narrower selection)", e.CPU, e.Drop.Count)
	}
	return e.Kind.String()
}

// How many frames of a waker's stack to show: its first few say who it was.
const wakerFrames = 6

// appendSleeps writes, under a slow syscall, where it slept and who woke it.
func appendSleeps(b []byte, s *event.Syscall) []byte {
	for _, sl := range s.Sleeps {
		how := "blocked"
		if sl.Preempted {
			how = "runnable, waiting for a CPU"
		}
		b = fmt.Appendf(b, "    off CPU %s in %d switch(es), %s", units.Duration(sl.Duration), sl.Count, how)
		if sl.WakerPID != 0 || sl.WakerComm != "" {
			b = fmt.Appendf(b, "; woken by %s(%d:%d)", Escape(sl.WakerComm), sl.WakerPID, sl.WakerTID)
		}
		b = append(b, ":\n"...)
		b = appendFrames(b, sl.Stack, len(sl.Stack))
		if len(sl.WakerStack) > 0 {
			b = append(b, "      waker:\n"...)
			b = appendFrames(b, sl.WakerStack, wakerFrames)
		}
	}
	if len(s.UserStack) > 0 {
		b = append(b, "    user stack:\n"...)
		b = appendFrames(b, s.UserStack, len(s.UserStack))
	}
	return b
}

// appendFrames writes up to n frames, one per indented line.
func appendFrames(b []byte, fs []event.Frame, n int) []byte {
	for i, f := range fs {
		if i == n {
			return fmt.Appendf(b, "        ... %d more\n", len(fs)-i)
		}
		b = append(b, "        "...)
		b = append(b, Escape(FrameText(f))...)
		b = append(b, '\n')
	}
	return b
}

// FrameText is a frame's name, or its address when it has none.
func FrameText(f event.Frame) string {
	if f.Name != "" {
		return f.Name
	}
	return fmt.Sprintf("%#x", f.Addr)
}

// ExitText says how a thread ended: "status=0", "killed by SIGSEGV (core dumped)".
func ExitText(p *event.Proc) string {
	code, sig, core := p.Status()
	var s string
	if sig != 0 {
		s = "killed by " + sigName(int32(sig))
		if core {
			s += " (core dumped)"
		}
	} else {
		s = "status=" + strconv.Itoa(code)
	}
	if p.GroupDead {
		s += " (process)"
	}
	return s
}

func sigName(sig int32) string {
	if n := event.SignalName(int(sig)); n != "" {
		return n
	}
	return strconv.Itoa(int(sig))
}

func faultSig(sig int32) bool {
	switch sig {
	case 4, 5, 7, 8, 11: // SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV
		return true
	}
	return false
}

func handlerName(h uint64) string {
	switch h {
	case 0:
		return "SIG_DFL"
	case 1:
		return "SIG_IGN"
	}
	return fmt.Sprintf("%#x", h)
}

// signalResult names the kernel's TRACE_SIGNAL_* results other than delivered.
func signalResult(r int32) string {
	switch r {
	case 0:
		return ""
	case 1:
		return "ignored"
	case 2:
		return "already_pending"
	case 3:
		return "overflow_fail"
	case 4:
		return "lose_info"
	}
	return strconv.Itoa(int(r))
}

// argvText is quoteList, with strace's mark of a cut string after the last
// argument when the command line was cut.
func argvText(argv []string, cut bool) string {
	s := quoteList(argv)
	if cut {
		s = s[:len(s)-1] + "...]"
	}
	return s
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
