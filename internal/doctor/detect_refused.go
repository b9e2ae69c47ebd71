package doctor

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/event"
)

func init() {
	register(registration{ids: []ID{SyscallRefused},
		build: func(h *Host) Detector { return newRefused(h.Arch) }})
}

// refused finds syscalls that a seccomp filter answered instead of the
// kernel: the program's userspace is newer than the policy it runs under.
// Container runtimes install an allow-list profile; a syscall added to the
// kernel after the profile was written gets the profile's default answer.
// Libcs try the new call first and fall back to the old one only on ENOSYS,
// so a profile that answers EPERM (as Docker's did before 20.10) breaks
// glibc 2.34's thread creation (clone3) and 2.33's access checks
// (faccessat2), while one that answers ENOSYS costs a wasted call.
//
// The kernel proves the refusal (event.Syscall.Refused: a sys_exit with no
// sys_enter, in a thread under a filter), so one refused call is enough: a
// policy's answer is a fact, not a statistic. A process killed by its
// filter (SIGSYS) is reported by fatal, under this finding's id.
//
// A call the kernel itself answered with ENOSYS (not Refused) is the other
// half of the family: a kernel older than the program, or built without
// the call. It is reported only where the program then fell back, which is
// how a libc probing for a call behaves.
type refused struct {
	arch  event.Arch
	calls map[refusedKey]*refusal
	// pending is, by tid, its last refusal, until its next call says
	// whether it fell back.
	pending  map[uint32]pendingRefusal
	installs map[uint32]string // by pid: the call that installed a filter
}

type refusedKey struct {
	pid, nr uint32
	errno   int
	kernel  bool         // the kernel answered ENOSYS, not a filter
	class   refusedClass // a finding's grouping only
}

// refusedClass sorts refused calls by what their refusal means.
type refusedClass uint8

const (
	// newer: a call with an older equivalent (clone3 → clone): refused,
	// it is the profile older than the libc.
	classNewer refusedClass = iota
	// optional: a newer call programs go on without (rseq, membarrier).
	classOptional
	// denied: any other call: a sandbox denying it by design, or a
	// profile missing a call the program needs; the data cannot tell.
	classDenied
)

type refusal struct {
	comm    string
	n       uint64
	example string
	fell    uint64            // of n, how many the thread followed with an older call
	to      map[string]uint64 // the older calls, by name
}

type pendingRefusal struct {
	key  refusedKey
	name string
	at   uint64
	path string // the first path argument, where the kernel copied one
}

// pathOf is a call's first captured string argument: what a fallback for a
// call on a path must name too.
func pathOf(s *event.Syscall) string {
	for _, d := range s.Data {
		if d != nil {
			return string(d)
		}
	}
	return ""
}

// A fallback is the thread's next call of an older kind within this long
// after the refusal: libcs retry at once.
const fallbackWithin = 10_000_000 // 10 ms

func newRefused(arch event.Arch) *refused {
	return &refused{arch: arch, calls: map[refusedKey]*refusal{}, pending: map[uint32]pendingRefusal{},
		installs: map[uint32]string{}}
}

