package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/units"
)

// The finding it reports.
const (
	CgroupLimit ID = "cgroup-limit"
)

func init() {
	register(registration{ids: []ID{CgroupLimit},
		build: func(h *Host) Detector {
			c := newCgroupLimit(h.Arch, h.Live, h.canRead)
			c.bar = h.slowBar()
			return c
		}})
}

// cgroupLimit finds a process held back by its own cgroup's limits, the
// container's, not the host's:
//
//   - pids: fork, vfork, clone or clone3 failing with EAGAIN while the
//     cgroup is at pids.max. The same errno comes from the user's
//     RLIMIT_NPROC and the kernel's threads-max, so the finding says which
//     limit the facts show.
//   - memory: threads reclaiming memory from their own cgroup to charge
//     more to it, at memory.high or memory.max (v1:
//     memory.limit_in_bytes). The kernel's memcg reclaim tracepoints time
//     every pass, on and off the CPU, whatever the call that charged
//     (KindReclaim events); slow calls asleep in reclaim or in the penalty
//     sleep of memory.high add their sleep stacks (try_charge_memcg,
//     try_to_free_mem_cgroup_pages, __mem_cgroup_handle_over_high), and
//     slow-syscall leaves them here (memcgReclaim). The cgroup's counters
//     say which limit.
//   - cpu: the cgroup's cpu.stat nr_throttled and throttled time growing
//     over the run (cpu.max, v1 cpu.cfs_quota_us): its tasks were runnable
//     but not allowed to run.
//
// The facts come from the cgroup's files (v1 where the controller's own
// hierarchy is mounted, /sys/fs/cgroup/CONTROLLER, else v2). They are read
// only live, by the detector itself: when a process is first seen and when
// it execs (a runtime moves itself into the cgroup, then execs), at each
// relevant event, at most every cgRefresh while a limited cgroup's
// processes make events (a cgroup may be removed as soon as its last
// process exits, before the report), and at report time where the cgroup
// still exists.
type cgroupLimit struct {
	arch     event.Arch
	bar      uint64 // ns: a call this long carries its sleeps (Host.slowBar)
	live     bool
	canRead  func() bool // live, and opening files does not stall now
	fs       cgFS
	procs    map[uint32]*cgProc
	dirs     map[cgKey]*cgDir // nil value: probed, no such controller there
	resolved int
	// users caches a user's task count: a non-root fork bomb has many
	// processes failing at once, and each count reads every /proc/PID/status.
	users map[int64]userCount
	// watch reads the CPU cgroups with a quota on a clock (live; nil
	// until one is found), every watchEvery; 0 in tests, which tick it
	// themselves. The other limits come with events of their own (a
	// failed fork, a pass of reclaim); a throttled process may make none:
	// its calls are too fast to be events, and since Linux 6.18 a
	// throttled task is stopped on its way back to user space, so no call
	// of its is stretched. Read only on its events, a cgroup removed as
	// its command ends was last read at its first event, and its
	// throttling never seen (CI once saw only cgrun's one slow write).
	watch      *watch
	watchEvery time.Duration
}

type userCount struct {
	tasks int64
	at    uint64
}

// cgFS is the detector's only way to the host's files; tests replace it.
type cgFS interface {
	ReadFile(path string) ([]byte, error)
	ReadDir(path string) ([]string, error)
}

type hostFS struct{}

func (hostFS) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }
func (hostFS) ReadDir(path string) ([]string, error) {
	es, err := os.ReadDir(path)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names, err
}

// The controllers, by index.
const (
	ctlPids = iota
	ctlMemory
	ctlCPU
	nCtl
)

var ctlNames = [nCtl]string{"pids", "memory", "cpu"}

// A file every cgroup of the controller has, v1 and v2, to tell where the
// controller is.
var ctlProbe = [nCtl][2]string{{"pids.max", "pids.max"}, {"memory.limit_in_bytes", "memory.max"}, {"cpu.cfs_quota_us", "cpu.max"}}

// A limited cgroup's counters are read again at most this often (event
// time) while its processes make events: often enough that the last read
// before the cgroup disappears is close to its end, rarely enough to cost
// nothing (a few small reads per limited cgroup per tick).
const cgRefresh = 100_000_000

// Relevant events may come thousands a second (a fork bomb's failures).
const cgRefreshRelevant = 10_000_000

// A process's cgroup is looked up again at most this often on relevant
// events (a fork bomb fails thousands of times a second).
const cgResolveEvery = 100_000_000

// Bounds on the host reads: one /proc/PID/cgroup per process, so a whole
// host's run or a build of thousands of processes stays cheap.
const (
	cgMaxResolves = 8192
	cgMaxDirs     = 1024
)

type cgProc struct {
	comm     string
	dirs     [nCtl][]string // the cgroup and its ancestors that have the controller, innermost first
	resolved uint64         // event time of the last look-up; 0: never
	forks    map[string]uint64
	forkEx   string
	rlimit   *nprocFacts // read at the first failed fork
	exited   bool        // the process ended during the run
	code     int         // its exit status, or 128+signal
	reclaim  *reclaimCalls
	passes   *reclaimPasses
	queued   uint64 // slow calls that mostly waited for a CPU
	queuedNS uint64
}

// nprocFacts are the other two limits a fork's EAGAIN can come from.
type nprocFacts struct {
	uid, limit, tasks int64 // RLIMIT_NPROC (soft; -1 unlimited) and the user's tasks
	hard              int64 // RLIMIT_NPROC's hard limit; -1 unlimited
	// limitRead: /proc/PID/limits was read. The read follows the event
	// and a process that gives up at its first EAGAIN is gone by then:
	// its limit is unknown, not unlimited.
	limitRead             bool
	user                  string
	threadsMax, nrThreads int64
	memAvailable          int64 // the host's MemAvailable, bytes; -1 unread
}

