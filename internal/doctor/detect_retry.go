package doctor

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/event"
)

// The finding it reports.
const (
	FailedRetry ID = "failed-syscall-retry"
)

func init() {
	register(registration{ids: []ID{FailedRetry},
		build: func(h *Host) Detector { return newRetry(h.Arch) }})
}

// retry finds syscalls that fail and are at once called again by the same
// thread with only their flags changed: a fallback path that pays for a
// failure every time, like glibc's MAP_32BIT thread stacks retried without
// the flag once the low 2 GiB were full.
type retry struct {
	arch     event.Arch
	failed   map[uint32]event.Syscall // per thread: its last call, if it failed
	patterns map[string]*retryPattern
	closest  *Near // the pattern Findings found nearest the rule (near)
}

type retryPattern struct {
	nr      uint32
	errno   int
	removed []string // flags the retry dropped
	added   []string // flags the retry added
	arg     string
	count   uint64
	failed  timeSum // time spent in the failing calls
	retried timeSum
	example [2]string
	procs   map[uint32]string
}

func newRetry(arch event.Arch) *retry {
	return &retry{arch: arch, failed: map[uint32]event.Syscall{}, patterns: map[string]*retryPattern{}}
}

var flagKinds = map[event.ArgKind]bool{
	event.ArgOpenFlags: true, event.ArgProt: true, event.ArgMapFlags: true, event.ArgCloneFlags: true,
	event.ArgAtFlags: true, event.ArgSockType: true, event.ArgAccept4Flags: true,
}

func (r *retry) Observe(e *event.Event) {
	if e.Kind != event.KindSyscall || e.Syscall.Unfinished {
		return
	}
	s := &e.Syscall
	prev, ok := r.failed[e.TID]
	if s.Failed() {
		r.failed[e.TID] = *s
	} else {
		delete(r.failed, e.TID)
	}
	if !ok || s.Failed() || prev.Nr != s.Nr {
		return
	}
	spec := event.Lookup(r.arch, s.Nr)
	if spec == nil {
		return
	}
	// Only flags may differ: a different path, fd or size is a different
	// call. A mode the kernel ignores in either call (open without O_CREAT
	// or O_TMPFILE, where glibc passes whatever the register held) is no
	// difference: O_CREAT|O_EXCL failing with EEXIST, then a plain open.
	var diff []int
	for i, a := range spec.Args {
		if i >= 6 || prev.Args[i] == s.Args[i] {
			continue
		}
		if a.Kind == event.ArgMode && !(createsFile(spec, &prev) && createsFile(spec, s)) {
			continue
		}
		if !flagKinds[a.Kind] {
			return
		}
		diff = append(diff, i)
	}
	if len(diff) == 0 {
		return
	}
	var removed, added, names []string
	for _, i := range diff {
		a := spec.Args[i]
		before := tokens(event.FormatArg(a, prev.Args[i], nil, false))
		after := tokens(event.FormatArg(a, s.Args[i], nil, false))
		removed = append(removed, minus(before, after)...)
		added = append(added, minus(after, before)...)
		names = append(names, a.Name)
	}
	errno := int(-prev.Ret)
	argNames := strings.Join(names, ",")
	key := fmt.Sprintf("%d/%d/%s/-%s/+%s", s.Nr, errno, argNames, strings.Join(removed, "|"), strings.Join(added, "|"))
	p := r.patterns[key]
	if p == nil {
		p = &retryPattern{nr: s.Nr, errno: errno, removed: removed, added: added, arg: argNames, procs: map[uint32]string{}}
		p.example[0] = event.FormatSyscall(r.arch, &prev)
		p.example[1] = event.FormatSyscall(r.arch, s)
		r.patterns[key] = p
	}
	p.count++
	p.failed.add(&prev)
	p.retried.add(s)
	if len(p.procs) < 8 {
		p.procs[e.PID] = e.Comm
	}
}

