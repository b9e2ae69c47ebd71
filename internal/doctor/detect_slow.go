package doctor

import (
	"fmt"
	"strings"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/units"
)

// The finding it reports.
const SlowSyscall ID = "slow-syscall"

func init() {
	register(registration{ids: []ID{SlowSyscall},
		build: func(h *Host) Detector {
			s := newSlow(h.Arch)
			s.bar = h.slowBar()
			return s
		}})
}

// slow groups syscalls that took long by where they slept (with --stacks,
// the kernel stack; otherwise the syscall). Calls that exist to wait (poll,
// a blocking read of a pipe, nanosleep, futex) are left out: waiting is
// their job. Syscalls that slept in the audit subsystem, or that an
// imported capture's audit settings explain, are audit-backlog-stall's
// (detect_audit.go).
type slow struct {
	arch   event.Arch
	bar    uint64 // ns: a call this long is slow (Host.slowBar)
	groups map[string]*slowGroup
	// stallNS is, by group, the longest call less its wait for a CPU,
	// among the calls that were not bulk work (bulkWork): the warning's
	// measure. bulk counts the calls that were.
	stallNS map[string]uint64
	bulk    map[string]uint64
	bytes   map[string]uint64 // moved by the bulk calls
	// stacked: some slow call carried where it slept, so sleep tracking
	// was on and a slow call without a switch-out ran on the CPU.
	stacked   bool
	unstacked []unstackedCall
	counts    []uint64    // calls by syscall number, fast or slow (inferAudit)
	alloc     allocStalls // the calls compaction-stall explains (core_causes.go)
	// under is the longest call under bar that does not wait by
	// design: the nearest miss (near).
	under struct {
		ns      uint64
		nr, pid uint32
		comm    string
		example string
	}
}

// Bulk work is never more than info: a call that moves bytes
// (event.MovesBytes) and moved at least bulkMinBytes at bulkMinRate or
// more of its own time (less its wait for a CPU) did the copy it asked
// for, however long that took. cp -r of a gigabyte of libraries made
// copy_file_range calls of 25-130 MB that ran 200 ms to a second each, at
// 70-160 MB/s on a host loaded with a dozen busy tasks; the kernel copies
// page-cache data at gigabytes a second when it has the CPU. 1 MiB is
// bulk by any measure (a request's read or write is kilobytes), and 10
// MB/s is a hundred milliseconds for that mebibyte: slower than that, the
// call spent its time on something besides copying (a lock, reclaim, a
// fault path), and a long one still warns.
const (
	bulkMinBytes = 1 << 20
	bulkMinRate  = 10e6 // bytes per second
)

// bulkWork reports whether a call was a large copy done at a copying
// rate; queued is its time runnable without a CPU.
func bulkWork(name string, sc *event.Syscall, queued uint64) bool {
	if !event.Is(name, event.MovesBytes) || sc.Ret < bulkMinBytes {
		return false
	}
	own := sc.Latency - min(queued, sc.Latency)
	return own == 0 || float64(sc.Ret)/(float64(own)/1e9) >= bulkMinRate
}

// count adds a call's own time to its group's warning measure, or counts
// it as bulk work.
func (s *slow) count(key, name string, sc *event.Syscall, queued uint64) {
	if bulkWork(name, sc, queued) {
		s.bulk[key]++
		s.bytes[key] += uint64(sc.Ret)
		return
	}
	s.stallNS[key] = max(s.stallNS[key], sc.Latency-min(queued, sc.Latency))
}

// A call asleep waiting for the storage device is never more than info:
// the wait is the device's latency, not something the program did wrong.
// A shared virtual disk answers a cold read or a synchronous discard in
// 100 ms to over a second under ordinary load (the benign corpus saw a
// 107 ms discard, 520 ms reads of a cold Go build cache and a 1.08 s
// getdents64), and no rule on the call's length alone tells that apart
// from a failing disk; the device's own statistics would.