// cgForkRetryMin: a program that probes for a task slot (a pool that sizes
// itself to the threads it can start, a helper process that is optional)
// fails once or twice and carries on with what it got: that is handled,
// not a fault, and is reported as info. One stuck at the limit fails again
// and again (bash retries fork five times, a pool retries each worker);
// three failures are past one probe and its one fallback, the same bar as
// memlock-limit's. A process that exits non-zero or is killed after one
// failure gave up, and is warned.
const cgForkRetryMin = 3

type reclaimCalls struct {
	calls            map[string]uint64
	n                uint64
	totalNS, sleptNS uint64 // the calls' latency; their sleeps charging memory
	maxNS            uint64 // the longest single call's sleep charging memory
	stack            []string
	example          string
}

// add folds another process's calls into r.
func (r *reclaimCalls) add(o *reclaimCalls) {
	for k, n := range o.calls {
		r.calls[k] += n
	}
	r.n += o.n
	r.totalNS += o.totalNS
	r.sleptNS += o.sleptNS
	if o.maxNS > r.maxNS {
		r.maxNS, r.stack, r.example = o.maxNS, o.stack, o.example
	}
}

// reclaimPasses are a process's passes of memory-cgroup reclaim, as the
// kernel timed them.
type reclaimPasses struct {
	n, ns, maxNS, pages uint64
	byCall              map[string]uint64 // ns by the syscall in flight, or outsideCall
	stack               []string          // of the longest pass
}

// add folds another process's passes into ps.
func (ps *reclaimPasses) add(o *reclaimPasses) {
	for k, ns := range o.byCall {
		ps.byCall[k] += ns
	}
	ps.n += o.n
	ps.ns += o.ns
	ps.pages += o.pages
	if o.maxNS >= ps.maxNS {
		ps.maxNS, ps.stack = o.maxNS, o.stack
	}
}

const outsideCall = "page faults outside syscalls"

// cgKey names a cgroup for one controller: on v2 one directory serves
// them all.
type cgKey struct {
	dir string
	ctl int
}

type cgDir struct {
	ctl         int
	v1          bool
	first, last map[string]int64
	reads       int
	at          uint64 // event time of the last read
	peak        int64  // highest pids.current or memory usage read
	limited     bool
	gone        bool
}

func newCgroupLimit(arch event.Arch, live bool, canRead func() bool) *cgroupLimit {
	return &cgroupLimit{arch: arch, bar: slowMin, live: live, canRead: canRead, fs: hostFS{}, procs: map[uint32]*cgProc{}, dirs: map[cgKey]*cgDir{},
		watchEvery: cgRefresh * time.Nanosecond}
}

var forkCalls = map[string]bool{"fork": true, "vfork": true, "clone": true, "clone3": true}

const eagain = -11

func (c *cgroupLimit) Observe(e *event.Event) {
	p := c.procs[e.PID]
	if p == nil {
		p = &cgProc{comm: e.Comm}
		c.procs[e.PID] = p
		c.resolve(e.PID, p, e.Time)
	}
	if e.Comm != "" {
		p.comm = e.Comm
	}
	if e.Kind == event.KindExec {
		c.resolve(e.PID, p, e.Time)
	}
	if e.Kind == event.KindExit && e.Proc.GroupDead {
		code, sig, _ := e.Proc.Status()
		p.exited, p.code = true, code
		if sig != 0 {
			p.code = 128 + sig
		}
	}
	if e.Kind == event.KindReclaim && e.Reclaim.What == event.ReclaimMemcg {
		if hasFrame(e.Reclaim.Stack, memcgControlFrames) {
			return // asked for, not a limit reached
		}
		c.addPass(p, &e.Reclaim)
		if p.resolved == 0 || e.Time >= p.resolved+cgResolveEvery {
			c.resolve(e.PID, p, e.Time)
		}
		c.refresh(p, e.Time, true)
		return
	}
	if e.Kind != event.KindSyscall {
		c.refresh(p, e.Time, false)
		return
	}
	sc := &e.Syscall
	name := event.SyscallName(c.arch, sc.Nr)
	relevant := false
	switch {
	case forkCalls[name] && sc.Ret == eagain:
		relevant = true
		if p.forks == nil {
			p.forks = map[string]uint64{}
			p.forkEx = event.FormatSyscall(c.arch, sc)
		}
		p.forks[name]++
		if p.rlimit == nil && c.reads() {
			p.rlimit = c.nproc(e.PID, e.Time)
		}
	case len(sc.Sleeps) > 0 && !sc.Unfinished:
		if ns, ours := memcgReclaim(sc); ours {
			relevant = true
			c.addReclaim(p, sc, name, ns)
		} else if sc.Latency >= c.bar {
			if queued := queued(sc); queued*2 >= sc.Latency {
				relevant = true
				p.queued++
				p.queuedNS += queued
			}
		}
	}
	if relevant && (p.resolved == 0 || e.Time >= p.resolved+cgResolveEvery) {
		c.resolve(e.PID, p, e.Time)
	}
	c.refresh(p, e.Time, relevant)
}

func (c *cgroupLimit) addReclaim(p *cgProc, sc *event.Syscall, name string, ns uint64) {
	r := p.reclaim
	if r == nil {
		r = &reclaimCalls{calls: map[string]uint64{}}
		p.reclaim = r
	}
	r.calls[name]++
	r.n++
	r.totalNS += sc.Latency
	r.sleptNS += ns
	if ns > r.maxNS {
		r.maxNS = ns
		r.example = event.FormatSyscall(c.arch, sc) + fmt.Sprintf(" <%s>", units.Duration(sc.Latency))
		var longest *event.Sleep
		for i := range sc.Sleeps {
			sl := &sc.Sleeps[i]
			if hasFrame(sl.Stack, memcgFrames) && (longest == nil || sl.Duration > longest.Duration) {
				longest = sl
			}
		}
		r.stack = stackNames(longest.Stack)
	}
}

