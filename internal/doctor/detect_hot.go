package doctor

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
	"github.com/sysray/sysray/internal/units"
)

// The finding it reports.
const (
	HotSyscall ID = "hot-syscall"
)

func init() {
	register(registration{ids: []ID{HotSyscall},
		build: func(h *Host) Detector { return newHot(h.Arch) }})
}

// hot finds a cheap syscall called so often that its fixed cost (entry,
// exit, speculation mitigations: a few hundred ns on a VM) is most of what
// its threads do. Each call is fast, so no latency rule sees it; the harm
// is the sum. The cheaper path depends on what the call is for.
type hot struct {
	arch  event.Arch
	calls map[hotKey]*hotCalls
	exact bool // counts and totals came from the kernel
	// closest is the cheap call Findings found nearest the rule (near).
	closest *Near
}

type hotKey struct {
	pid uint32
	nr  uint32
}

type hotCalls struct {
	comm    string
	n, ns   uint64
	example string
	sizes   []uint64 // byte counts of sampled reads and writes
	paths   map[string]uint64
	zeroTO  uint64 // sampled polls with a zero timeout
	sampled uint64
}

func newHot(arch event.Arch) *hot {
	return &hot{arch: arch, calls: map[hotKey]*hotCalls{}}
}

// The hot-syscall rule (docs/detectors/hot-syscall.md gives the reasoning):
//   - cheapNS: a call whose mean is under 2 µs does little beyond entering
//     and leaving the kernel (an empty call costs 0.2-0.5 µs here), so
//     calling it less is the only way to make it cheaper.
//   - warnShare: at a quarter of its threads' time, removing the calls would
//     make the program a third faster: a warning.
//   - hotRate: 100,000 calls a second per thread is reported (info) even
//     below the share: at that rate the program asks the kernel for
//     something it could keep.
//   - hotMinThreadNS, hotMinCalls: a loop of under 0.1 s of thread time or
//     10,000 calls is start-up, not a pattern.
const (
	hotRate        = 100000
	hotMinThreadNS = 100_000_000
	hotMinCalls    = 10000
)

// counts takes the kernel's exact counts and totals per process.
func (h *hot) counts(cells []stat.Cell) {
	h.exact = true
	for _, c := range h.calls {
		c.n, c.ns = 0, 0
	}
	for _, cell := range cells {
		k := hotKey{cell.PID, cell.Nr}
		c := h.calls[k]
		if c == nil {
			c = &hotCalls{paths: map[string]uint64{}}
			h.calls[k] = c
		}
		c.n += cell.Count
		// Time preempted inside a call is the CPUs' queue, not the call.
		c.ns += cell.Total - min(cell.Runq, cell.Total)
	}
}

func (h *hot) Observe(e *event.Event) {
	if e.Kind != event.KindSyscall || e.Syscall.Unfinished {
		return
	}
	s := &e.Syscall
	k := hotKey{e.PID, s.Nr}
	c := h.calls[k]
	if c == nil {
		c = &hotCalls{paths: map[string]uint64{}}
		h.calls[k] = c
	}
	c.comm = e.Comm
	if !h.exact {
		c.n++
		c.ns += s.Latency
	}
	c.sampled++
	if c.example == "" || c.sampled%64 == 0 {
		c.example = event.FormatSyscall(h.arch, s)
	}
	switch hotClass(event.SyscallName(h.arch, s.Nr)) {
	case classIO:
		if len(c.sizes) < 1024 && !s.Failed() {
			c.sizes = append(c.sizes, uint64(s.Ret))
		}
	case classStat:
		for _, d := range s.Data {
			if len(d) > 0 && len(c.paths) < 64 {
				c.paths[string(d)]++
				break
			}
		}
	case classPoll:
		if zeroTimeout(event.SyscallName(h.arch, s.Nr), s) {
			c.zeroTO++
		}
	}
}

type class int

const (
	classOther class = iota
	classTime
	classIdentity
	classYield
	classPoll
	classIO
	classStat
)

func hotClass(name string) class {
	if event.Is(name, event.Polls) {
		return classPoll
	}
	switch name {
	case "clock_gettime", "gettimeofday", "time", "clock_getres", "getcpu":
		return classTime
	case "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getpgrp", "getpgid", "getsid":
		return classIdentity
	case "sched_yield":
		return classYield
	case "read", "write", "pread64", "pwrite64", "readv", "writev", "recvfrom", "sendto", "recvmsg", "sendmsg":
		return classIO
	case "stat", "lstat", "fstat", "newfstatat", "statx", "access", "faccessat", "faccessat2":
		return classStat
	}
	return classOther
}

