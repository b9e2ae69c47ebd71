package doctor

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
)

// The finding it reports.
const (
	FDExhaustion ID = "fd-exhaustion"
)

func init() {
	register(registration{ids: []ID{FDExhaustion},
		build: func(h *Host) Detector { return newFDExhaustion(h.Arch, h.Live, h.canRead) }})
}

// fdExhaustion finds processes that ran out of file descriptors: calls that
// create one (open, socket, accept, pipe, dup, epoll_create, eventfd…)
// failing with EMFILE, the process's RLIMIT_NOFILE reached, or ENFILE, the
// host's file table (fs.file-max) full or a file structure not allocated.
// Either way the operation the program wanted did not happen: a connection
// not accepted, a file not written, a child not spawned. It keys on the
// errno of the calls that allocate a descriptor, nothing else, and not
// inotify_init's EMFILE: the per-user limit on inotify instances answers
// with the same errno while the table has room, so the core
// (inotifyRefused) leaves that one to inotify-instance-limit, which reads
// both limits and says which was reached.
//
// Live, the first failure of a process makes the detector read what the
// process holds (its limits, and /proc/PID/fd grouped by kind), because by
// report time the process may have exited or been restarted, and what it
// held is where the leak shows.
//
// One shape gets its own name: a server whose accept fails with EMFILE
// while its listener has connections queued. The kernel reserves the
// descriptor before it takes a connection, so the connection stays queued,
// poll or epoll reports the listener readable again at once, and the loop
// calls accept again: a CPU spinning while clients wait for their timeout.
type fdExhaustion struct {
	arch event.Arch
	// read returns what a live process holds; nil offline. Unit tests
	// replace it.
	read  func(pid uint32) *fdFacts
	procs map[uint32]*fdProc
	after map[uint32]fdAfter // by tid: its last call was an accept that failed
	exits map[uint32]fdExit  // by pid: exits with an error
}

type fdCall struct {
	name  string
	errno int
}

type fdProc struct {
	comm        string
	fails       map[fdCall]uint64 // from events
	exact       map[fdCall]uint64 // the kernel's counts, when known
	first, last uint64            // the first and last failure
	example     string
	facts       *fdFacts
	accepts     map[int]*fdAccept // by listening fd
	// The kernel's counts of successful descriptor-creating calls and of
	// close, over the trace: whether the count was growing.
	created, closed uint64
	counted         bool
}

// fdAccept is accept failing on one listener of one process.
type fdAccept struct {
	n           uint64
	first, last uint64
	threads     map[uint32]bool
	ready       uint64 // a poll that reported something ready, right after a failure
	again       uint64 // accept again at once, no poll in between
}

type fdAfter struct {
	pid uint32
	fd  int
}

type fdExit struct {
	at   uint64
	code int
	sig  int
}

// fdFacts is what a process held when its first failure was seen.
type fdFacts struct {
	Soft, Hard int64 // RLIMIT_NOFILE; -1 unlimited
	Limits     bool  // Soft and Hard were read
	Open       int   // entries in /proc/PID/fd
	Kinds      map[string]int
	Sockets    map[string]int // "TCP CLOSE_WAIT", "UDP", "unix stream"…
	Paths      map[string]int // what the files, directories and devices are
	Listeners  map[int]fdListener
	// The host's file table (/proc/sys/fs/file-nr): allocated and maximum.
	FileNr, FileMax uint64
	Err             string // why the facts are missing or partial
}

type fdListener struct {
	Addr   string
	Queued int // connections waiting to be accepted (TCP)
}

// Thresholds. See docs/detectors/fd-exhaustion.md.
const (
	// A program that probes its limit (opening until EMFILE to size a
	// pool), or a pool that trims itself on EMFILE and retries, fails once
	// per probe or trim and goes on. A program stuck at its limit fails
	// every time it tries, for as long as it stays there: ten failed
	// operations (ten connections dropped, ten files unwritten) is an order
	// of magnitude past what probing makes, and already an outage's worth.
	fdWarnFailures = 10
	// A busy accept loop: this many failed accepts on one listener, at
	// this rate or faster over their span. Servers that handle EMFILE back
	// off (nginx stops accepting for 500 ms, Go's net/http sleeps 5 ms
	// doubling to 1 s: 100 failures take it over a minute); one that does
	// not comes back as fast as poll returns, thousands of times a second.
	// 100 failures at 100/s separate the two by two orders of magnitude.
	fdLoopFailures = 100
	fdLoopRate     = 100 // per second
	// Reading /proc/PID/fd costs a readlink per descriptor; a process at a
	// limit of a million would stall the doctor for seconds. The kinds are
	// read from the first this many; the count is exact.
	fdReadMax = 65536
	// Processes whose facts are read, at most: a host where every process
	// fails is described well enough by the first ones.
	fdReadProcs = 64
)