func (c *cgroupLimit) addPass(p *cgProc, r *event.Reclaim) {
	ps := p.passes
	if ps == nil {
		ps = &reclaimPasses{byCall: map[string]uint64{}}
		p.passes = ps
	}
	call := outsideCall
	if r.Nr >= 0 {
		call = event.SyscallName(c.arch, uint32(r.Nr))
	}
	ps.byCall[call] += r.Duration
	ps.n++
	ps.ns += r.Duration
	ps.pages += r.Pages
	if r.Duration >= ps.maxNS {
		ps.maxNS = r.Duration
		if len(r.Stack) > 0 || ps.stack == nil {
			ps.stack = stackNames(r.Stack)
		}
	}
}

// stackNames are a kernel stack's frames past the tracepoint's own.
func stackNames(fs []event.Frame) []string {
	var out []string
	for _, f := range fs {
		if fn := funcOf(f.Name); !tracingFrame(fn) {
			out = append(out, f.Name)
		}
	}
	return out
}

// resolve looks up the process's cgroup for each controller, and reads a
// cgroup the first time it is seen.
func (c *cgroupLimit) resolve(pid uint32, p *cgProc, now uint64) {
	if !c.reads() || c.resolved >= cgMaxResolves {
		return
	}
	c.resolved++
	p.resolved = max(now, 1)
	b, err := c.fs.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return // gone: keep what was known
	}
	var v2 string
	v1 := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = parts[2]
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			v1[ctl] = parts[2]
		}
	}
	for ctl := 0; ctl < nCtl; ctl++ {
		var dirs []string
		if path, ok := v1[ctlNames[ctl]]; ok {
			dirs = c.chain(ctl, "/sys/fs/cgroup/"+ctlNames[ctl], path, true)
		}
		if len(dirs) == 0 && v2 != "" {
			dirs = c.chain(ctl, "/sys/fs/cgroup", v2, false)
			if len(dirs) == 0 {
				dirs = c.chain(ctl, "/sys/fs/cgroup/unified", v2, false)
			}
		}
		p.dirs[ctl] = dirs
	}
}

// chain lists the cgroup at path and its ancestors (not the root, which
// has no limits) that carry the controller, reading each new one.
func (c *cgroupLimit) chain(ctl int, root, path string, v1 bool) []string {
	var dirs []string
	path = filepath.Clean("/" + path)
	for i := 0; path != "/" && i < 16; i++ {
		dir := root + path
		d, seen := c.dirs[cgKey{dir, ctl}]
		if !seen && len(c.dirs) < cgMaxDirs {
			if _, err := c.fs.ReadFile(dir + "/" + ctlProbe[ctl][b2i(!v1)]); err == nil {
				d = &cgDir{ctl: ctl, v1: v1}
				c.read(dir, d)
			}
			c.dirs[cgKey{dir, ctl}] = d
		}
		if d != nil {
			dirs = append(dirs, dir)
		}
		path = filepath.Dir(path)
	}
	return dirs
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// refresh reads the counters of the process's limited cgroups again, at
// most every cgRefresh, or every cgRefreshRelevant on an event that
// matters (a failed fork reads pids.current while the cgroup is full).
func (c *cgroupLimit) refresh(p *cgProc, now uint64, relevant bool) {
	if !c.reads() {
		return
	}
	every := uint64(cgRefresh)
	if relevant {
		every = cgRefreshRelevant
	}
	for ctl := range p.dirs {
		for _, dir := range p.dirs[ctl] {
			d := c.dirs[cgKey{dir, ctl}]
			if d == nil || !d.limited || d.gone || now < d.at+every {
				continue
			}
			d.at = now
			c.read(dir, d)
		}
	}
}

// read takes one snapshot of a cgroup's limits and counters.
func (c *cgroupLimit) read(dir string, d *cgDir) {
	s, ok := cgSnapshot(c.fs, dir, d.ctl, d.v1)
	if !ok {
		// Removed: the last read that saw it stays.
		d.gone = d.reads > 0
		return
	}
	d.reads++
	if d.first == nil {
		d.first = s
	}
	d.last = s
	d.peak = max(d.peak, s["current"])
	d.limited = s["max"] > 0 || s["high"] > 0 || s["quota"] > 0
	if d.ctl == ctlCPU && d.limited && c.reads() {
		if c.watch == nil {
			c.watch = newWatch(c.watchEvery, c.canRead)
		}
		fs, v1 := c.fs, d.v1
		c.watch.add(dir, func() (map[string]int64, bool) { return cgSnapshot(fs, dir, ctlCPU, v1) })
	}
}

// cgSnapshot reads a cgroup's limits and counters for one controller;
// false if the cgroup is not there.
func cgSnapshot(fs cgFS, dir string, ctl int, v1 bool) (map[string]int64, bool) {
	if _, err := fs.ReadFile(dir + "/" + ctlProbe[ctl][b2i(!v1)]); err != nil {
		return nil, false
	}
	s := map[string]int64{}
	get := func(file string) string {
		b, err := fs.ReadFile(dir + "/" + file)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	keyed := func(prefix, text string) {
		for _, line := range strings.Split(text, "\n") {
			if k, v, ok := strings.Cut(line, " "); ok {
				if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
					s[prefix+k] = n
				}
			}
		}
	}
	switch ctl {
	case ctlPids:
		s["max"] = limitValue(get("pids.max"))
		s["current"] = limitValue(get("pids.current"))
		keyed("events.", get("pids.events"))
	case ctlMemory:
		if v1 {
			s["max"] = limitValue(get("memory.limit_in_bytes"))
			s["high"] = -1
			s["current"] = limitValue(get("memory.usage_in_bytes"))
			s["failcnt"] = limitValue(get("memory.failcnt"))
			keyed("oom.", get("memory.oom_control"))
		} else {
			s["max"] = limitValue(get("memory.max"))
			s["high"] = limitValue(get("memory.high"))
			s["current"] = limitValue(get("memory.current"))
			keyed("events.", get("memory.events"))
		}
	case ctlCPU:
		if v1 {
			s["quota"] = limitValue(get("cpu.cfs_quota_us"))
			s["period"] = limitValue(get("cpu.cfs_period_us"))
		} else if q, per, ok := strings.Cut(get("cpu.max"), " "); ok {
			s["quota"] = limitValue(q)
			s["period"] = limitValue(per)
		}
		keyed("stat.", get("cpu.stat"))
		if ns, ok := s["stat.throttled_time"]; ok { // v1: ns
			s["stat.throttled_usec"] = ns / 1000
		}
	}
	return s, true
}

// limitValue reads a limit or counter: "max" and v1's "-1" or huge
// page-rounded LLONG_MAX are no limit (-1).
func limitValue(s string) int64 {
	if s == "" || s == "max" {
		return -1
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n >= 1<<62 {
		return -1
	}
	return n
}

// nproc reads, at a failed fork, the other limits that answer EAGAIN.
func (c *cgroupLimit) nproc(pid uint32, now uint64) *nprocFacts {
	f := &nprocFacts{uid: -1, limit: -1, tasks: -1, hard: -1, threadsMax: -1, nrThreads: -1, memAvailable: -1}
	if b, err := c.fs.ReadFile(fmt.Sprintf("/proc/%d/limits", pid)); err == nil {
		if soft, hard, ok := rlimit(string(b), "Max processes"); ok {
			f.limit, f.hard, f.limitRead = soft, hard, true
		}
	}
	f.uid = statusUID(c.fs, fmt.Sprintf("/proc/%d/status", pid))
	if f.uid > 0 {
		f.user = userName(c.fs, f.uid)
	}
	if b, err := c.fs.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
				if kb := limitValue(strings.TrimSuffix(strings.TrimSpace(v), " kB")); kb >= 0 {
					f.memAvailable = kb << 10
				}
			}
		}
	}
	// Root is exempt from RLIMIT_NPROC (copy_process checks the user is
	// not INIT_USER and lacks CAP_SYS_RESOURCE and CAP_SYS_ADMIN), so its
	// tasks need not be counted.
	if f.limit >= 0 && f.uid > 0 {
		u, ok := c.users[f.uid]
		if !ok || now >= u.at+cgRefresh {
			u = userCount{userTasks(c.fs, f.uid), now}
			if c.users == nil {
				c.users = map[int64]userCount{}
			}
			c.users[f.uid] = u
		}
		f.tasks = u.tasks
	}
	if b, err := c.fs.ReadFile("/proc/sys/kernel/threads-max"); err == nil {
		f.threadsMax = limitValue(strings.TrimSpace(string(b)))
	}
	if b, err := c.fs.ReadFile("/proc/loadavg"); err == nil {
		if fs := strings.Fields(string(b)); len(fs) >= 4 {
			if _, total, ok := strings.Cut(fs[3], "/"); ok {
				f.nrThreads = limitValue(total)
			}
		}
	}
	return f
}