func newSlow(arch event.Arch) *slow {
	return &slow{arch: arch, bar: slowMin, alloc: allocStalls{}, groups: map[string]*slowGroup{}, stallNS: map[string]uint64{}, bulk: map[string]uint64{}, bytes: map[string]uint64{}}
}

func (s *slow) Observe(e *event.Event) {
	if e.Kind == event.KindReclaim {
		s.alloc.observe(e)
		return
	}
	if e.Kind != event.KindSyscall {
		return
	}
	sc := &e.Syscall
	inAlloc := s.alloc.owns(e)
	if int(sc.Nr) < 1<<12 {
		if int(sc.Nr) >= len(s.counts) {
			s.counts = append(s.counts, make([]uint64, int(sc.Nr)+1-len(s.counts))...)
		}
		s.counts[sc.Nr]++
	}
	if sc.Latency < s.bar {
		if sc.Latency > s.under.ns && !sc.Unfinished {
			if name := event.SyscallName(s.arch, sc.Nr); !event.Is(name, event.MayWait) && !event.Is(name, event.Waits) && !vforkCall(name, sc) {
				s.under.ns, s.under.nr, s.under.pid, s.under.comm = sc.Latency, sc.Nr, e.PID, e.Comm
				s.under.example = event.FormatSyscall(s.arch, sc)
			}
		}
		return
	}
	if len(sc.Sleeps) > 0 {
		s.stacked = true
	}
	if sc.Unfinished {
		return
	}
	name := event.SyscallName(s.arch, sc.Nr)
	if inAlloc || ownedElsewhere(name, sc) {
		return
	}
	if len(sc.Sleeps) == 0 {
		// No switch-out at all: whether sleep tracking was on (so it ran
		// on the CPU), the report knows.
		if unstacked(name, sc) && len(s.unstacked) < unstackedMax {
			s.unstacked = append(s.unstacked, unstackedCall{pid: e.PID, comm: e.Comm, at: e.Time, cpu: e.CPU, sc: *sc})
		}
		return
	}
	c := sleptIn(name, sc, s.bar)
	if c.audit || c.waiting || event.Is(name, event.Waits) {
		return // audit-backlog-stall's, or a wait by design
	}
	if sc.Latency-min(c.queued, sc.Latency) < s.bar {
		// Slow only for the wait for a CPU: the host's load, which
		// cpu-wait reports, not a slow call (a loaded host made
		// map32's forks 18 ms, 13 of them queued).
		return
	}
	g := s.groups[c.key]
	if g == nil {
		g = newGroup(c.key, c.stack)
		s.groups[c.key] = g
	}
	g.add(s.arch, e.PID, e.Comm, sc, name, c.stack, c.blocked, c.queued, 0)
	s.count(c.key, name, sc, c.queued)
}

func (s *slow) near(env *Env) *Near {
	u := &s.under
	if u.ns == 0 {
		return nil
	}
	return &Near{ID: SlowSyscall, Closeness: float64(u.ns) / float64(s.bar),
		Subject: fmt.Sprintf("%s in %s: %s", event.SyscallName(s.arch, u.nr), env.ProcName(u.pid, u.comm), u.example),
		Short: fmt.Sprintf("the slowest call that does not wait by design took %s; slow-syscall reports calls from %s",
			units.Duration(u.ns), units.Duration(s.bar))}
}