func newFDExhaustion(arch event.Arch, live bool, canRead func() bool) *fdExhaustion {
	x := &fdExhaustion{arch: arch, procs: map[uint32]*fdProc{}, after: map[uint32]fdAfter{}, exits: map[uint32]fdExit{}}
	if live {
		x.read = func(pid uint32) *fdFacts {
			if canRead != nil && !canRead() {
				return nil // opening /proc would stall: the events alone
			}
			return readFDFacts(pid)
		}
	}
	return x
}

func (x *fdExhaustion) proc(pid uint32, comm string) *fdProc {
	p := x.procs[pid]
	if p == nil {
		p = &fdProc{comm: comm, fails: map[fdCall]uint64{}, accepts: map[int]*fdAccept{}}
		x.procs[pid] = p
	}
	return p
}

func (x *fdExhaustion) Observe(e *event.Event) {
	switch e.Kind {
	case event.KindExit:
		if !e.Proc.GroupDead {
			return
		}
		if code, sig, _ := e.Proc.Status(); code != 0 || sig != 0 {
			x.exits[e.PID] = fdExit{at: e.Time, code: code, sig: sig}
		}
		return
	case event.KindSyscall:
	default:
		return
	}
	s := &e.Syscall
	if s.Unfinished || s.Refused {
		return
	}
	name := event.SyscallName(x.arch, s.Nr)
	// What the thread did right after an accept failed: live, the call
	// after a failure always crosses over, so it is here.
	if a, ok := x.after[e.TID]; ok {
		delete(x.after, e.TID)
		if acc := x.procs[a.pid].accepts[a.fd]; acc != nil {
			switch {
			case event.Is(name, event.Polls) && s.Ret > 0:
				acc.ready++
			case (name == "accept" || name == "accept4") && int(int32(s.Args[0])) == a.fd:
				acc.again++
			}
		}
	}
	if !fdExhausted(x.arch, s) {
		return
	}
	p := x.proc(e.PID, e.Comm)
	errno := int(-s.Ret)
	p.fails[fdCall{name, errno}]++
	if p.first == 0 || e.Time < p.first {
		p.first = e.Time
	}
	p.last = max(p.last, e.Time)
	if p.example == "" {
		p.example = event.FormatSyscall(x.arch, s)
	}
	if p.facts == nil && x.read != nil && len(x.procs) <= fdReadProcs {
		p.facts = x.read(e.PID)
	}
	if name == "accept" || name == "accept4" {
		fd := int(int32(s.Args[0]))
		acc := p.accepts[fd]
		if acc == nil {
			acc = &fdAccept{first: e.Time, threads: map[uint32]bool{}}
			p.accepts[fd] = acc
		}
		acc.n++
		acc.first = min(acc.first, e.Time)
		acc.last = max(acc.last, e.Time)
		acc.threads[e.TID] = true
		x.after[e.TID] = fdAfter{e.PID, fd}
	}
}

// counts takes the kernel's exact counts: the failures (events may have
// been lost in a busy loop), and the descriptors created and closed.
func (x *fdExhaustion) counts(cells []stat.Cell) {
	for _, c := range cells {
		name := event.SyscallName(x.arch, c.Nr)
		if name != "close" && !event.Is(name, event.MakesFD) {
			continue
		}
		errnos := []int{emfile, enfile}
		if inotifyRefused(name, emfile) {
			errnos = []int{enfile} // inotify_init's EMFILE is the inotify detectors'
		}
		var n uint64
		for _, errno := range errnos {
			n += c.Errnos[errno]
		}
		p := x.procs[c.PID]
		if p == nil {
			if n == 0 || name == "fcntl" {
				continue
			}
			p = x.proc(c.PID, "")
		}
		p.counted = true
		if name == "close" {
			p.closed += c.Count - c.Errors
			continue
		}
		switch name {
		case "fcntl": // most fcntl calls are not dups
		case "pipe", "pipe2", "socketpair":
			p.created += 2 * (c.Count - c.Errors)
		default:
			p.created += c.Count - c.Errors
		}
		if p.exact == nil {
			p.exact = map[fdCall]uint64{}
		}
		for _, errno := range errnos {
			if c.Errnos[errno] > 0 {
				p.exact[fdCall{name, errno}] += c.Errnos[errno]
			}
		}
	}
}