// zeroTimeout reports a poll-family call that was told not to wait.
func zeroTimeout(name string, s *event.Syscall) bool {
	switch name {
	case "poll": // poll(fds, nfds, timeout)
		return int32(s.Args[2]) == 0
	case "epoll_wait", "epoll_pwait": // (epfd, events, maxevents, timeout, ...)
		return int32(s.Args[3]) == 0
	case "ppoll", "pselect6", "select", "epoll_pwait2":
		// The timeout is a pointer; a call that returned at once without a
		// ready fd is the same thing in effect.
		return s.Ret == 0 && s.Latency < cheapNS
	}
	return false
}

func (h *hot) near(*Env) *Near { return h.closest }

func (h *hot) Findings(env *Env) []Finding {
	h.closest = nil
	threadNS, nthreads := env.threadTime()
	cpu := cpuByProc(env.oncpu)
	var out []Finding
	for k, c := range h.calls {
		tns := threadNS[k.pid]
		if c.n < hotMinCalls || tns < hotMinThreadNS || c.ns == 0 {
			continue
		}
		mean := float64(c.ns) / float64(c.n)
		share, byCPU := timeShare(c.ns, tns, cpu[k.pid], k.nr)
		rate := float64(c.n) / (float64(tns) / 1e9)
		if mean > cheapNS {
			continue
		}
		if share < warnShare && rate < hotRate {
			if cl := max(share/warnShare, rate/hotRate); h.closest == nil || cl > h.closest.Closeness {
				h.closest = &Near{ID: HotSyscall, Closeness: cl,
					Subject: fmt.Sprintf("%s in %s: %d calls of about %s", event.SyscallName(h.arch, k.nr),
						env.ProcName(k.pid, c.comm), c.n, units.Duration(uint64(mean))),
					Short: fmt.Sprintf("%s of its time at %s calls a second per thread; hot-syscall reports %s of the time, "+
						"or %s calls a second", pct(share), units.Count(rate), pct(warnShare), units.Count(hotRate))}
			}
			continue
		}
		name := event.SyscallName(h.arch, k.nr)
		// A warning needs a cheaper path to point to; for a call of no
		// known class the finding can only say how often it was made.
		sev := Info
		if share >= warnShare && hotClass(name) != classOther {
			sev = Warning
		}
		// Reads and writes are unbuffered only when they move a few bytes
		// each: a tar reading many small files makes many short reads too,
		// each the whole file.
		if hotClass(name) == classIO {
			if m := medianU(c.sizes); len(c.sizes) == 0 || m == 0 || m > 64 {
				sev = Info
			}
		}
		// A stat is wasted only when it asks about the same file again:
		// du stats every file once, at 240k calls a second, and that is
		// its work. The sampled paths must repeat (each seen twice, on
		// average); a stat the doctor saw no path of cannot be told
		// repeated.
		if hotClass(name) == classStat && !repeatedPaths(c.paths) {
			sev = Info
		}
		// A poll is polling only when told not to wait. One that blocks
		// but returns at once has something ready every time (a listener
		// whose accept keeps failing, a level-triggered fd never read):
		// the loop's cause is elsewhere, and no timeout fixes it.
		if hotClass(name) == classPoll && c.sampled > 0 && c.zeroTO*2 < c.sampled {
			sev = Info
		}
		why, fix, ev := h.explain(name, c, env)
		ev["syscall"] = name
		ev["calls"] = c.n
		ev["total_ns"] = c.ns
		ev["ns_per_call"] = mean
		ev["calls_per_thread_second"] = rate
		ev["share_of_time"] = share
		if byCPU {
			ev["share_from"] = "on-CPU samples"
		} else {
			ev["share_from"] = "thread lifetimes"
		}
		ev["threads"] = nthreads[k.pid]
		ev["example"] = c.example
		ev["process"] = env.ProcName(k.pid, c.comm)
		out = append(out, Finding{ID: HotSyscall, Severity: sev, Key: keyOf(c.comm, name), Syscalls: []string{name}, Procs: env.refs(k.pid),
			Title: fmt.Sprintf("%s called %s times a second in %s: %.0f%% of its time", name,
				units.Count(rate), env.ProcName(k.pid, c.comm), 100*share),
			Summary: fmt.Sprintf("%s made %d %s calls (%s a second per thread), each about %s in the kernel, %s in all: "+
				"%.0f%% of its time went to entering and leaving the kernel for a call that does almost nothing there. %s",
				env.ProcName(k.pid, c.comm), c.n, name, units.Count(rate), units.Duration(uint64(mean)),
				units.Duration(c.ns), 100*share, why),
			Evidence: ev, Fix: fix, Score: float64(c.ns)})
	}
	return out
}

// repeatedPaths reports whether the sampled paths of a stat-like call
// repeat: at least twice as many samples as distinct paths.
func repeatedPaths(paths map[string]uint64) bool {
	var n uint64
	for _, c := range paths {
		n += c
	}
	return len(paths) > 0 && n >= 2*uint64(len(paths))
}