func (s *slow) Findings(env *Env) []Finding {
	if !s.stacked {
		if facts := readAuditFacts(env.Host.Meta); facts != nil {
			_, _, s.unstacked = inferAudit(s.arch, facts, s.unstacked, s.counts) // the rest are audit-backlog-stall's
		}
	}
	for _, u := range s.unstacked {
		name := event.SyscallName(s.arch, u.sc.Nr)
		if !s.stacked && (event.Is(name, event.MayWait) || vforkCall(name, &u.sc)) {
			continue // without stacks, a read may have waited by design
		}
		// A call that never switched out, with sleeps tracked, ran on one
		// CPU throughout: what the hypervisor took of that CPU meanwhile
		// was not the call's work.
		var stolen uint64
		if sleepsTracked(env, s.stacked) {
			stolen = env.stolen(u.cpu, u.at, u.at+u.sc.Latency)
		}
		if u.sc.Latency-min(stolen, u.sc.Latency) < s.bar {
			continue // slow only for the steal, as a call slow only for its wait for a CPU
		}
		g := s.groups[name]
		if g == nil {
			g = newGroup(name, nil)
			s.groups[name] = g
		}
		g.add(s.arch, u.pid, u.comm, &u.sc, name, nil, 0, 0, stolen)
		s.count(name, name, &u.sc, stolen)
	}
	s.unstacked = nil
	var out []Finding
	unknown := s.unknownCause(env)
	for key, g := range s.groups {
		sev := Info
		device := hasName(g.stack, deviceFrames)
		if s.stallNS[key] >= slowWarn && !device {
			sev = Warning
		}
		f := Finding{ID: SlowSyscall, Severity: sev, Key: keyOf(g.where), Syscalls: byValue(g.calls), Procs: env.refs(pidsOf(g.procs)...),
			Title: fmt.Sprintf("%d slow %s, up to %s, sleeping in %s", g.n, callList(g.calls), units.Duration(g.maxNS), orDash(g.where)),
			Summary: fmt.Sprintf("%d syscalls (%s) took %s in all and up to %s each%s. These are not calls that wait by design, "+
				"so the time is a stall the program did not ask for.", g.n, callList(g.calls), units.Duration(g.totalNS), units.Duration(g.maxNS),
				sleptWhere(g)),
			Evidence: g.evidence(env),
			Fix:      "Follow the stack: it names the kernel path the thread waited in (a lock, I/O, memory reclaim). Record with --stacks if it is missing.",
			Score:    float64(g.totalNS)}
		if device && g.sleptNS*2 >= g.totalNS {
			f.Title = fmt.Sprintf("%d slow %s, up to %s, waiting for the storage device in %s", g.n, callList(g.calls),
				units.Duration(g.maxNS), orDash(g.where))
			f.Summary = fmt.Sprintf("%d syscalls (%s) took %s in all and up to %s each%s: the data was not in the page cache, "+
				"or the call asked the device to write, flush or discard, and the device took this long to answer. "+
				"The program did ordinary I/O; the time is the device's latency.", g.n, callList(g.calls),
				units.Duration(g.totalNS), units.Duration(g.maxNS), sleptWhere(g))
			f.Fix = "Check the device's latency while this runs (`iostat -x 1`: r_await, w_await, %util). " +
				"If it is high, the device is slow or shared: read less from it cold (a warm cache, fewer files), " +
				"move the data to a faster or less busy device, or, for discards, mount without `discard` and run fstrim periodically."
		}
		bulk := s.bulk[key]
		if bulk > 0 {
			f.Evidence["bulk_calls"] = bulk
			f.Evidence["bulk_bytes"] = s.bytes[key]
		}
		if unknown != "" {
			f.Title = fmt.Sprintf("%d slow %s, up to %s, cause unknown from this capture", g.n, callList(g.calls), units.Duration(g.maxNS))
			f.Summary = fmt.Sprintf("%d syscalls (%s) took %s in all and up to %s each. %s whether they ran on the CPU "+
				"or slept, and where, is not in it.", g.n, callList(g.calls), units.Duration(g.totalNS), units.Duration(g.maxNS), unknown)
			f.Fix = "Record again with --stacks (`sysray record --stacks -w FILE -- CMD`), or run `sysray doctor -- CMD` live: " +
				"the sleep stacks say where the time went."
			f.Evidence["cause"] = "unknown: no sleep records"
		} else if g.sleptNS*2 < g.totalNS {
			// Mostly on the CPU: the kernel was working, not waiting.
			f.Title = fmt.Sprintf("%d slow %s, up to %s, running in the kernel", g.n, callList(g.calls), units.Duration(g.maxNS))
			f.Summary = fmt.Sprintf("%d syscalls (%s) took %s in all and up to %s each, most of it on the CPU inside the kernel "+
				"rather than asleep: the work the calls asked for is large (a big buffer, many pages, a long list).%s",
				g.n, callList(g.calls), units.Duration(g.totalNS), units.Duration(g.maxNS), queuedText(g)+stolenText(g))
			if queuedText(g) != "" {
				f.Evidence["queued_ns"] = g.queuedNS
			}
			f.Fix = "Ask for less per call, or less often; `sysray profile -- CMD` shows the kernel functions the time goes to."
			if stolenText(g) != "" && g.stolenNS*2 >= g.totalNS {
				f.Title = fmt.Sprintf("%d slow %s, up to %s, most of it CPU time the hypervisor took (steal)", g.n, callList(g.calls), units.Duration(g.maxNS))
				f.Fix = "The call is not the cause: this virtual machine's CPUs were given to other guests. " +
					"Watch `st` in `top` or `vmstat 1`; ask the provider for dedicated CPUs or a larger instance, or move the work to a less loaded host."
			}
			if bulk == g.n {
				f.Title = fmt.Sprintf("%d slow %s, up to %s, running in the kernel on large copies", g.n, callList(g.calls), units.Duration(g.maxNS))
				f.Summary = fmt.Sprintf("%d syscalls (%s) took %s in all and up to %s each, on the CPU inside the kernel, moving %s: "+
					"each moved at least %s at a copying rate, the work the program asked for.%s",
					g.n, callList(g.calls), units.Duration(g.totalNS), units.Duration(g.maxNS), units.Bytes(s.bytes[key]),
					units.Bytes(bulkMinBytes), queuedText(g))
				f.Fix = "Nothing to fix unless the thread has something else to answer meanwhile (requests, signals): " +
					"then ask for less per call, in chunks."
			}
		}
		out = append(out, f)
	}
	return out
}