// failures are a process's failed calls with one errno, exact where the
// kernel counted them.
func (p *fdProc) failures(errno int) (map[string]uint64, uint64) {
	calls, total := map[string]uint64{}, uint64(0)
	for k, n := range p.fails {
		if k.errno == errno {
			calls[k.name] = n
		}
	}
	for k, n := range p.exact {
		if k.errno == errno && n > calls[k.name] {
			calls[k.name] = n
		}
	}
	for _, n := range calls {
		total += n
	}
	return calls, total
}

// fdLoop is a busy accept loop, if the process has one.
type fdLoop struct {
	fd   int
	acc  *fdAccept
	rate float64 // failures per second
}

func (p *fdProc) busyLoop() *fdLoop {
	var best *fdLoop
	for fd, a := range p.accepts {
		if a.n < fdLoopFailures {
			continue
		}
		rate := float64(fdLoopRate) * 1e6 // all at one instant
		if a.last > a.first {
			rate = float64(a.n-1) / (float64(a.last-a.first) / 1e9)
		}
		if rate < fdLoopRate {
			continue
		}
		if best == nil || a.n > best.acc.n {
			best = &fdLoop{fd: fd, acc: a, rate: rate}
		}
	}
	return best
}

// fdVerdict is one process's part in a finding.
type fdVerdict struct {
	pid     uint32
	p       *fdProc
	calls   map[string]uint64
	n       uint64
	loop    *fdLoop
	exit    *fdExit // an error exit after the first failure
	sev     Severity
	because string
}

func (x *fdExhaustion) Findings(env *Env) []Finding {
	var out []Finding
	for _, errno := range []int{emfile, enfile} {
		var vs []*fdVerdict
		for pid, p := range x.procs {
			calls, n := p.failures(errno)
			if n == 0 {
				continue
			}
			v := &fdVerdict{pid: pid, p: p, calls: calls, n: n, loop: p.busyLoop()}
			if ex, ok := x.exits[pid]; ok && p.first != 0 && ex.at >= p.first {
				v.exit = &ex
			}
			vs = append(vs, v)
		}
		if len(vs) == 0 {
			continue
		}
		for _, v := range vs {
			v.sev, v.because = fdSeverity(errno, v, len(vs))
		}
		sort.Slice(vs, func(i, j int) bool {
			if vs[i].sev != vs[j].sev {
				return vs[i].sev > vs[j].sev
			}
			return vs[i].n > vs[j].n || vs[i].n == vs[j].n && vs[i].pid < vs[j].pid
		})
		out = append(out, x.finding(env, errno, vs))
	}
	return out
}

// fdSeverity decides one process's severity, and says why.
func fdSeverity(errno int, v *fdVerdict, procs int) (Severity, string) {
	switch {
	case v.loop != nil:
		return Critical, "a busy accept loop: the service takes no new connection and spins a CPU until it is restarted"
	case errno == enfile && procs >= 2:
		return Critical, "ENFILE in several processes: the host's file table is full, and every unprivileged process on it fails to open anything"
	case errno == enfile:
		return Warning, "ENFILE is a host-wide condition no program provokes on purpose"
	case v.exit != nil:
		return Warning, "the process exited with an error after it"
	case v.n >= fdWarnFailures:
		return Warning, fmt.Sprintf("%d failures: the process is stuck at its limit, not probing it", v.n)
	}
	return Info, fmt.Sprintf("%d failure(s) and no error exit: a probe of the limit, or a peak the process got over", v.n)
}