func (r *refused) Observe(e *event.Event) {
	if e.Kind != event.KindSyscall || e.Syscall.Unfinished {
		return
	}
	s := &e.Syscall
	name := event.SyscallName(r.arch, s.Nr)
	// The thread's call just after a refusal says whether it fell back:
	// an older call that succeeded, on the same path if the refused call
	// named one (a printf's fstat of stdout after a refused faccessat2 is
	// not its fallback). Live, the call after a failure always crosses
	// over, so it is here. Each refusal is judged as it goes, so the count
	// is exact however many there are.
	if p, ok := r.pending[e.TID]; ok && e.Time > p.at {
		delete(r.pending, e.TID)
		if e.Time-p.at <= fallbackWithin && !s.Refused && !s.Failed() && (p.path == "" || pathOf(s) == p.path) &&
			contains(fallbacks[p.name].older, name) {
			c := r.calls[p.key]
			c.fell++
			c.to[name]++
		}
	}
	switch {
	case s.Refused || s.Ret == -38 && fallbacks[name].use != "": // ENOSYS
		k := refusedKey{pid: e.PID, nr: s.Nr, errno: int(-s.Ret), kernel: !s.Refused}
		c := r.calls[k]
		if c == nil {
			c = &refusal{comm: e.Comm, example: event.FormatSyscall(r.arch, s), to: map[string]uint64{}}
			r.calls[k] = c
		}
		c.n++
		r.pending[e.TID] = pendingRefusal{key: k, name: name, at: e.Time, path: pathOf(s)}
	case name == "seccomp" && s.Args[0] == 1 && !s.Failed(), // SECCOMP_SET_MODE_FILTER
		name == "prctl" && s.Args[0] == 22 && s.Args[1] == 2 && !s.Failed(): // PR_SET_SECCOMP, SECCOMP_MODE_FILTER
		r.installs[e.PID] = fmt.Sprintf("%s[%d], with %s()", e.Comm, e.PID, name)
	}
}

// installer names who installed the filter pid runs under: itself, or the
// nearest ancestor seen installing one (filters are inherited).
func (r *refused) installer(env *Env, pid uint32) string {
	for range 16 {
		if who := r.installs[pid]; who != "" {
			return who
		}
		if env.Procs == nil {
			return ""
		}
		p, ok := env.Procs.Get(pid)
		if !ok || p.PPID == 0 || p.PPID == pid {
			return ""
		}
		pid = p.PPID
	}
	return ""
}

// refusedGroup is one finding: the calls refused one way, in every process.
type refusedGroup struct {
	key   refusedKey // pid unused
	calls map[string]bool
	pids  map[uint32]string
	byPID map[uint32]uint64
	n     uint64
	fell  uint64
	to    map[string]uint64
	ex    map[string]string // by call
}