// createsFile reports an open-like call whose flags make the kernel read
// its mode: O_CREAT (0100) or O_TMPFILE (020200000).
func createsFile(spec *event.Spec, s *event.Syscall) bool {
	for i, a := range spec.Args {
		if i < 6 && a.Kind == event.ArgOpenFlags {
			return s.Args[i]&0o100 != 0 || s.Args[i]&0o20200000 == 0o20200000
		}
	}
	return false
}

func tokens(s string) []string { return strings.Split(s, "|") }

func minus(a, b []string) []string {
	in := map[string]bool{}
	for _, x := range b {
		in[x] = true
	}
	var out []string
	for _, x := range a {
		if !in[x] {
			out = append(out, x)
		}
	}
	return out
}

// A fallback taken a few times is a program coping; taken this often it is
// a cost paid on a hot path.
const retryMin = 20

func (r *retry) near(*Env) *Near { return r.closest }

func (r *retry) Findings(env *Env) []Finding {
	var out []Finding
	r.closest = nil
	for _, p := range r.patterns {
		name := event.SyscallName(r.arch, p.nr)
		errno := event.ErrnoName(p.errno)
		change := describeChange(p)
		if p.count < retryMin {
			if cl := float64(p.count) / retryMin; r.closest == nil || cl > r.closest.Closeness {
				r.closest = &Near{ID: FailedRetry, Closeness: cl,
					Subject: fmt.Sprintf("%s failing with %s, called again at once %s", name, errno, change),
					Short:   fmt.Sprintf("%d such retries; failed-syscall-retry reports a fallback taken %d times", p.count, retryMin)}
			}
			continue
		}
		var procs []string
		for pid, comm := range p.procs {
			procs = append(procs, env.ProcName(pid, comm))
		}
		sort.Strings(procs)
		fix := fmt.Sprintf("Call %s without the flag that fails, or find out why it fails (%s).", name, errno)
		if contains(p.removed, "MAP_32BIT") {
			fix = "Allocate thread stacks with MAP_STACK and without MAP_32BIT: glibc 2.9 and later do (upgrade glibc, " +
				"or the image's base). MAP_32BIT confines mappings to the low 2 GiB (1 GiB in practice), which fills after ~1000 stacks."
		}
		out = append(out, Finding{
			ID:       FailedRetry,
			Key:      keyOf(name, errno, change),
			Procs:    env.refs(pidsOf(p.procs)...),
			Syscalls: []string{name},
			Severity: Warning,
			Title:    fmt.Sprintf("%s fails with %s and is retried %s, %d times", name, errno, change, p.count),
			Summary: fmt.Sprintf("%d times, %s failed with %s (%s) and the same thread called it again at once %s. "+
				"The failing calls took %s in all, the retries %s. A fallback taken on every call is a cost paid on a hot path: "+
				"the first attempt can never succeed once the condition behind %s holds.",
				p.count, name, errno, event.ErrnoDesc(p.errno), change, p.failed, p.retried, errno),
			Evidence: map[string]any{"syscall": name, "errno": errno, "count": p.count, "argument": p.arg,
				"flags_removed": p.removed, "flags_added": p.added, "failed_ns": p.failed.total(), "retry_ns": p.retried.total(),
				"calls_timed": p.failed.timed + p.retried.timed, "failed_timed": p.failed.timed, "retry_timed": p.retried.timed,
				"example_failed": p.example[0], "example_retry": p.example[1], "processes": procs},
			Fix:   fix,
			Score: float64(p.failed.total() + p.retried.total()),
		})
	}
	return out
}

func describeChange(p *retryPattern) string {
	var parts []string
	if len(p.removed) > 0 {
		parts = append(parts, "without "+strings.Join(p.removed, "|"))
	}
	if len(p.added) > 0 {
		parts = append(parts, "with "+strings.Join(p.added, "|"))
	}
	if len(parts) == 0 {
		return "with other " + p.arg
	}
	return strings.Join(parts, " and ")
}

// forget drops ended processes' threads (Doctor.forget).
func (r *retry) forget(_, tids map[uint32]bool) {
	for tid := range tids {
		delete(r.failed, tid)
	}
}