// userName is uid's name in /etc/passwd, or "".
func userName(fs cgFS, uid int64) string {
	b, err := fs.ReadFile("/etc/passwd")
	if err != nil {
		return ""
	}
	id := strconv.FormatInt(uid, 10)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Split(line, ":"); len(f) > 2 && f[2] == id {
			return f[0]
		}
	}
	return ""
}

// statusUID is the real uid in a /proc status file; -1 if unknown.
func statusUID(fs cgFS, path string) int64 {
	b, err := fs.ReadFile(path)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				return limitValue(f[0])
			}
		}
	}
	return -1
}

// userTasks counts the threads of a user's processes, as RLIMIT_NPROC
// does.
func userTasks(fs cgFS, uid int64) int64 {
	names, err := fs.ReadDir("/proc")
	if err != nil {
		return -1
	}
	var n int64
	for _, name := range names {
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := fs.ReadFile("/proc/" + name + "/status")
		if err != nil {
			continue
		}
		var u, threads int64 = -1, 1
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					u = limitValue(f[0])
				}
			} else if v, ok := strings.CutPrefix(line, "Threads:"); ok {
				threads = limitValue(strings.TrimSpace(v))
			}
		}
		if u == uid {
			n += threads
		}
	}
	return n
}

func (d *cgDir) delta(key string) int64 {
	if d.first == nil || d.last == nil {
		return 0
	}
	return max(d.last[key]-d.first[key], 0)
}

func (c *cgroupLimit) Findings(env *Env) []Finding {
	if c.reads() {
		for k, d := range c.dirs {
			if d != nil && d.limited && !d.gone {
				c.read(k.dir, d)
			}
		}
	}
	if c.watch != nil {
		// A cgroup removed before the report: the watch's last read of
		// it, when it came after the events' last.
		c.watch.close()
		for k, d := range c.dirs {
			if d == nil || k.ctl != ctlCPU || d.last == nil {
				continue
			}
			if s := c.watch.latest(k.dir); s != nil && s["stat.nr_periods"] > d.last["stat.nr_periods"] {
				d.last = s
				d.reads++
			}
		}
	}
	var out []Finding
	out = append(out, c.pidsFindings(env)...)
	out = append(out, c.memoryFindings(env)...)
	out = append(out, c.cpuFindings(env)...)
	return out
}

