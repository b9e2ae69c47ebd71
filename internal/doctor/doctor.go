package doctor

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/audit"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/stat"
)

// Severity orders findings.
type Severity int

const (
	Info Severity = iota
	Warning
	Critical
)

func (s Severity) String() string {
	switch s {
	case Warning:
		return "warning"
	case Critical:
		return "critical"
	}
	return "info"
}

// MarshalJSON writes the severity as its name.
func (s Severity) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON reads a severity's name, so reports can be read back.
func (s *Severity) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err != nil {
		return err
	}
	for _, v := range []Severity{Info, Warning, Critical} {
		if v.String() == name {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("unknown severity %q", name)
}

// Finding is one conclusion with its evidence and fix.
type Finding struct {
	ID       ID             `json:"id"`
	Severity Severity       `json:"severity"`
	Title    string         `json:"title"`
	Summary  string         `json:"summary"`
	Evidence map[string]any `json:"evidence"`
	Fix      string         `json:"fix"`
	// Score orders findings of the same severity: the time or harm at stake.
	Score float64 `json:"-"`
	// Containers names the containers of the processes the finding names
	// (live, where known); none for processes on the host.
	Containers []string `json:"containers,omitempty"`
	// Key is what makes two findings one across windows and hosts: the ID,
	// then what its detector groups by (where slow calls slept, a cgroup,
	// a program's name), never a count, a time or a pid, which change from
	// one window or restart to the next.
	Key string `json:"key"`
	// Syscalls are the syscalls the finding is about, by name, most
	// often first where that is known.
	Syscalls []string `json:"syscalls,omitempty"`
	// Procs are the processes the finding is about, as its detector
	// knows them (Env.refs), with their cgroups and containers, for
	// callers that label findings their own way (the agent).
	Procs []ProcRef `json:"procs,omitempty"`
}

// ProcRef is a process a finding names.
type ProcRef struct {
	PID       uint32 `json:"pid"`
	Cgroup    uint64 `json:"cgroup,omitempty"`
	Container string `json:"container,omitempty"` // as Host.Container describes it; "" on the host
}

// Host holds the facts about the traced machine that explain findings.
type Host struct {
	Arch         event.Arch
	Kernel       string
	VsyscallMode string // emulate, xonly, none
	Meta         map[string]string
	Live         bool // findings may probe the host (measure, read audit status)
	// Slow is the bar, in ns, from which a syscall is slow: the one the
	// probe carried sleeps from (live, --slow; in a capture, its
	// stacks_slow). 0 stands for slowMin, --slow's default. A call under
	// the probe's bar has no sleeps to say it slept, so the doctor must
	// not call it slow and running on the CPU.
	Slow uint64
	// Container, if set, describes the container a process runs in ("" on
	// the host), so findings can say which container.
	Container func(pid uint32, cgroup uint64) string
	// Libc, if set, reads the C library a live process uses, inside its own
	// root (its container's image).
	Libc func(pid uint32) string
	// OOMKills, if set, reads the kernel's count of OOM kills (/proc/vmstat
	// oom_kill): the doctor compares it before and after.
	OOMKills func() uint64
	// Audit, if set, returns what the kernel's audit counters said over the
	// live run (read once, at report time): audit-backlog-stall reports a
	// full backlog from them even when no traced call waited.
	Audit func() *AuditWindow
	// ReadsStall, if set, says that opening a file on this host may stall
	// now (a full audit backlog with rules on open: the doctor's own opens
	// would wait with everyone else's). Detectors then read nothing from
	// /proc or /sys and report what the events say.
	ReadsStall func() bool
	// CgroupBorn, if set, says whether the memory cgroup at a path was made
	// after the trace began: its cumulative counters then hold only what
	// happened during it, from zero, not from the doctor's first look.
	CgroupBorn func(cgroup string) bool
}

// slowBar is the bar from which a syscall is slow.
func (h *Host) slowBar() uint64 {
	if h.Slow > 0 {
		return h.Slow
	}
	return slowMin
}

// canRead reports whether a detector may read the host now.
func (h *Host) canRead() bool { return h.Live && (h.ReadsStall == nil || !h.ReadsStall()) }

// Env is what detectors may consult besides events.
type Env struct {
	Host    Host
	Procs   *proc.Table
	Span    uint64               // ns between the first and last event
	cgroups map[uint32]uint64    // each process's cgroup, as its events said
	threads map[uint32]*lifetime // by tid: first and last event
	series  *Series              // live: the kernel's counts over time
	oncpu   []CPUSample          // live: where the CPUs were, sampled
	steal   *StealLog            // live: the CPUs' steal time, read over the run
	// traced, when set, is the only stretch of time syscalls were traced
	// (a duty-cycled agent): a thread's time counts only within it.
	traced [2]uint64
}

// lifetime is a thread's span as its events saw it.
type lifetime struct {
	pid         uint32
	first, last uint64
}

// threadTime is each process's time as its threads' lifetimes add up (a
// process of eight busy threads has eight seconds a second to spend), and
// its number of threads.
func (env *Env) threadTime() (map[uint32]uint64, map[uint32]int) {
	ns, n := map[uint32]uint64{}, map[uint32]int{}
	for _, t := range env.threads {
		first, last := t.first, t.last
		if env.traced[1] > 0 {
			first, last = max(first, env.traced[0]), min(last, env.traced[1])
		}
		if last > first {
			ns[t.pid] += last - first
			n[t.pid]++
		}
	}
	return ns, n
}

// ProcName names a process for a report: "comm[pid]" plus its command line
// and its container.
func (env *Env) ProcName(pid uint32, comm string) string {
	name := env.procName(pid, comm)
	if c := env.ref(pid).Container; c != "" {
		name += " in container " + c
	}
	return name
}

// ref is a process as a finding refers to it: with its cgroup and its
// container.
func (env *Env) ref(pid uint32) ProcRef {
	r := ProcRef{PID: pid, Cgroup: env.cgroups[pid]}
	if env.Host.Container != nil {
		r.Container = env.Host.Container(pid, r.Cgroup)
	}
	return r
}

// refs is the processes a finding is about (Finding.Procs), in pid order.
func (env *Env) refs(pids ...uint32) []ProcRef {
	pids = slices.Clone(pids)
	slices.Sort(pids)
	pids = slices.Compact(pids)
	out := make([]ProcRef, 0, len(pids))
	for _, pid := range pids {
		out = append(out, env.ref(pid))
	}
	return out
}

// pidsOf is the pids a map is keyed by.
func pidsOf[V any](m map[uint32]V) []uint32 {
	out := make([]uint32, 0, len(m))
	for pid := range m {
		out = append(out, pid)
	}
	return out
}

// attribute gives each finding the containers of the processes its
// detector said it is about.
func (env *Env) attribute(fs []Finding) {
	for i := range fs {
		f := &fs[i]
		for _, r := range f.Procs {
			if r.Container != "" && !slices.Contains(f.Containers, r.Container) {
				f.Containers = append(f.Containers, r.Container)
			}
		}
		sort.Strings(f.Containers)
	}
}

func (env *Env) procName(pid uint32, comm string) string {
	if env.Procs != nil {
		if p, ok := env.Procs.Get(pid); ok {
			if comm == "" {
				comm = p.Comm
			}
			if len(p.Cmdline) > 0 {
				cmd := strings.Join(p.Cmdline, " ")
				if len(cmd) > 80 {
					cmd = cmd[:77] + "..."
				}
				return fmt.Sprintf("%s[%d] (%s)", comm, pid, cmd)
			}
		}
	}
	return fmt.Sprintf("%s[%d]", comm, pid)
}

// Doctor runs every detector over one stream.
type Doctor struct {
	env       *Env
	detectors []Detector
	first     uint64
	last      uint64
	events    uint64
	drops     uint64
	uncounted stat.Lost // calls the kernel's count table had no cell for
	// long: a doctor kept across windows (NewLong); ended holds the
	// processes that ended since its last Forget.
	long  bool
	ended map[uint32]bool
	// procsKept: the caller updates the process table (ProcsKeptByCaller).
	procsKept bool
	// endedOrder holds the processes that ended and are still held, oldest
	// first; forgotten counts those let go past MaxEnded (bounded).
	endedOrder []uint32
	forgotten  uint64
	// threadsEnded holds the threads that left a process still running,
	// oldest first (MaxEndedThreads).
	threadsEnded []uint32
}

// MaxEnded is how many ended processes a doctor keeps what it learnt of.
// An exec storm ends hundreds of processes a second, and each held about
// 15 KiB across the detectors (one making twenty syscalls): unbounded, a
// 45 s doctor over one grew past a gigabyte. The processes a finding is
// about are mostly still running at the report, or among the last to end;
// 1024 ended ones cost about 15 MiB, and hold every process of a typical
// diagnosis (the bundled incidents end tens). Past it the oldest go, a
// quarter at a time (each batch is one pass over the detectors' maps), and
// the report says how many. The kernel's exact counts of the processes let
// go are kept apart (stat.Ended, bounded too) and still reach the
// detectors that count.
const MaxEnded = 1024

// MaxEndedThreads is how many threads that left a running process the
// doctor's detectors keep what they learnt of (its last five calls, for a
// crash; its last call if it failed, for a retry). A server that starts a
// thread per request ends thousands a minute while it lives; its crash, if
// any, comes from a thread still running. Past it the oldest go, a quarter
// at a time; each thread's span still counts in its process's time.
const MaxEndedThreads = 4096

// New returns a doctor with every registered detector.
func New(host Host, procs *proc.Table) *Doctor {
	d := &Doctor{env: &Env{Host: host, Procs: procs, cgroups: map[uint32]uint64{}, threads: map[uint32]*lifetime{}}}
	d.detectors = detectors(&d.env.Host, false)
	return d
}

// Uncounted says how many calls the kernel's count table had no cell for
// (its lost count), and why: the counts handed to Counts are lower bounds
// by that many calls, and the report says so.
func (d *Doctor) Uncounted(l stat.Lost) { d.uncounted = l }

// carrier is a detector that holds the start of something the next
// window's doctor may see end (Carry).
type carrier interface {
	carry(to Detector)
}

// Carry hands next, the doctor New made for the window after this one's,
// what this doctor saw begin and not end, so that a window's edge does not
// cut it in two: a crash whose fault and signal came before the edge and
// its exit after. Call it before next sees any event; this doctor's own
// report is unchanged.
func (d *Doctor) Carry(next *Doctor) {
	// Both doctors' detectors are the registry's, in its order: the one
	// at i in next is of the same kind as the one at i here.
	for i, det := range d.detectors {
		if c, ok := det.(carrier); ok && i < len(next.detectors) {
			c.carry(next.detectors[i])
		}
	}
}

// counter is a detector that can use the kernel's exact syscall counts
// when syscall events were sampled.
type counter interface {
	counts(cells []stat.Cell)
}

// Counts hands the detectors the kernel's exact per-process syscall counts,
// for runs where only failures, slow calls and a sample of the others were
// recorded as events.
func (d *Doctor) Counts(cells []stat.Cell) {
	cells = attributed(cells)
	for _, det := range d.detectors {
		if c, ok := det.(counter); ok {
			c.counts(cells)
		}
	}
}

// attributed drops the cells of ended processes summed under pid 0 past
// stat.KeptMax: every detector that counts does so per process, and
// would take them for one.
func attributed(cells []stat.Cell) []stat.Cell {
	out := cells[:0:0]
	for _, c := range cells {
		if c.PID != 0 {
			out = append(out, c)
		}
	}
	return out
}

// Traced says syscalls were traced only from from to to (event time): a
// duty-cycled agent attaches the per-syscall programs for part of each
// window. The share of a thread's time its calls took is then a share of
// the time they were traced, not of the window.
func (d *Doctor) Traced(from, to uint64) { d.env.traced = [2]uint64{from, to} }

// ProcsKeptByCaller says the caller updates the process table with every
// event before Observe (a session does), so the doctor only reads it.
func (d *Doctor) ProcsKeptByCaller() { d.procsKept = true }

// Observe feeds one event to every detector.
func (d *Doctor) Observe(e *event.Event) {
	if d.env.Procs != nil && !d.long && !d.procsKept {
		d.env.Procs.Update(e)
	}
	if d.long && e.Kind == event.KindExit && e.Proc.GroupDead {
		d.ended[e.PID] = true
	}
	if e.Kind == event.KindDrop {
		d.drops += e.Drop.Count
		return
	}
	if !d.long && e.Kind == event.KindExit {
		if e.Proc.GroupDead {
			d.retire(e.PID)
		} else if e.TID != e.PID {
			d.retireThread(e.TID)
		}
	}
	d.events++
	if _, ok := d.env.cgroups[e.PID]; !ok || e.Kind == event.KindExec {
		d.env.cgroups[e.PID] = e.Cgroup
	}
	t := d.env.threads[e.TID]
	if t == nil {
		t = &lifetime{pid: e.PID, first: e.Time}
		d.env.threads[e.TID] = t
	}
	t.first = min(t.first, e.Time)
	t.last = max(t.last, e.End())
	if d.first == 0 || e.Time < d.first {
		d.first = e.Time
	}
	if end := e.End(); end > d.last {
		d.last = end
	}
	for _, det := range d.detectors {
		det.Observe(e)
	}
}

// SchemaVersion is the version of the report's JSON (docs/json.md): it
// grows when a field changes meaning or goes, not when one is added.
const SchemaVersion = 1

// retire notes that process pid ended and, past MaxEnded ended processes
// held, forgets the oldest quarter of them. They ended MaxEnded exits ago:
// their last events, which may come after the exit, have long come.
func (d *Doctor) retire(pid uint32) {
	pids := evict(&d.endedOrder, pid, MaxEnded)
	if pids == nil {
		return
	}
	d.forgotten += uint64(len(pids))
	d.forget(pids)
}

// evict appends id to order, oldest first, and once it holds a quarter
// more than keep, takes the oldest out and returns them: nil until then.
// An id used again, and ended again since, is kept as the later one.
func evict(order *[]uint32, id uint32, keep int) map[uint32]bool {
	*order = append(*order, id)
	if len(*order) < keep+keep/4 {
		return nil
	}
	n := len(*order) - keep
	out := make(map[uint32]bool, n)
	for _, x := range (*order)[:n] {
		out[x] = true
	}
	*order = append((*order)[:0], (*order)[n:]...)
	for _, x := range *order {
		delete(out, x)
	}
	return out
}

// retireThread notes that thread tid left its process and, past
// MaxEndedThreads, has the detectors forget the oldest quarter of such
// threads. The doctor keeps their spans (Env.threads): a thread's time is
// its process's.
func (d *Doctor) retireThread(tid uint32) {
	tids := evict(&d.threadsEnded, tid, MaxEndedThreads)
	if tids == nil {
		return
	}
	none := map[uint32]bool{}
	for _, det := range d.detectors {
		if f, ok := det.(forgetter); ok {
			f.forget(none, tids)
		}
	}
}

// Report is the doctor's conclusion.
type Report struct {
	SchemaVersion int       `json:"schema_version"`
	Findings      []Finding `json:"findings"`
	Events        uint64    `json:"events"`
	Drops         uint64    `json:"drops"`
	// Uncounted is how many calls the kernel's table of exact counts had
	// no cell for (one cell per process and syscall): the counts the
	// detectors used are short by that many. UncountedNoMem of them were
	// refused for want of memory, the rest because the table was full.
	Uncounted      uint64 `json:"uncounted,omitempty"`
	UncountedNoMem uint64 `json:"uncounted_no_memory,omitempty"`
	// Forgotten is how many ended processes the doctor let go of, past
	// the most recent ones it keeps (MaxEnded), to bound its memory:
	// findings about those processes alone may be missing.
	Forgotten uint64   `json:"forgotten_processes,omitempty"`
	SpanNS    uint64   `json:"span_ns"`
	Host      HostJSON `json:"host"`
	// Near holds, for each detector that reported nothing and can say,
	// the candidate that came closest, nearest first.
	Near []Near `json:"near,omitempty"`
}

// HostJSON is the part of Host a report shows.
type HostJSON struct {
	Kernel       string `json:"kernel"`
	VsyscallMode string `json:"vsyscall_mode"`
	Arch         string `json:"arch"`
}

// Report asks every detector for its findings, most severe first.
func (d *Doctor) Report() *Report {
	if d.last > d.first {
		d.env.Span = d.last - d.first
	}
	var fs []Finding
	var silent []Detector
	for _, det := range d.detectors {
		got := det.Findings(d.env)
		d.env.attribute(got)
		for i := range got {
			// The detector's key says what within its findings; the ID,
			// which.
			if got[i].Key == "" {
				got[i].Key = string(got[i].ID)
			} else {
				got[i].Key = string(got[i].ID) + ":" + got[i].Key
			}
		}
		fs = append(fs, got...)
		if len(got) == 0 {
			silent = append(silent, det)
		}
	}
	sort.SliceStable(fs, func(i, j int) bool {
		if fs[i].Severity != fs[j].Severity {
			return fs[i].Severity > fs[j].Severity
		}
		return fs[i].Score > fs[j].Score
	})
	if fs == nil {
		fs = []Finding{}
	}
	h := d.env.Host
	return &Report{SchemaVersion: SchemaVersion, Findings: fs, Events: d.events, Drops: d.drops, Uncounted: d.uncounted.Total(), UncountedNoMem: d.uncounted.NoMem, Forgotten: d.forgotten, SpanNS: d.env.Span,
		Host: HostJSON{Kernel: h.Kernel, VsyscallMode: h.VsyscallMode, Arch: h.Arch.String()}, Near: nears(d.env, silent)}
}

// AuditWindow is what the kernel's audit counters said over a live run
// (Host.Audit).
type AuditWindow = audit.Window
