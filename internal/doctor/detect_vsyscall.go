package doctor

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/event"
)

// The finding it reports.
const (
	LegacyVsyscall ID = "legacy-vsyscall"
)

func init() {
	register(registration{ids: []ID{LegacyVsyscall},
		build: func(h *Host) Detector { return newVsyscall(h.Libc) }})
}

// vsyscall finds programs that use the legacy vsyscall page: old glibc
// (before 2.14) and old static binaries call time(), gettimeofday() and
// getcpu() at fixed addresses in it. Depending on the kernel's vsyscall mode
// each call is emulated in a page fault (hundreds of times slower than the
// vDSO) or refused with SIGSEGV.
type vsyscall struct {
	libc  func(pid uint32) string
	procs map[uint32]*vsysProc
	// The last fault in the vsyscall page per thread, to tie it to the
	// SIGSEGV that may follow.
	faults map[uint32]event.Fault
}

type vsysProc struct {
	pid     uint32
	comm    string
	cgroup  uint64
	calls   [3]uint64 // by vsyscall nr
	first   uint64
	last    uint64
	callers map[uint64]uint64
	// A refused access: the fault that raised SIGSEGV, and how the process ended.
	refused   *event.Fault
	refusedAt uint64
	killed    bool
	status    string
	libc      string // the C library in the process's root, read while it lived
}

func newVsyscall(libc func(uint32) string) *vsyscall {
	return &vsyscall{libc: libc, procs: map[uint32]*vsysProc{}, faults: map[uint32]event.Fault{}}
}

func (v *vsyscall) proc(e *event.Event) *vsysProc {
	p := v.procs[e.PID]
	if p == nil {
		p = &vsysProc{pid: e.PID, comm: e.Comm, cgroup: e.Cgroup, callers: map[uint64]uint64{}}
		if v.libc != nil {
			// Now, while it may still be alive: the old libc is the cause.
			p.libc = v.libc(e.PID)
		}
		v.procs[e.PID] = p
	}
	return p
}

func (v *vsyscall) Observe(e *event.Event) {
	switch e.Kind {
	case event.KindVsyscall:
		p := v.proc(e)
		if e.Vsyscall.Nr < 3 {
			p.calls[e.Vsyscall.Nr]++
		}
		if p.first == 0 {
			p.first = e.Time
		}
		p.last = e.Time
		if len(p.callers) < 16 || p.callers[e.Vsyscall.CallerIP] > 0 {
			p.callers[e.Vsyscall.CallerIP]++
		}
	case event.KindPageFault:
		if inVsyscallPage(e.Fault.Addr) || inVsyscallPage(e.Fault.IP) {
			v.faults[e.TID] = e.Fault
			v.proc(e)
		}
	case event.KindSignalGenerate:
		if e.Signal.Sig == 11 && e.Signal.TargetTID == e.TID {
			if f, ok := v.faults[e.TID]; ok && inVsyscallPage(e.Signal.Addr) {
				p := v.proc(e)
				p.refused = &f
				p.refusedAt = e.Time
			}
		}
	case event.KindExit:
		delete(v.faults, e.TID)
		if p := v.procs[e.PID]; p != nil && p.refused != nil && e.Proc.GroupDead {
			_, sig, core := e.Proc.Status()
			if sig != 0 {
				p.killed = true
				p.status = fmt.Sprintf("killed by %s", event.SignalName(sig))
				if core {
					p.status += " (core dumped)"
				}
			}
		}
	}
}

func (v *vsyscall) Findings(env *Env) []Finding {
	var out []Finding
	mode := env.Host.VsyscallMode
	var emulated []*vsysProc
	for _, p := range v.procs {
		if p.refused != nil {
			out = append(out, v.refusedFinding(env, p, mode))
		}
		if p.calls[0]+p.calls[1]+p.calls[2] > 0 {
			emulated = append(emulated, p)
		}
	}
	if len(emulated) > 0 {
		out = append(out, v.emulatedFinding(env, emulated, mode))
	}
	return out
}

func access(f *event.Fault) string {
	switch {
	case f.Error&0x10 != 0:
		return "execute (call into)"
	case f.Error&0x2 != 0:
		return "write to"
	}
	return "read"
}