func (x *fdExhaustion) finding(env *Env, errno int, vs []*fdVerdict) Finding {
	w := vs[0]
	calls := map[string]uint64{}
	var total uint64
	var procs []map[string]any
	for i, v := range vs {
		for c, n := range v.calls {
			calls[c] += n
		}
		total += v.n
		if i < 8 {
			procs = append(procs, x.procEvidence(env, v))
		}
	}
	name := env.ProcName(w.pid, w.p.comm)
	who := name
	if len(vs) > 1 {
		who = fmt.Sprintf("%d processes (%s, …)", len(vs), name)
	}
	names := callList(calls)
	errName := event.ErrnoName(errno)
	ev := map[string]any{
		"errno": errName, "errno_meaning": fdErrnoMeaning(errno), "failures": total, "calls": calls,
		"processes": procs, "example": w.p.example, "severity_because": w.because,
	}
	var pids []uint32
	for _, v := range vs {
		pids = append(pids, v.pid)
	}
	f := Finding{ID: FDExhaustion, Procs: env.refs(pids...), Severity: w.sev, Evidence: ev, Score: float64(total), Key: keyOf(w.p.comm, strings.Join(sortedKeys(calls), ","), errName),
		Syscalls: byValue(calls)}
	if w.sev == Critical {
		f.Score += 1e9 // an outage first
	}
	facts := w.p.facts
	var sum strings.Builder
	limit := ""
	if soft, same := fdSameLimit(vs); same && len(vs) == 1 {
		limit = " at its limit of " + fdLimit(soft)
	} else if same {
		limit = " at their limit of " + fdLimit(soft)
	}
	switch {
	case w.loop != nil:
		l := w.loop
		where := fmt.Sprintf("fd %d", l.fd)
		if facts != nil {
			if ls, ok := facts.Listeners[l.fd]; ok {
				where = fmt.Sprintf("fd %d (%s)", l.fd, ls.Addr)
			}
		}
		f.Title = fmt.Sprintf("%s is in a busy accept loop on %s: %s failed %d times (%s/s) on %s", name, errName,
			fdAcceptName(w.calls), l.acc.n, fdRate(l.rate), where)
		fmt.Fprintf(&sum, "%s called %s on its listening socket %s and it failed with %s %d times in %s, %s a second, "+
			"without backing off: a busy accept loop. The kernel reserves the new connection's descriptor before it "+
			"dequeues the connection, so with no descriptor left the connection stays queued",
			name, fdAcceptName(w.calls), where, errName, l.acc.n, fdSpan(l.acc), fdRate(l.rate))
		if q := fdQueued(facts, l.fd); q >= 0 {
			fmt.Fprintf(&sum, " (%d waiting when the doctor looked)", q)
		}
		sum.WriteString(", the listener stays readable and the loop comes straight back to accept")
		if l.acc.ready > 0 {
			fmt.Fprintf(&sum, " (%d times a poll reported it ready right after a failure)", l.acc.ready)
		} else if l.acc.again > 0 {
			fmt.Fprintf(&sum, " (%d times with no wait in between)", l.acc.again)
		}
		sum.WriteString(". The service accepts no new client, queued clients wait until they time out, and a CPU is spent doing nothing. ")
		ev["accept_loop"] = map[string]any{"fd": l.fd, "failures": l.acc.n, "per_second": l.rate, "span_ns": l.acc.last - l.acc.first,
			"threads": len(l.acc.threads), "ready_after_failure": l.acc.ready, "accept_again_at_once": l.acc.again}
	case errno == enfile:
		f.Title = fmt.Sprintf("the host ran out of file structures: %d %s call(s) failed with ENFILE in %s", total, names, who)
		fmt.Fprintf(&sum, "%s failed %d call(s) that create a descriptor with ENFILE (%s). ", who, total, fdErrnoMeaning(errno))
	case w.sev == Info:
		f.Title = fmt.Sprintf("%s hit its file descriptor limit %d time(s) (%s, %s)", who, total, names, errName)
		fmt.Fprintf(&sum, "%s failed %d call(s) that create a descriptor (%s) with %s (%s)%s, then no more: ",
			who, total, names, errName, fdErrnoMeaning(errno), limit)
		sum.WriteString("a program probing its limit, or a peak it got over. ")
	default:
		f.Title = fmt.Sprintf("%s ran out of file descriptors: %d %s call(s) failed with %s%s", who, total, names, errName, limit)
		fmt.Fprintf(&sum, "%s failed %d call(s) that create a descriptor with %s (%s): %s. Each is an operation that did not "+
			"happen (a connection not accepted, a file not opened, a child not spawned). ",
			who, total, errName, fdErrnoMeaning(errno), fdCounts(calls))
	}
	if w.loop == nil {
		for fd, a := range w.p.accepts {
			if a.n >= fdLoopFailures {
				fmt.Fprintf(&sum, "Its accept on fd %d failed %d times, under %d a second: it backs off, so no busy loop. ", fd, a.n, fdLoopRate)
				break
			}
		}
	}
	if w.exit != nil {
		if w.exit.sig != 0 {
			fmt.Fprintf(&sum, "It was then killed by %s. ", event.SignalName(w.exit.sig))
		} else {
			fmt.Fprintf(&sum, "It then exited with status %d. ", w.exit.code)
		}
	}
	its := "Its"
	if len(vs) > 1 {
		its = fmt.Sprintf("%s[%d]'s", w.p.comm, w.pid)
	}
	sum.WriteString(x.factsText(w, errno, its))
	if errno == enfile && facts != nil && facts.FileMax > 0 {
		ev["file_nr"] = map[string]any{"allocated": facts.FileNr, "max": facts.FileMax}
	}
	f.Summary = strings.TrimSpace(sum.String())
	f.Fix = fdFix(w, errno)
	return f
}