// unknownCause says why a capture cannot tell what its slow calls did, or
// "" when it can: live, the doctor tracks sleeps itself, and a capture
// with any sleep record, or whose header says every call the doctor calls
// slow would carry one (stacks_slow), was recorded with --stacks, so a slow
// call without one ran on the CPU. The header lists stacks as absent in a
// capture imported from another tool or recorded without --stacks; older
// captures do not say.
func (s *slow) unknownCause(env *Env) string {
	switch {
	case sleepsTracked(env, s.stacked):
		return ""
	case absent(env.Host.Meta, "stacks"):
		if src := env.Host.Meta["source"]; src != "" {
			return fmt.Sprintf("This capture was imported from %s, which records no sleeps or kernel stacks:", src)
		}
		return "Stacks were not recorded (the capture was made without --stacks), so"
	}
	return "This capture holds no sleep record at all (recorded without --stacks, or with them and no slow call slept):"
}

// absent reports whether a capture's header lists what as absent.
func absent(meta map[string]string, what string) bool {
	for _, a := range strings.Split(meta["absent"], ",") {
		if strings.TrimSpace(a) == what {
			return true
		}
	}
	return false
}

func queuedText(g *slowGroup) string {
	if g.queuedNS*10 < g.totalNS {
		return ""
	}
	return fmt.Sprintf(" Of that, %s went to waiting for a CPU while runnable: more runnable threads than CPUs.", units.Duration(g.queuedNS))
}

// stolenText says how much of the calls' time their virtual CPU was not
// running (steal), when that is a tenth or more of it: the same share at
// which their wait for a CPU is worth a sentence.
func stolenText(g *slowGroup) string {
	if g.stolenNS == 0 || g.stolenNS*10 < g.totalNS {
		return ""
	}
	return fmt.Sprintf(" Of that, %s the hypervisor gave their virtual CPU to another guest (steal time): the calls stood still, "+
		"and no switch in this guest shows it.", units.Duration(g.stolenNS))
}

func sleptWhere(g *slowGroup) string {
	if g.where == "" || len(g.stack) == 0 {
		return ""
	}
	return ", asleep in " + g.where
}

func orDash(s string) string {
	if s == "" {
		return "the kernel"
	}
	return s
}