func (v *vsyscall) refusedFinding(env *Env, p *vsysProc, mode string) Finding {
	f := p.refused
	sev := Warning
	ending := "It survived (it handles SIGSEGV)."
	if p.killed {
		sev = Critical
		ending = "It was " + p.status + ", before writing anything to its logs."
	}
	why := "this kernel runs with vsyscall=" + mode
	switch mode {
	case "none":
		why += ", which removes the page: every use of it faults"
	case "xonly":
		why += ", which emulates calls into the page but refuses reads of it"
	}
	return Finding{
		ID:       LegacyVsyscall,
		Severity: sev,
		Key:      keyOf("refused", p.comm),
		Procs:    env.refs(p.pid),
		Title:    fmt.Sprintf("%s died using the legacy vsyscall page", env.ProcName(p.pid, p.comm)),
		Summary: fmt.Sprintf("%s tried to %s the legacy vsyscall page at %#x (ip %#x); %s. %s "+
			"Old C libraries (glibc before 2.14, as in images built on 2011-era distributions) and old static binaries "+
			"reach time(), gettimeofday() and getcpu() through fixed addresses in that page; newer kernels disable or emulate it. "+
			"The userspace is older than the kernel it runs on%s.",
			env.ProcName(p.pid, p.comm), access(f), f.Addr, f.IP, why, ending, libcText(p.libc, env.Host.Kernel)),
		Evidence: map[string]any{
			"pid": p.pid, "comm": p.comm, "cgroup": p.cgroup,
			"fault_addr": fmt.Sprintf("%#x", f.Addr), "fault_ip": fmt.Sprintf("%#x", f.IP),
			"fault_flags": event.FaultFlags(f.Error), "signal": "SIGSEGV", "exit": p.status,
			"vsyscall_mode": mode, "kernel": env.Host.Kernel, "libc": orUnknown(p.libc),
		},
		Fix: "Rebuild the image on a current base (glibc 2.14 or newer uses the vDSO instead of the vsyscall page), " +
			"or boot the host with vsyscall=emulate (kernel command line; weakens ASLR slightly).",
		Score: 1e12,
	}
}

func (v *vsyscall) emulatedFinding(env *Env, ps []*vsysProc, mode string) Finding {
	sort.Slice(ps, func(i, j int) bool { return total(ps[i]) > total(ps[j]) })
	var calls [3]uint64
	var n uint64
	var first, last uint64
	var procs []string
	for _, p := range ps {
		for i := range calls {
			calls[i] += p.calls[i]
		}
		n += total(p)
		if first == 0 || p.first < first {
			first = p.first
		}
		if p.last > last {
			last = p.last
		}
		if len(procs) < 8 {
			procs = append(procs, fmt.Sprintf("%s: %d calls", env.ProcName(p.pid, p.comm), total(p)))
		}
	}
	rate := 0.0
	if last > first {
		rate = float64(n) / (float64(last-first) / 1e9)
	}
	byCall := map[string]uint64{}
	for i, c := range calls {
		if c > 0 {
			byCall[event.VsyscallName(uint32(i))] = c
		}
	}
	// One rounding for the text and the evidence, so they say the same.
	perSec := int64(math.Round(rate))
	ev := map[string]any{"calls": n, "by_call": byCall, "calls_per_second": perSec, "processes": procs,
		"vsyscall_mode": mode, "kernel": env.Host.Kernel}
	var libcs []string
	for _, p := range ps {
		if p.libc != "" && !contains(libcs, p.libc) {
			libcs = append(libcs, p.libc)
		}
	}
	if len(libcs) > 0 {
		ev["libc"] = libcs
	}
	cost := ""
	if env.Host.Live {
		if c, ok := measureVsyscall(mode); ok {
			// Numbers, as the summary states them: JSON readers get
			// numbers, not text.
			ev["emulated_ns_per_call"] = math.Round(c.emulated)
			ev["vdso_ns_per_call"] = math.Round(c.vdso*10) / 10
			ev["slowdown"] = math.Round(c.emulated / c.vdso)
			cost = fmt.Sprintf(" Measured on this host: %.0f ns per emulated call against %.1f ns through the vDSO, %.0fx slower.",
				c.emulated, c.vdso, c.emulated/c.vdso)
		}
	}
	sev := Info
	if n >= 1000 {
		sev = Warning
	}
	return Finding{
		ID:       LegacyVsyscall,
		Severity: sev,
		Key:      keyOf("emulated"),
		Procs:    env.refs(vsysPIDs(ps)...),
		Title:    fmt.Sprintf("%d calls through the legacy vsyscall page, emulated by the kernel", n),
		Summary: fmt.Sprintf("%d process(es) call %s through the legacy vsyscall page (%d calls/s). "+
			"This kernel (vsyscall=%s) emulates each call in a page fault instead of answering it in user space through the vDSO.%s "+
			"The calls come from an old C library or static binary (glibc before 2.14).",
			len(ps), joinKeys(byCall), perSec, mode, cost),
		Evidence: ev,
		Fix: "Rebuild the program or its container image on a current base (glibc 2.14 or newer) so time() and " +
			"gettimeofday() use the vDSO.",
		Score: float64(n),
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown (the process was gone, or is static)"
	}
	return s
}

func libcText(libc, kernel string) string {
	if libc == "" {
		return ""
	}
	k, _, _ := strings.Cut(kernel, " ")
	return fmt.Sprintf(" (its C library: %s; the kernel: %s)", libc, k)
}

func total(p *vsysProc) uint64 { return p.calls[0] + p.calls[1] + p.calls[2] }

func joinKeys(m map[string]uint64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k+"()")
	}
	sort.Strings(keys)
	s := ""
	for i, k := range keys {
		if i > 0 {
			s += ", "
		}
		s += k
	}
	return s
}

func vsysPIDs(ps []*vsysProc) []uint32 {
	var out []uint32
	for _, p := range ps {
		out = append(out, p.pid)
	}
	return out
}