// factsText says what the process held, its limit, and whether its count
// grew, from what was read live and the kernel's counts.
func (x *fdExhaustion) factsText(v *fdVerdict, errno int, its string) string {
	var b strings.Builder
	f := v.p.facts
	switch {
	case f == nil && x.read == nil:
		b.WriteString("(Read from a capture: the process's limit and descriptors are known only live.) ")
	case f == nil:
		b.WriteString("Its failures reached the doctor only as the kernel's counts (events were lost), so its limit and descriptors were not read. ")
	case f.Err != "" && !f.Limits && f.Open == 0:
		b.WriteString("The process was gone before the doctor could read its limit and descriptors. ")
	default:
		if f.Limits {
			fmt.Fprintf(&b, "%s RLIMIT_NOFILE is %s (soft), %s (hard)", its, fdLimit(f.Soft), fdLimit(f.Hard))
			if f.Soft == f.Hard {
				b.WriteString(": it cannot raise it itself")
			} else {
				b.WriteString(": it could raise the soft limit itself, up to the hard one")
			}
			b.WriteString(". ")
		}
		if f.Open > 0 {
			fmt.Fprintf(&b, "When its first failure was seen it held %d descriptors: %s. ", f.Open, fdKinds(f))
			if errno == emfile && f.Limits && f.Soft >= 0 && int64(f.Open) < f.Soft {
				b.WriteString("That is below its limit: it had closed some by then. ")
			}
		}
		if errno == enfile && f.FileMax > 0 {
			fmt.Fprintf(&b, "The host's file table held %d of at most %d file structures (/proc/sys/fs/file-nr)", f.FileNr, f.FileMax)
			if f.FileNr*100 < f.FileMax*95 {
				b.WriteString(": no longer full, or the ENFILE came from a failed allocation under memory pressure (sockets, pipes)")
			}
			b.WriteString(". ")
		}
	}
	if v.p.counted && (v.p.created > 0 || v.p.closed > 0) {
		fmt.Fprintf(&b, "During the trace it created %d descriptors and closed %d", v.p.created, v.p.closed)
		if v.p.created > v.p.closed {
			fmt.Fprintf(&b, ": its count grew by %d", v.p.created-v.p.closed)
		}
		b.WriteString(". ")
	}
	return b.String()
}

// fdKinds lists what a process held, most held first: "250 regular files
// (250 /tmp/app.log), 3 pipes".
func fdKinds(f *fdFacts) string {
	var parts []string
	for _, k := range fdSorted(f.Kinds) {
		s := fmt.Sprintf("%d %s", f.Kinds[k], fdKindName(k, f.Kinds[k]))
		var detail []string
		switch k {
		case "sockets":
			for i, d := range fdSorted(f.Sockets) {
				if i == 3 {
					break
				}
				detail = append(detail, fmt.Sprintf("%d %s", f.Sockets[d], d))
			}
		case "regular files", "directories", "devices":
			for _, d := range fdSorted(f.Paths) {
				if len(detail) == 2 {
					break
				}
				if fdPathKind(d) == k {
					detail = append(detail, fmt.Sprintf("%d× %s", f.Paths[d], fdPathName(d)))
				}
			}
		}
		if len(detail) > 0 {
			s += " (" + strings.Join(detail, ", ") + ")"
		}
		parts = append(parts, s)
		if len(parts) == 5 {
			break
		}
	}
	if len(parts) == 0 {
		return "none read"
	}
	if n := f.Open; n > fdReadMax {
		parts = append(parts, fmt.Sprintf("kinds from the first %d", fdReadMax))
	}
	return strings.Join(parts, ", ")
}

// fdKindName is a kind for a count: "1 pipe", "3 pipes".
func fdKindName(kind string, n int) string {
	if n != 1 {
		return kind
	}
	for _, p := range [][2]string{{"directories", "directory"}, {"files", "file"}, {"sockets", "socket"}, {"pipes", "pipe"},
		{"devices", "device"}, {"memfds", "memfd"}, {"anon inodes", "anon inode"}} {
		if strings.Contains(kind, p[0]) {
			return strings.Replace(kind, p[0], p[1], 1)
		}
	}
	return kind
}

// fdSameLimit is the processes' soft limit, if every one read says the same.
func fdSameLimit(vs []*fdVerdict) (int64, bool) {
	var soft int64
	known := false
	for _, v := range vs {
		f := v.p.facts
		if f == nil || !f.Limits {
			continue
		}
		if known && f.Soft != soft {
			return 0, false
		}
		soft, known = f.Soft, true
	}
	return soft, known
}