// explain says what a hot call is for and the cheaper path the program
// missed.
func (h *hot) explain(name string, c *hotCalls, env *Env) (why, fix string, ev map[string]any) {
	ev = map[string]any{}
	switch hotClass(name) {
	case classTime:
		why = name + " is answered in user space by the vDSO, without entering the kernel, in tens of ns; " +
			"this program reaches the kernel instead: a static binary or a runtime without vDSO support, " +
			"a raw syscall(SYS_" + name + "), or a clock source the vDSO cannot read."
		if cs := clocksource(env); cs != "" {
			ev["clocksource"] = cs
			if vdsoClock[cs] {
				why += fmt.Sprintf(" The clock source here (%s) can be read by the vDSO, so the program bypasses it.", cs)
			} else {
				why += fmt.Sprintf(" The clock source here is %s, which the vDSO cannot read: every program pays this.", cs)
			}
		}
		if env.Host.Live {
			if cost, ok := measureVsyscall(env.Host.VsyscallMode); ok {
				ev["vdso_ns_per_call"] = cost.vdso
			}
		}
		fix = "Call clock_gettime through the C library's vDSO path (not syscall()); link against a libc or runtime that " +
			"uses the vDSO; or, if the clock source is the cause, switch to tsc (/sys/devices/system/clocksource). " +
			"Where the time is only compared, read it less often."
	case classIdentity:
		why = "The answer does not change while the process lives (" + name + " of the same process returns the same value)."
		fix = "Ask once and keep the answer; C libraries stopped caching getpid in glibc 2.25, so cache it in the program."
	case classYield:
		why = "The thread spins: it yields the CPU in a loop while it waits for something, instead of sleeping until it happens."
		fix = "Wait on a futex, condition variable or eventfd instead of sched_yield in a loop; or spin a bounded number of times and then block."
	case classPoll:
		if c.sampled > 0 && c.zeroTO*2 < c.sampled {
			why = fmt.Sprintf("The %s calls wait (%d of %d sampled had a zero timeout) but return at once: a descriptor is ready "+
				"every time and the program does not consume it (a level-triggered socket it cannot read, a listener whose "+
				"accept fails).", name, c.zeroTO, c.sampled)
			ev["zero_timeout_calls_sampled"], ev["calls_sampled"] = c.zeroTO, c.sampled
			fix = "Find the descriptor that stays ready and why the program does not drain it: the call after the poll " +
				"(read, accept) probably fails; `sysray trace -p PID -f 'evt.failed'` shows it."
			break
		}
		why = fmt.Sprintf("A %s that returns at once is polling: the program asks whether anything is ready instead of waiting for it", name)
		if c.sampled > 0 {
			why += fmt.Sprintf(" (%d of %d sampled calls had a zero timeout)", c.zeroTO, c.sampled)
			ev["zero_timeout_calls_sampled"], ev["calls_sampled"] = c.zeroTO, c.sampled
		}
		why += "."
		fix = "Block with a timeout (poll/epoll_wait with -1 or the time to the next deadline) instead of a zero timeout in a loop."
	case classIO:
		size := medianU(c.sizes)
		if len(c.sizes) > 0 {
			ev["median_bytes_per_call"] = size
			why = fmt.Sprintf("Each call moves about %d bytes: ", size)
		}
		why += "unbuffered, tiny reads or writes pay the whole cost of a syscall for a few bytes."
		fix = "Buffer: read and write in blocks of at least several KiB (stdio's setvbuf, bufio, BufferedWriter), or batch with readv/writev."
	case classStat:
		var paths []string
		for p, n := range c.paths {
			paths = append(paths, fmt.Sprintf("%s (%d)", p, n))
		}
		sort.Strings(paths)
		if len(paths) > 0 {
			ev["paths_sampled"] = paths
		}
		why = "The program asks for the same file's metadata again and again."
		fix = "Cache the result, or watch the file for changes (inotify) instead of asking in a loop."
		if !repeatedPaths(c.paths) {
			why = "The paths sampled do not repeat: the program asks about many different files, once each (a tree walk), which is its work."
			fix = "Nothing to fix unless the walk itself is unneeded; statx with a smaller mask, or getdents64's d_type, can spare some calls."
		}
	default:
		why = "The call itself is cheap; its number is the cost."
		fix = "Call " + name + " less often: batch the work, or keep its result."
	}
	return why, fix, ev
}

// Clock sources the x86 vDSO reads in user space.
var vdsoClock = map[string]bool{"tsc": true, "kvm-clock": true, "hyperv_clocksource_tsc_page": true, "arch_sys_counter": true}

func clocksource(env *Env) string {
	if v := env.Host.Meta["clocksource"]; v != "" {
		return v
	}
	if !env.Host.Live {
		return ""
	}
	b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// forget drops ended processes (Doctor.forget).
func (h *hot) forget(pids, _ map[uint32]bool) {
	if len(pids) == 0 {
		return
	}
	for k := range h.calls {
		if pids[k.pid] {
			delete(h.calls, k)
		}
	}
}