func (r *refused) Findings(env *Env) []Finding {
	groups := map[refusedKey]*refusedGroup{}
	for k, c := range r.calls {
		name := event.SyscallName(r.arch, k.nr)
		fell, to := c.fell, c.to
		if k.kernel && fell == 0 {
			continue // a kernel ENOSYS nobody worked around is error-storm's, if anything
		}
		class := classDenied
		if f, known := fallbacks[name]; known {
			class = classNewer
			if f.older == nil {
				class = classOptional
			}
		}
		gk := refusedKey{errno: k.errno, kernel: k.kernel, class: class}
		g := groups[gk]
		if g == nil {
			g = &refusedGroup{key: gk, calls: map[string]bool{}, pids: map[uint32]string{}, byPID: map[uint32]uint64{},
				to: map[string]uint64{}, ex: map[string]string{}}
			groups[gk] = g
		}
		g.calls[name] = true
		g.pids[k.pid] = c.comm
		g.byPID[k.pid] += c.n
		g.n += c.n
		g.fell += fell
		for o, n := range to {
			g.to[o] += n
		}
		if g.ex[name] == "" {
			g.ex[name] = c.example
		}
	}
	var out []Finding
	for _, g := range groups {
		out = append(out, r.finding(env, g))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	return out
}

func (r *refused) finding(env *Env, g *refusedGroup) Finding {
	var names, examples, uses []string
	for c := range g.calls {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		examples = append(examples, g.ex[c])
		if u := fallbacks[c].use; u != "" {
			uses = append(uses, c+": "+u)
		}
	}
	pids := make([]uint32, 0, len(g.pids))
	for pid := range g.pids {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, j int) bool {
		return g.byPID[pids[i]] > g.byPID[pids[j]] || g.byPID[pids[i]] == g.byPID[pids[j]] && pids[i] < pids[j]
	})
	var procs []string
	for i, pid := range pids {
		if i == 8 {
			break
		}
		procs = append(procs, env.ProcName(pid, g.pids[pid]))
	}
	proc := procs[0]
	if len(pids) > 1 {
		proc = fmt.Sprintf("%d processes (%s, …)", len(pids), procs[0])
	}
	errno := event.ErrnoName(g.key.errno)
	calls := strings.Join(names, ", ")
	policy := "its seccomp filter"
	ev := map[string]any{"syscalls": names, "errno": errno, "refused": g.n, "fell_back": g.fell,
		"examples": examples, "processes": procs, "answered_by": "seccomp"}
	if who := r.installer(env, pids[0]); who != "" {
		policy = "its seccomp filter (installed by " + who + ")"
		ev["filter_installed_by"] = who
	}
	if len(g.to) > 0 {
		ev["fell_back_to"] = g.to
	}
	if len(uses) > 0 {
		ev["used_for"] = uses
	}
	f := Finding{ID: SyscallRefused, Evidence: ev, Score: float64(g.n) * 1e6, Key: keyOf(calls, errno, answeredBy(g.key.kernel)),
		Syscalls: names, Procs: env.refs(pids...)}
	switch {
	case g.key.kernel:
		ev["answered_by"] = "kernel"
		f.Severity = Info
		f.Title = fmt.Sprintf("this kernel does not implement %s; %s fell back to %s", calls, proc, callList(g.to))
		f.Summary = fmt.Sprintf("%s called %s %d time(s) and the kernel answered ENOSYS: it is older than the program's libc, "+
			"or was built without the call. The program fell back to the older call %d time(s), which works.", proc, calls, g.n, g.fell)
		f.Fix = "Nothing breaks. To use the newer call, run a kernel that has it."
	case g.key.class == classDenied:
		f.Severity = Info
		f.Title = fmt.Sprintf("seccomp denied %s with %s in %s", calls, errno, proc)
		f.Summary = fmt.Sprintf("%s called %s %d time(s); the kernel never ran them: %s answered %s. A sandbox "+
			"denies calls like these by design; a runtime profile may also be missing a call the program needs.",
			proc, calls, g.n, policy, errno)
		f.Fix = "If the program failed at this point, allow " + calls + " in its seccomp profile; if it went on, nothing to do."
	case g.fell >= g.n || g.key.errno == 38 || g.key.class == classOptional:
		f.Severity = Info
		how := "then went on without it"
		if len(g.to) > 0 {
			how = fmt.Sprintf("fell back to %s %d time(s)", callList(g.to), g.fell)
		}
		f.Title = fmt.Sprintf("seccomp refused %s with %s in %s, which %s", calls, errno, proc, how)
		f.Summary = fmt.Sprintf("%s called %s %d time(s); the kernel never ran them: %s answered %s, as a container "+
			"runtime's profile does for syscalls newer than the profile. The program %s, so it works, at the cost of a "+
			"refused call each time.", proc, calls, g.n, policy, errno, how)
		f.Fix = "Update the container runtime or its seccomp profile so that it allows " + calls +
			" (the kernel implements them); until then ENOSYS is the right answer for calls the profile does not know."
	default:
		f.Severity = Warning
		f.Title = fmt.Sprintf("seccomp refused %s with %s in %s; the program did not fall back", calls, errno, proc)
		f.Summary = fmt.Sprintf("%s called %s %d time(s) and got %s, though this kernel implements %s: the kernel never ran "+
			"the calls, %s answered them. Libcs fall back to the older call only on ENOSYS, so with %s the operation "+
			"itself fails (threads cannot be created, access checks deny, files do not open). This is a container "+
			"runtime's profile older than the image's libc.", proc, calls, g.n, errno, plural(len(names), "it", "them"),
			policy, errno)
		f.Fix = "Update the container runtime (or its seccomp profile) so that it allows " + calls +
			", or at least answers ENOSYS for syscalls the profile does not know, so that libc falls back; " +
			"or run an image whose libc is as old as the profile."
	}
	return f
}

// answeredBy names who refused, for a finding's key.
func answeredBy(kernel bool) string {
	if kernel {
		return "kernel"
	}
	return "seccomp"
}