func (c *cgroupLimit) sortedPIDs() []uint32 {
	pids := make([]uint32, 0, len(c.procs))
	for pid := range c.procs {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	return pids
}

// pidsVerdict is the limit a fork's EAGAIN came from, as the facts show.
type pidsVerdict struct {
	kind string // "cgroup", "rlimit", "threads-max", "" unknown
	dir  string
}

// atPidsMax: the limiting cgroup in the chain is the innermost one whose
// pids.max was hit during the run (pids.events max grew), was seen
// reached, or, read only once, has been hit since it was made.
func (c *cgroupLimit) atPidsMax(p *cgProc) string {
	for _, pass := range []int{0, 1, 2} {
		for _, dir := range p.dirs[ctlPids] {
			d := c.dirs[cgKey{dir, ctlPids}]
			if d == nil || d.last == nil || d.last["max"] < 0 {
				continue
			}
			switch {
			case pass == 0 && d.delta("events.max") > 0,
				pass == 1 && d.peak >= d.last["max"],
				pass == 2 && d.last["events.max"] > 0:
				return dir
			}
		}
	}
	return ""
}

func (c *cgroupLimit) pidsFindings(env *Env) []Finding {
	type group struct {
		v     pidsVerdict
		calls map[string]uint64
		n     uint64
		procs []string
		ex    string
		facts *nprocFacts
		pids  []uint32
		// stuck: a process failed cgForkRetryMin times or gave up
		// (exited non-zero, or was killed, after failing).
		stuck    bool
		gaveUp   int
		first    *cgProc
		maxFails uint64
	}
	groups := map[pidsVerdict]*group{}
	var order []pidsVerdict
	for _, pid := range c.sortedPIDs() {
		p := c.procs[pid]
		if p.forks == nil {
			continue
		}
		v := pidsVerdict{}
		if dir := c.atPidsMax(p); dir != "" {
			v = pidsVerdict{kind: "cgroup", dir: dir}
		} else if f := p.rlimit; f != nil && f.limit >= 0 && f.tasks >= f.limit {
			v.kind = "rlimit"
		} else if f != nil && f.threadsMax > 0 && f.nrThreads >= f.threadsMax {
			v.kind = "threads-max"
		}
		g := groups[v]
		if g == nil {
			g = &group{v: v, calls: map[string]uint64{}, ex: p.forkEx, facts: p.rlimit, first: p}
			groups[v] = g
			order = append(order, v)
		}
		var fails uint64
		for k, n := range p.forks {
			g.calls[k] += n
			g.n += n
			fails += n
		}
		g.maxFails = max(g.maxFails, fails)
		if p.exited && p.code != 0 {
			g.gaveUp++
			g.stuck = true
		}
		if fails >= cgForkRetryMin {
			g.stuck = true
		}
		g.procs = append(g.procs, env.ProcName(pid, p.comm))
		g.pids = append(g.pids, pid)
	}
	var out []Finding
	for _, v := range order {
		g := groups[v]
		ev := map[string]any{"failed_calls": g.calls, "count": g.n, "processes": capList(g.procs), "example": g.ex}
		if f := g.facts; f != nil {
			if f.limitRead {
				ev["rlimit_nproc"], ev["rlimit_nproc_hard"] = f.limit, f.hard
			}
			if f.tasks >= 0 {
				ev["user_tasks"] = f.tasks
			}
			ev["threads_max"], ev["nr_threads"] = f.threadsMax, f.nrThreads
			if f.user != "" {
				ev["user"] = f.user
			}
			if f.memAvailable >= 0 {
				ev["mem_available_bytes"] = f.memAvailable
			}
		}
		ev["max_failures_per_process"] = g.maxFails
		if g.gaveUp > 0 {
			ev["gave_up"] = g.gaveUp
		}
		what := fmt.Sprintf("%d %s call(s) failed with EAGAIN", g.n, callList(g.calls))
		sev := Warning
		var title, summary, fix string
		switch v.kind {
		case "cgroup":
			d := c.dirs[cgKey{v.dir, ctlPids}]
			ev["cgroup"] = v.dir
			ev["pids.max"], ev["pids.current"], ev["pids.current_peak_seen"] = d.last["max"], d.last["current"], d.peak
			ev["pids.events_max"], ev["pids.events_max_during_run"] = d.last["events.max"], d.delta("events.max")
			title = fmt.Sprintf("%s: the cgroup %s is at its pids.max (%d)", what, v.dir, d.last["max"])
			summary = fmt.Sprintf("%s in %s. The cgroup %s allows %d tasks (pids.max) and held %d when read (at most %d seen); "+
				"its pids.events counts %d refusals (max), %d of them during this run. Threads count as tasks too, so "+
				"a program at the limit can start neither processes nor threads: the container, not the host, is full.",
				what, strings.Join(capList(g.procs), "; "), v.dir, d.last["max"], d.last["current"], d.peak,
				d.last["events.max"], d.delta("events.max"))
			summary = joinSentences(summary, otherLimitsText(g.facts))
			fix = "Raise the cgroup's pids.max (the container runtime's pids limit: docker --pids-limit, the pod's " +
				"pid limit, systemd TasksMax), or find what fills it: a leak of threads or children that are never reaped."
		case "rlimit":
			f := g.facts
			who := fmt.Sprintf("uid %d", f.uid)
			if f.user != "" {
				who = fmt.Sprintf("uid %d (%s)", f.uid, f.user)
			}
			title = fmt.Sprintf("%s: the user's RLIMIT_NPROC (%d) is reached, not a cgroup limit", what, f.limit)
			summary = fmt.Sprintf("%s in %s. EAGAIN reads \"Resource temporarily unavailable\", as if memory or the container were short; "+
				"here the kernel refused a new process or thread because %s runs %d tasks (threads included) and the soft "+
				"RLIMIT_NPROC of the process is %d (hard %s). The count is per user, not per process or cgroup: every task of "+
				"%s on the host counts, other programs' included, and it stays refused until some of them end.", what,
				strings.Join(capList(g.procs), "; "), who, f.tasks, f.limit, limitText(f.hard), who)
			ev["uid"] = f.uid
			summary = joinSentences(summary, c.notShortText(g.first, f, ev))
			fix = nprocFix(f)
		case "threads-max":
			f := g.facts
			title = fmt.Sprintf("%s: the host is at kernel.threads-max (%d), not a cgroup limit", what, f.threadsMax)
			summary = fmt.Sprintf("%s in %s. The host runs %d tasks and kernel.threads-max is %d: no process on the host can "+
				"start a thread or process.", what, strings.Join(capList(g.procs), "; "), f.nrThreads, f.threadsMax)
			fix = "Find what runs so many tasks (ps -eLf | wc -l, by user and cgroup), or raise kernel.threads-max."
		default:
			sev = Info
			title = what
			summary = fmt.Sprintf("%s in %s, but no limit was found reached: ", what, strings.Join(capList(g.procs), "; "))
			if f := g.facts; c.live && f != nil && !f.limitRead {
				summary += "the process had ended before its RLIMIT_NPROC could be read (/proc/PID/limits), so the user's " +
					"limit is unknown; its cgroups were below pids.max and the host below threads-max when read. " +
					"The kernel also answers EAGAIN when the pid space (kernel.pid_max) is exhausted."
			} else if c.live {
				summary += "the process's cgroups were below pids.max when read, its user below RLIMIT_NPROC, the host below " +
					"threads-max. The kernel also answers EAGAIN when the pid space (kernel.pid_max) is exhausted."
			} else {
				summary += "the limits are read only live (pids.max, RLIMIT_NPROC, threads-max)."
			}
			fix = "Run the doctor live while it happens to see which limit is reached."
		}
		if sev == Warning && !g.stuck {
			sev = Info
			summary = joinSentences(summary, fmt.Sprintf("Handled, by the look of it: no process failed more than %d time(s), "+
				"and none gave up (exited non-zero); a program that probes for a task slot and carries on with what it got "+
				"is not stuck. Warned at %d failures in one process, or one and an exit.", g.maxFails, cgForkRetryMin))
		} else if g.gaveUp > 0 {
			summary = joinSentences(summary, fmt.Sprintf("%d of the processes gave up: they exited non-zero or were killed.", g.gaveUp))
		}
		// Each failure is a process or thread lost: weigh it as a
		// millisecond of stall, so a storm of them ranks with long stalls.
		out = append(out, Finding{ID: CgroupLimit, Severity: sev, Title: title, Summary: summary, Evidence: ev, Fix: fix,
			Score: float64(g.n) * 1e6, Key: keyOf("pids", g.v.kind, g.v.dir), Syscalls: byValue(g.calls), Procs: env.refs(g.pids...)})
	}
	return out
}

// notShortText says what a fork's EAGAIN did not come from: the host's
// memory and the cgroup's pids.max, as read.
func (c *cgroupLimit) notShortText(p *cgProc, f *nprocFacts, ev map[string]any) string {
	var parts []string
	if f.memAvailable >= 0 {
		parts = append(parts, fmt.Sprintf("the host has %s of memory available", mib(f.memAvailable)))
	}
	if p != nil {
		limited := false
		for _, dir := range p.dirs[ctlPids] {
			d := c.dirs[cgKey{dir, ctlPids}]
			if d == nil || d.last == nil || d.last["max"] < 0 {
				continue
			}
			limited = true
			ev["cgroup"], ev["pids.max"], ev["pids.current"] = dir, d.last["max"], d.last["current"]
			parts = append(parts, fmt.Sprintf("the cgroup %s holds %d tasks of its pids.max %d", dir, d.last["current"], d.last["max"]))
			break
		}
		if !limited && c.live {
			parts = append(parts, "no cgroup of the process sets pids.max")
		}
	}
	if f.threadsMax > 0 && f.nrThreads >= 0 {
		parts = append(parts, fmt.Sprintf("the host runs %d tasks of kernel.threads-max %d", f.nrThreads, f.threadsMax))
	}
	if len(parts) == 0 {
		return ""
	}
	return "Not short of anything else: " + strings.Join(parts, ", ") + "."
}

func limitText(n int64) string {
	if n < 0 {
		return "unlimited"
	}
	return strconv.FormatInt(n, 10)
}

// nprocFix is the command that raises the limit, with the user's name and
// a value twice the limit as the example (the user's count is at the
// limit, so any raise helps only if it covers what the program means to
// start; twice is a round first step, not a measured need).
func nprocFix(f *nprocFacts) string {
	user := f.user
	if user == "" {
		user = "USER"
	}
	n := 2 * f.limit
	if n < 64 {
		n = 64
	}
	s := fmt.Sprintf("Raise the soft RLIMIT_NPROC above the tasks %s needs (it runs %d now), where the program is started: "+
		"`ulimit -u %d` in the shell or script that starts it", user, f.tasks, n)
	if f.hard >= 0 && f.hard < n {
		s += fmt.Sprintf(" (the hard limit is %d: raise it as root, `ulimit -H -u %d`, first)", f.hard, n)
	}
	s += fmt.Sprintf("; LimitNPROC=%d in its systemd unit ([Service]); or `%s soft nproc %d` (and `hard`) in "+
		"/etc/security/limits.conf for login sessions. Or run fewer processes and threads as that user: each thread counts.", n, user, n)
	return s
}

func otherLimitsText(f *nprocFacts) string {
	if f == nil {
		return ""
	}
	var parts []string
	if !f.limitRead {
		parts = append(parts, "the process's RLIMIT_NPROC could not be read (it had ended)")
	} else if f.limit < 0 {
		parts = append(parts, "RLIMIT_NPROC is unlimited")
	} else if f.uid == 0 {
		parts = append(parts, "the user is root, whom RLIMIT_NPROC does not limit")
	} else if f.tasks >= 0 {
		parts = append(parts, fmt.Sprintf("the user runs %d tasks of its RLIMIT_NPROC %d", f.tasks, f.limit))
	}
	if f.threadsMax > 0 && f.nrThreads >= 0 {
		parts = append(parts, fmt.Sprintf("the host runs %d tasks of kernel.threads-max %d", f.nrThreads, f.threadsMax))
	}
	if len(parts) == 0 {
		return ""
	}
	return "Not the other limits that answer EAGAIN: " + strings.Join(parts, ", and ") + "."
}

// memLimitDir is the cgroup whose memory limit the calls met: the
// innermost whose counters say a limit was hit during the run, else the
// one closest to its limit.
func (c *cgroupLimit) memLimitDir(p *cgProc) string {
	best, bestRatio := "", -1.0
	for _, dir := range p.dirs[ctlMemory] {
		d := c.dirs[cgKey{dir, ctlMemory}]
		if d == nil || d.last == nil || !d.limited {
			continue
		}
		if d.delta("events.high")+d.delta("events.max")+d.delta("failcnt") > 0 {
			return dir
		}
		limit := d.last["max"]
		if h := d.last["high"]; h > 0 && (limit < 0 || h < limit) {
			limit = h
		}
		if limit > 0 {
			if r := float64(d.peak) / float64(limit); r > bestRatio {
				best, bestRatio = dir, r
			}
		}
	}
	return best
}

func (c *cgroupLimit) memoryFindings(env *Env) []Finding {
	type group struct {
		dir   string
		r     reclaimCalls
		ps    reclaimPasses
		procs []string
		pids  []uint32
	}
	groups := map[string]*group{}
	var order []string
	for _, pid := range c.sortedPIDs() {
		p := c.procs[pid]
		if p.reclaim == nil && p.passes == nil {
			continue
		}
		dir := c.memLimitDir(p)
		g := groups[dir]
		if g == nil {
			g = &group{dir: dir, r: reclaimCalls{calls: map[string]uint64{}}, ps: reclaimPasses{byCall: map[string]uint64{}}}
			groups[dir] = g
			order = append(order, dir)
		}
		if p.reclaim != nil {
			g.r.add(p.reclaim)
		}
		if p.passes != nil {
			g.ps.add(p.passes)
		}
		g.procs = append(g.procs, env.ProcName(pid, p.comm))
		g.pids = append(g.pids, pid)
	}
	var out []Finding
	for _, dir := range order {
		g := groups[dir]
		r, ps := &g.r, &g.ps
		// The time lost to the limit: the kernel's own timing of the
		// reclaim passes where the capture has it; else the sleeps of the
		// slow calls, which see only calls ≥ the bar and none of the
		// reclaim done on the CPU, so a lower bound. The sleeps can also
		// hold memory.high's penalty, outside any pass: the larger counts.
		lost := max(ps.ns, r.sleptNS)
		// 100 ms lost to the limit is a stall a user sees (slowWarn),
		// whether in one call or over many short ones: a limit hit
		// thousands of times costs as much as one long wait.
		sev := Info
		if lost >= slowWarn || r.maxNS >= slowWarn {
			sev = Warning
		}
		ev := map[string]any{"processes": capList(g.procs), "lost_ns": lost}
		if r.n > 0 {
			ev["syscalls"], ev["count"], ev["total_ns"], ev["reclaim_ns"] = r.calls, r.n, r.totalNS, r.sleptNS
			ev["max_reclaim_ns"], ev["stack"], ev["example"] = r.maxNS, r.stack, r.example
		}
		if ps.n > 0 {
			ev["reclaim_passes"], ev["reclaim_pass_ns"], ev["reclaim_pass_max_ns"] = ps.n, ps.ns, ps.maxNS
			ev["reclaim_pages"], ev["reclaim_ns_by_call"] = ps.pages, ps.byCall
			ev["reclaimed_bytes"] = int64(ps.pages) * 4096
			if len(ps.stack) > 0 {
				ev["reclaim_stack"] = ps.stack
			}
		}
		where := "a memory cgroup"
		limitText := ""
		if d := c.dirs[cgKey{dir, ctlMemory}]; d != nil && d.last != nil {
			where = dir
			ev["cgroup"] = dir
			l := d.last
			if d.v1 {
				ev["memory.limit_in_bytes"], ev["memory.usage_in_bytes"], ev["memory.failcnt"] = l["max"], l["current"], l["failcnt"]
				ev["memory.failcnt_during_run"] = d.delta("failcnt")
				ev["oom_kill"] = l["oom.oom_kill"]
				limitText = fmt.Sprintf(" Its memory.limit_in_bytes is %s and it used %s when read (at most %s seen); the limit was hit "+
					"%d times during this run (memory.failcnt), %d in all; the OOM killer ran in it %d times.",
					mib(l["max"]), mib(l["current"]), mib(d.peak), d.delta("failcnt"), l["failcnt"], l["oom.oom_kill"])
			} else {
				events := map[string]int64{"high": l["events.high"], "max": l["events.max"], "oom": l["events.oom"], "oom_kill": l["events.oom_kill"]}
				during := map[string]int64{"high": d.delta("events.high"), "max": d.delta("events.max"), "oom": d.delta("events.oom"),
					"oom_kill": d.delta("events.oom_kill")}
				ev["memory.high"], ev["memory.max"], ev["memory.current"] = l["high"], l["max"], l["current"]
				ev["memory.events"], ev["memory.events_during_run"] = events, during
				limitText = fmt.Sprintf(" Its memory.high is %s and memory.max %s; it used %s when read (at most %s seen). "+
					"memory.events during this run: high %d, max %d, oom %d (in all: high %d, max %d, oom %d).",
					mib(l["high"]), mib(l["max"]), mib(l["current"]), mib(d.peak), during["high"], during["max"], during["oom"],
					events["high"], events["max"], events["oom"])
			}
		}
		procs := strings.Join(capList(g.procs), "; ")
		why := "the cgroup was at its memory limit, so every page the calls added (page cache for reads and writes, memory " +
			"touched inside the call) first had to be reclaimed from the cgroup itself, or waited out memory.high's penalty."
		var title, summary string
		if ps.n > 0 {
			title = fmt.Sprintf("%s spent %s in memory-cgroup reclaim (%d passes): %s is at its memory limit",
				callList(ps.byCall), units.Duration(lost), ps.n, where)
			summary = fmt.Sprintf("%s reclaimed memory from its own cgroup %d times, %s in all (up to %s in one pass; %s "+
				"reclaimed), charging memory in %s: %s", procs, ps.n, units.Duration(ps.ns), units.Duration(ps.maxNS),
				mib(int64(ps.pages)*4096), byCallText(ps.byCall), why)
			if r.n > 0 {
				summary = joinSentences(summary, fmt.Sprintf("%d call(s) slower than %s slept %s of their %s asleep charging memory (up to %s in one call).",
					r.n, units.Duration(c.bar), units.Duration(r.sleptNS), units.Duration(r.totalNS), units.Duration(r.maxNS)))
			}
		} else {
			calls := fmt.Sprintf("%d %s call(s)", r.n, callList(r.calls))
			title = fmt.Sprintf("%s slept %s in memory-cgroup reclaim: %s is at its memory limit", calls, units.Duration(r.sleptNS), where)
			summary = fmt.Sprintf("%s in %s took %s in all, %s of it asleep charging memory to the cgroup (up to %s in one call): %s",
				calls, procs, units.Duration(r.totalNS), units.Duration(r.sleptNS), units.Duration(r.maxNS), why)
		}
		summary += limitText + " The host may have free memory; the container does not."
		fix := "Raise the container's memory limit (memory.high / memory.max, docker --memory, the pod's limits), or make " +
			"the work fit it: stream files instead of caching them (posix_fadvise DONTNEED after use, O_DIRECT), " +
			"write back dirty data sooner (sync_file_range, fsync), use less memory per request."
		out = append(out, Finding{ID: CgroupLimit, Severity: sev, Title: title, Summary: summary, Evidence: ev, Fix: fix,
			Score: float64(lost), Key: keyOf("memory", dir), Procs: env.refs(g.pids...)})
	}
	return out
}

// byCallText lists where reclaim time went, largest first.
func byCallText(m map[string]uint64) string {
	keys := byValue(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s (%s)", k, units.Duration(m[k]))
	}
	return strings.Join(parts, ", ")
}

func mib(n int64) string {
	if n < 0 {
		return "max"
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func (c *cgroupLimit) cpuFindings(env *Env) []Finding {
	type group struct {
		procs            []string
		pids             []uint32
		queued, queuedNS uint64
	}
	groups := map[string]*group{}
	for _, pid := range c.sortedPIDs() {
		p := c.procs[pid]
		for _, dir := range p.dirs[ctlCPU] {
			d := c.dirs[cgKey{dir, ctlCPU}]
			if d == nil || d.last == nil || d.last["quota"] <= 0 || d.delta("stat.nr_throttled") == 0 {
				continue
			}
			g := groups[dir]
			if g == nil {
				g = &group{}
				groups[dir] = g
			}
			g.procs = append(g.procs, env.ProcName(pid, p.comm))
			g.pids = append(g.pids, pid)
			g.queued += p.queued
			g.queuedNS += p.queuedNS
		}
	}
	dirs := make([]string, 0, len(groups))
	for dir := range groups {
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	var out []Finding
	for _, dir := range dirs {
		g, d := groups[dir], c.dirs[cgKey{dir, ctlCPU}]
		l := d.last
		throttled := uint64(d.delta("stat.throttled_usec")) * 1000
		nThr, nPer := d.delta("stat.nr_throttled"), d.delta("stat.nr_periods")
		// A throttled cgroup's runnable tasks wait for the next period:
		// up to period − quota at a time. 100 ms of that is a stall a user
		// sees (slowWarn), whether in one period or spread over many.
		sev := Info
		if throttled >= slowWarn {
			sev = Warning
		}
		limit := fmt.Sprintf("cpu.max %d %d", l["quota"], l["period"])
		if d.v1 {
			limit = fmt.Sprintf("cpu.cfs_quota_us %d per cpu.cfs_period_us %d", l["quota"], l["period"])
		}
		share := float64(l["quota"]) / float64(max(l["period"], 1))
		title := fmt.Sprintf("The cgroup %s was CPU-throttled for %s during the run (%s)", dir, units.Duration(throttled), limit)
		summary := fmt.Sprintf("The cgroup %s may use %.2f CPU (%s). During the run its tasks used up that quota in %d of %d periods and "+
			"were then held off the CPU until the next period, %s in all, added over the CPUs they were queued on "+
			"(cpu.stat nr_throttled, throttled time), although they were ready to run. Traced in it: %s.", dir, share, limit, nThr, nPer, units.Duration(throttled),
			strings.Join(capList(g.procs), "; "))
		if g.queued > 0 {
			summary = joinSentences(summary, fmt.Sprintf("%d traced syscall(s) spent most of their time, %s in all, preempted and "+
				"waiting for a CPU: they look slow because the task was not allowed to run.", g.queued, units.Duration(g.queuedNS)))
		} else {
			summary = joinSentences(summary, "No traced syscall was stretched by it: since Linux 6.18 a throttled task is stopped "+
				"when it returns to user space, so the time falls between syscalls, in the program's own code.")
		}
		ev := map[string]any{"cgroup": dir, "quota_us": l["quota"], "period_us": l["period"], "cpus": share, "nr_throttled": nThr, "nr_periods": nPer,
			"throttled_ns": throttled, "processes": capList(g.procs)}
		if g.queued > 0 {
			ev["preempted_slow_calls"], ev["preempted_ns"] = g.queued, g.queuedNS
		}
		fix := "Raise the cgroup's CPU quota (cpu.max; docker --cpus, the pod's CPU limit) or remove it and rely on weights " +
			"(cpu.weight, requests), or make the work need less CPU; a longer period (cpu.max's second number) spreads the " +
			"same quota into shorter stalls."
		out = append(out, Finding{ID: CgroupLimit, Severity: sev, Title: title, Summary: summary, Evidence: ev, Fix: fix,
			Score: float64(throttled), Key: keyOf("cpu", dir), Procs: env.refs(g.pids...)})
	}
	return out
}

// capList keeps a list of processes short in a report.
func capList(l []string) []string {
	if len(l) <= 8 {
		return l
	}
	return append(l[:8:8], fmt.Sprintf("and %d more", len(l)-8))
}

// reads reports whether the detector may read the host's files now.
func (c *cgroupLimit) reads() bool { return c.live && (c.canRead == nil || c.canRead()) }

// forget drops ended processes (Doctor.forget) that hold nothing a finding
// is made of: a failed fork, reclaim, or a wait for a CPU.
func (c *cgroupLimit) forget(pids, _ map[uint32]bool) {
	for pid := range pids {
		if p := c.procs[pid]; p != nil && p.forks == nil && p.reclaim == nil && p.passes == nil && p.queued == 0 {
			delete(c.procs, pid)
		}
	}
}