// Paths are kept as "kind\x00path" so that the kind of each is known.
func fdPathKind(k string) string { kind, _, _ := strings.Cut(k, "\x00"); return kind }
func fdPathName(k string) string { _, p, _ := strings.Cut(k, "\x00"); return p }

// fdSorted is a count map's keys, most counted first.
func fdSorted(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return m[ks[i]] > m[ks[j]] || m[ks[i]] == m[ks[j]] && ks[i] < ks[j] })
	return ks
}

func (x *fdExhaustion) procEvidence(env *Env, v *fdVerdict) map[string]any {
	m := map[string]any{"process": env.ProcName(v.pid, v.p.comm), "failures": v.n, "calls": v.calls,
		"severity": v.sev.String()}
	if v.p.counted && (v.p.created > 0 || v.p.closed > 0) {
		m["created"], m["closed"] = v.p.created, v.p.closed
		if v.p.created > v.p.closed {
			m["grew_by"] = v.p.created - v.p.closed
		}
	}
	if f := v.p.facts; f != nil {
		if f.Limits {
			m["rlimit_nofile"] = map[string]any{"soft": f.Soft, "hard": f.Hard}
		}
		if f.Open > 0 {
			m["open_descriptors"] = f.Open
			m["descriptor_kinds"] = f.Kinds
		}
		if len(f.Sockets) > 0 {
			m["sockets"] = f.Sockets
		}
		if len(f.Paths) > 0 {
			held := map[string]int{}
			for i, k := range fdSorted(f.Paths) {
				if i == 5 {
					break
				}
				held[fdPathName(k)] = f.Paths[k]
			}
			m["most_held"] = held
		}
		if len(f.Listeners) > 0 {
			ls := map[string]any{}
			for fd, l := range f.Listeners {
				ls[strconv.Itoa(fd)] = map[string]any{"address": l.Addr, "queued": l.Queued}
			}
			m["listeners"] = ls
		}
		if f.Err != "" {
			m["read_error"] = f.Err
		}
	}
	if v.p.counted {
		m["created"], m["closed"] = v.p.created, v.p.closed
	}
	if v.exit != nil {
		m["exit_status"], m["exit_signal"] = v.exit.code, v.exit.sig
	}
	return m
}

func fdFix(v *fdVerdict, errno int) string {
	f := v.p.facts
	pid := strconv.Itoa(int(v.pid))
	var b strings.Builder
	if v.loop != nil {
		b.WriteString("Now: restarting the process frees its descriptors and serves the queued clients. In the code, " +
			"when accept fails with EMFILE or ENFILE do not go straight back to a poll that will report the listener " +
			"readable again: keep a spare descriptor (open /dev/null at start; on EMFILE close it, accept the " +
			"connection and close it at once, so the client gets a clean close instead of a hang, then reopen the spare), " +
			"or back off, or stop polling the listener (EPOLL_CTL_DEL or EPOLLONESHOT) until a descriptor is closed — " +
			"nginx stops accepting for 500 ms, Go's net/http sleeps 5 ms doubling to 1 s. Then ")
	}
	if errno == enfile {
		b.WriteString("Find who holds the host's files: `cat /proc/sys/fs/file-nr` (allocated, 0, max) and " +
			"`for p in /proc/[0-9]*; do echo \"$(ls $p/fd 2>/dev/null | wc -l) $p $(cat $p/comm)\"; done | sort -n | tail`; " +
			"a process with hundreds of thousands is a leak to fix (or restart). If the load is real, raise the table: " +
			"`sysctl -w fs.file-max=N` and a file in /etc/sysctl.d/ to keep it. Root keeps a reserve above file-max, so " +
			"services running as root may work while the others fail.")
		return b.String()
	}
	if v.loop != nil {
		b.WriteString("find the leak before raising the limit: ")
	} else {
		b.WriteString("Find the leak before raising the limit: ")
	}
	if f != nil && len(f.Kinds) > 0 {
		k := fdSorted(f.Kinds)[0]
		fmt.Fprintf(&b, "the process held mostly %s (%d of %d)", k, f.Kinds[k], f.Open)
		if hint := fdHint(f, k); hint != "" {
			b.WriteString(": " + hint)
		}
		b.WriteString(". ")
	}
	fmt.Fprintf(&b, "`ls -l /proc/%s/fd | awk '{print $NF}' | sort | uniq -c | sort -n | tail` (or `lsof -p %s`) shows what it holds; "+
		"run `ls /proc/%s/fd | wc -l` a few times: a count that keeps growing under steady load is a leak, one that levels off "+
		"is a limit too low for the load. ", pid, pid, pid)
	b.WriteString("To raise the limit, where the process is started: `ulimit -n 65536` in its start script, `LimitNOFILE=65536` " +
		"in its systemd unit (`systemctl edit UNIT`, then restart), `--ulimit nofile=65536:65536` for `docker run` (or " +
		"default-ulimits in /etc/docker/daemon.json); `prlimit --pid " + pid + " --nofile=65536:65536` changes a running process.")
	if f != nil && f.Limits && f.Soft >= 0 && (f.Hard < 0 || f.Soft < f.Hard) {
		fmt.Fprintf(&b, " Its soft limit (%s) is below its hard one (%s): the program may raise it itself with setrlimit, "+
			"as Go programs do at start since Go 1.19.", fdLimit(f.Soft), fdLimit(f.Hard))
	}
	return b.String()
}

// fdHint says what a leak of this kind usually is.
func fdHint(f *fdFacts, kind string) string {
	switch kind {
	case "sockets":
		top := fdSorted(f.Sockets)
		if len(top) == 0 {
			return "sockets never closed (`ss -tanp`, `ss -uanp`)"
		}
		switch t := top[0]; {
		case strings.HasSuffix(t, "CLOSE_WAIT"):
			return "connections in CLOSE_WAIT, which the peer closed and the program never did: a code path that " +
				"does not close a connection on EOF or on an error (`ss -tanp state close-wait`)"
		case strings.HasPrefix(t, "TCP"):
			return "open TCP connections: a pool without a bound, or connections kept after use (`ss -tanp`)"
		case strings.HasPrefix(t, "UDP"):
			return "UDP sockets made per request and never closed, as a resolver or a metrics client that forgets them (`ss -uanp`)"
		case strings.HasPrefix(t, "unix"):
			return "unix sockets never closed (`ss -xanp`)"
		}
		return "sockets never closed"
	case "regular files", "directories", "devices":
		for _, k := range fdSorted(f.Paths) {
			if fdPathKind(k) == kind {
				return fmt.Sprintf("%s %d times, opened again and again and never closed", fdPathName(k), f.Paths[k])
			}
		}
	case "pipes":
		return "pipes to children whose ends are never closed (popen without pclose, a subprocess's pipes left open)"
	}
	if strings.HasPrefix(kind, "anon inodes") {
		return "epoll, eventfd, timerfd or similar instances made per connection or task and never closed"
	}
	return ""
}

func fdErrnoMeaning(errno int) string {
	if errno == enfile {
		return "Too many open files in system: the host's table of open files reached fs.file-max, or the kernel could not allocate a file"
	}
	return "Too many open files: the process holds as many descriptors as its RLIMIT_NOFILE allows"
}

func fdAcceptName(calls map[string]uint64) string {
	if calls["accept4"] >= calls["accept"] {
		return "accept4"
	}
	return "accept"
}

func fdLimit(n int64) string {
	if n < 0 {
		return "unlimited"
	}
	return strconv.FormatInt(n, 10)
}

func fdRate(r float64) string {
	if r >= 1e6*fdLoopRate {
		return "at once"
	}
	return fmt.Sprintf("%.0f", r)
}

func fdSpan(a *fdAccept) string {
	return fmt.Sprintf("%.2fs", float64(a.last-a.first)/1e9)
}

func fdQueued(f *fdFacts, fd int) int {
	if f == nil {
		return -1
	}
	if l, ok := f.Listeners[fd]; ok && strings.Contains(l.Addr, ":") {
		return l.Queued
	}
	return -1
}

func fdCounts(calls map[string]uint64) string {
	var parts []string
	for _, c := range strings.Split(callList(calls), ", ") {
		parts = append(parts, fmt.Sprintf("%s %d", c, calls[c]))
	}
	return strings.Join(parts, ", ")
}

// readFDFacts reads what a live process holds: its RLIMIT_NOFILE, its
// descriptors by kind (readlink of /proc/PID/fd/*), what its sockets are
// (its network namespace's tables), and the host's file table.
func readFDFacts(pid uint32) *fdFacts {
	f := &fdFacts{Kinds: map[string]int{}, Sockets: map[string]int{}, Paths: map[string]int{}, Listeners: map[int]fdListener{}}
	dir := fmt.Sprintf("/proc/%d", pid)
	var errs []string
	if soft, hard, err := readNofile(dir + "/limits"); err == nil {
		f.Soft, f.Hard, f.Limits = soft, hard, true
	} else {
		errs = append(errs, err.Error())
	}
	if b, err := os.ReadFile("/proc/sys/fs/file-nr"); err == nil {
		if fs := strings.Fields(string(b)); len(fs) == 3 {
			f.FileNr, _ = strconv.ParseUint(fs[0], 10, 64)
			f.FileMax, _ = strconv.ParseUint(fs[2], 10, 64)
		}
	}
	d, err := os.Open(dir + "/fd")
	if err != nil {
		f.Err = strings.Join(append(errs, err.Error()), "; ")
		return f
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		errs = append(errs, err.Error())
	}
	f.Open = len(names)
	socks := map[uint64]int{} // inode → fd
	for i, n := range names {
		if i == fdReadMax {
			break
		}
		link, err := os.Readlink(dir + "/fd/" + n)
		if err != nil {
			continue // closed since
		}
		switch {
		case strings.HasPrefix(link, "socket:["):
			f.Kinds["sockets"]++
			if ino, err := strconv.ParseUint(strings.TrimSuffix(link[8:], "]"), 10, 64); err == nil {
				fd, _ := strconv.Atoi(n)
				socks[ino] = fd
			}
		case strings.HasPrefix(link, "pipe:["):
			f.Kinds["pipes"]++
		case strings.HasPrefix(link, "anon_inode:"):
			f.Kinds["anon inodes ("+strings.Trim(link[len("anon_inode:"):], "[]")+")"]++
		case strings.HasPrefix(link, "/memfd:"):
			f.Kinds["memfds"]++
		case strings.HasPrefix(link, "/"):
			kind := "regular files"
			if st, err := os.Stat(dir + "/fd/" + n); err == nil {
				switch m := st.Mode(); {
				case m.IsDir():
					kind = "directories"
				case m&os.ModeDevice != 0:
					kind = "devices"
				case !m.IsRegular():
					kind = "other files"
				}
			}
			f.Kinds[kind]++
			f.Paths[kind+"\x00"+link]++
		default:
			f.Kinds["other"]++
		}
	}
	if len(socks) > 0 {
		readSockets(dir, socks, f)
	}
	if len(errs) > 0 {
		f.Err = strings.Join(errs, "; ")
	}
	return f
}

// readNofile reads "Max open files" from /proc/PID/limits.
func readNofile(path string) (soft, hard int64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	soft, hard, ok := rlimit(string(b), "Max open files")
	if !ok {
		return 0, 0, fmt.Errorf("%s: no Max open files", path)
	}
	return soft, hard, nil
}

var tcpStates = map[string]string{
	"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1", "05": "FIN_WAIT2", "06": "TIME_WAIT",
	"07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING",
}

// readSockets names the process's sockets from its network namespace's
// tables (/proc/PID/net/*), by inode; a socket in none of them (not bound,
// or of another family) stays "other".
func readSockets(dir string, socks map[uint64]int, f *fdFacts) {
	seen := 0
	for _, t := range []struct{ file, proto string }{{"tcp", "TCP"}, {"tcp6", "TCP"}, {"udp", "UDP"}, {"udp6", "UDP"}} {
		scanTable(dir+"/net/"+t.file, func(fs []string) {
			if len(fs) < 10 {
				return
			}
			ino, _ := strconv.ParseUint(fs[9], 10, 64)
			fd, ok := socks[ino]
			if !ok {
				return
			}
			seen++
			state := tcpStates[fs[3]]
			if t.proto == "UDP" {
				state = map[string]string{"01": "connected", "07": "unconnected"}[fs[3]]
			}
			f.Sockets[strings.TrimSpace(t.proto+" "+state)]++
			if t.proto == "TCP" && fs[3] == "0A" {
				q := 0
				if _, rx, ok := strings.Cut(fs[4], ":"); ok {
					n, _ := strconv.ParseUint(rx, 16, 32)
					q = int(n)
				}
				f.Listeners[fd] = fdListener{Addr: hexAddr(fs[1]), Queued: q}
			}
		})
	}
	scanTable(dir+"/net/unix", func(fs []string) {
		if len(fs) < 7 {
			return
		}
		ino, _ := strconv.ParseUint(fs[6], 10, 64)
		fd, ok := socks[ino]
		if !ok {
			return
		}
		seen++
		typ := map[string]string{"0001": "stream", "0002": "dgram", "0005": "seqpacket"}[fs[4]]
		f.Sockets[strings.TrimSpace("unix "+typ)]++
		if flags, _ := strconv.ParseUint(fs[3], 16, 32); flags&0x10000 != 0 { // __SO_ACCEPTCON
			path := ""
			if len(fs) > 7 {
				path = fs[7]
			}
			f.Listeners[fd] = fdListener{Addr: "unix " + path, Queued: -1}
		}
	})
	if other := len(socks) - seen; other > 0 {
		f.Sockets["other (unbound, or not TCP, UDP or unix)"] += other
	}
}
