package doctor

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/units"
)

// The finding it reports.
const (
	BlockedIO ID = "blocked-in-kernel-io"
)

func init() {
	register(registration{ids: []ID{BlockedIO},
		build: func(h *Host) Detector { return newBlockedIO(h.Arch, h.Live, h.canRead) }})
}

// blockedIO finds syscalls that did not ask for I/O but waited for the
// storage anyway: a write to a log throttled in balance_dirty_pages because
// too much of memory was dirty, an unlink or truncate waiting for the
// device to discard the blocks it freed (a file system mounted with
// `discard`, which ext4 without a journal issues inside the call), a rename
// or close behind the journal or behind writeback. The program cannot see
// why its unlink took 200 ms; the mount options and the dirty limits say.
//
// Calls that are I/O by design (reads, fsync and its kin, page-cache
// management) are left to slow-syscall, which reports a wait for the
// device as the device's latency.
type blockedIO struct {
	arch    event.Arch
	live    bool
	canRead func() bool          // live, and opening files does not stall now
	groups  map[string]*bioGroup // by cause and mount
	// pidMounts reads the mounts pid sees; mounts lists the host's; sysctl
	// reads /proc/sys. Replaced in tests.
	pidMounts func(pid uint32) []mount
	mounts    func() []mount
	sysctl    func(name string) string
	// seen caches each process's mounts from when its first blocked call
	// was observed: events are read after the fact, and a file system a
	// process used may be gone by then (a job that unmounts its scratch
	// space on the way out).
	seen map[uint32][]mount
}

type mount struct {
	point, fstype, source, options string
}

type bioGroup struct {
	cause   string
	mount   *mount
	calls   map[string]uint64
	procs   map[uint32]string
	n       uint64
	waitNS  uint64 // asleep in the cause's frames
	totalNS uint64
	maxNS   uint64
	example string
	stack   []string
	files   map[string]bool
	limits  map[string]string // dirty-throttle: vm.dirty_* when first seen (a job may change them back)
}

// The blocked-I/O rule: a warning when the waits are ≥ warnShare of the
// time of the processes that made them and ≥ warnWaitNS in all (removing
// them makes the processes a third faster, as for kernel-hotspot); else
// info. And at least bioMinCalls such calls: the cost must recur. One
// stall is a one-off price, however large a share of a short process it
// is (the benign corpus saw sqlite3 wait 185 ms, 83% of its life, once,
// deleting its WAL on a disk mounted with discard, and git 100 ms once
// in a rename): true, and info.
const (
	bioMinCalls = 3
)

func newBlockedIO(arch event.Arch, live bool, canRead func() bool) *blockedIO {
	return &blockedIO{arch: arch, live: live, canRead: canRead, groups: map[string]*bioGroup{}, seen: map[uint32][]mount{},
		pidMounts: procMounts, mounts: hostMounts, sysctl: readSysctl}
}

func (b *blockedIO) Observe(e *event.Event) {
	if e.Kind != event.KindSyscall || e.Syscall.Unfinished || len(e.Syscall.Sleeps) == 0 {
		return
	}
	sc := &e.Syscall
	name := event.SyscallName(b.arch, sc.Nr)
	cause, ns, stack := bioCause(name, sc)
	if cause == "" {
		return
	}
	// Live, the file's mount: the call's path, or the file behind its fd
	// (still open unless the call was close).
	var m *mount
	file := b.file(e.PID, sc, name)
	if b.reads() && file != "" {
		ms, ok := b.seen[e.PID]
		if !ok {
			ms = b.pidMounts(e.PID)
			b.seen[e.PID] = ms
		}
		m = mountOf(ms, file)
	}
	key := cause
	if m != nil {
		key += "\x00" + m.point
	}
	g := b.groups[key]
	if g == nil {
		g = &bioGroup{cause: cause, mount: m, calls: map[string]uint64{}, procs: map[uint32]string{}, files: map[string]bool{}}
		b.groups[key] = g
		if cause == "dirty-throttle" && b.reads() {
			g.limits = map[string]string{}
			for _, k := range []string{"dirty_bytes", "dirty_ratio", "dirty_background_bytes", "dirty_background_ratio"} {
				if v := b.sysctl("vm/" + k); v != "" {
					g.limits[k] = v
				}
			}
		}
	}
	g.calls[name]++
	g.procs[e.PID] = e.Comm
	g.n++
	g.waitNS += ns
	g.totalNS += sc.Latency
	if file != "" && len(g.files) < 8 {
		g.files[file] = true
	}
	if sc.Latency > g.maxNS {
		g.maxNS = sc.Latency
		g.example = event.FormatSyscall(b.arch, sc) + " <" + units.Duration(sc.Latency) + ">"
		g.stack = nil
		for _, f := range stack {
			if fn := funcOf(f.Name); !contains(schedFrames, fn) && !tracingFrame(fn) {
				g.stack = append(g.stack, f.Name)
			}
		}
	}
}

// file is the path the call worked on: its path argument, made absolute
// with the process's working directory, or live the target of its fd.
func (b *blockedIO) file(pid uint32, sc *event.Syscall, name string) string {
	spec := event.Lookup(b.arch, sc.Nr)
	if spec == nil {
		return ""
	}
	for i, a := range spec.Args {
		if i >= 6 {
			break
		}
		if len(sc.Data[i]) > 0 {
			p := string(sc.Data[i])
			if !filepath.IsAbs(p) && b.reads() {
				// Relative to the directory descriptor before it (the
				// *at calls: rm -rf unlinks each entry relative to its
				// directory), unless that is AT_FDCWD; else to the cwd.
				// A directory that cannot be read leaves the name as
				// the call gave it: joined to the cwd it would name
				// another file.
				at := fmt.Sprintf("/proc/%d/cwd", pid)
				if i > 0 && spec.Args[i-1].Kind == event.ArgDirFd && int32(sc.Args[i-1]) != -100 /* AT_FDCWD */ {
					at = fmt.Sprintf("/proc/%d/fd/%d", pid, int32(sc.Args[i-1]))
				}
				if dir, err := os.Readlink(at); err == nil && strings.HasPrefix(dir, "/") {
					p = filepath.Join(dir, p)
				}
			}
			return p
		}
		if a.Kind == event.ArgFd && b.reads() && name != "close" {
			if t, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, int32(sc.Args[i]))); err == nil && strings.HasPrefix(t, "/") {
				return t
			}
		}
	}
	return ""
}

var bioWhat = map[string]string{
	"discard":        "the device to discard the blocks the call freed",
	"dirty-throttle": "writeback: the kernel throttled the writer because too much memory was dirty (balance_dirty_pages)",
	"journal":        "the file system's journal (a commit, or room in it)",
	"writeback":      "pages of the file to finish writing back to the device",
	"flush":          "the device to flush its cache",
}

// mergeUnresolved folds a group whose calls named no file we could find
// (an fd closed before the event was read, the process gone) into the
// group of the same cause on a mount, when there is exactly one: the
// calls were the same work, seen a little late.
func (b *blockedIO) mergeUnresolved() {
	for key, u := range b.groups {
		if u.mount != nil {
			continue
		}
		var into *bioGroup
		n := 0
		for _, g := range b.groups {
			if g.mount != nil && g.cause == u.cause {
				into = g
				n++
			}
		}
		if n != 1 {
			continue
		}
		for c, k := range u.calls {
			into.calls[c] += k
		}
		for pid, comm := range u.procs {
			into.procs[pid] = comm
		}
		into.n += u.n
		into.waitNS += u.waitNS
		into.totalNS += u.totalNS
		if u.maxNS > into.maxNS {
			into.maxNS, into.example, into.stack = u.maxNS, u.example, u.stack
		}
		delete(b.groups, key)
	}
}

func (b *blockedIO) Findings(env *Env) []Finding {
	tt, _ := env.threadTime()
	b.mergeUnresolved()
	var out []Finding
	for _, g := range b.groups {
		var procTime uint64
		var procs []string
		pids := make([]uint32, 0, len(g.procs))
		for pid := range g.procs {
			pids = append(pids, pid)
			procTime += tt[pid]
		}
		sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
		for i, pid := range pids {
			if i == 8 {
				break
			}
			procs = append(procs, env.ProcName(pid, g.procs[pid]))
		}
		share := 0.0
		if procTime > 0 {
			share = float64(g.waitNS) / float64(procTime)
		}
		sev := Info
		if share >= warnShare && g.waitNS >= warnWaitNS && g.n >= bioMinCalls {
			sev = Warning
		}
		calls := callList(g.calls)
		ev := map[string]any{"cause": g.cause, "syscalls": g.calls, "count": g.n, "wait_ns": g.waitNS, "total_ns": g.totalNS,
			"max_ns": g.maxNS, "example": g.example, "stack": g.stack, "processes": procs}
		if procTime > 0 {
			ev["share_of_process_time"] = fmt.Sprintf("%.0f%%", 100*share)
		}
		var files []string
		for f := range g.files {
			files = append(files, f)
		}
		sort.Strings(files)
		if len(files) > 0 {
			ev["files"] = files
		}
		where, why, fix := b.explain(g, ev)
		who := procs[0]
		if len(pids) > 1 {
			who = fmt.Sprintf("%d processes (%s, …)", len(pids), procs[0])
		}
		point := ""
		if g.mount != nil {
			point = g.mount.point
		}
		// As the calls are grouped: by cause and mount.
		f := Finding{ID: BlockedIO, Severity: sev, Key: keyOf(g.cause, point), Syscalls: byValue(g.calls), Procs: env.refs(pids...),
			Title: fmt.Sprintf("%d %s waited for %s%s, up to %s", g.n, calls, bioShort[g.cause], where, units.Duration(g.maxNS)),
			Summary: fmt.Sprintf("%s made %d %s call(s) that do not ask for I/O, yet waited %s in all (up to %s a call) for %s%s.%s",
				who, g.n, calls, units.Duration(g.waitNS), units.Duration(g.maxNS), bioWhat[g.cause], where, why),
			Evidence: ev, Fix: fix, Score: float64(g.waitNS)}
		if share > 0 {
			f.Summary += fmt.Sprintf(" That is %.0f%% of the time of the processes that made them.", 100*share)
		}
		out = append(out, f)
	}
	return out
}

var bioShort = map[string]string{"discard": "a discard", "dirty-throttle": "dirty-page throttling",
	"journal": "the journal", "writeback": "writeback", "flush": "a cache flush"}

// explain names the mount and the setting that explain the cause, and the fix.
func (b *blockedIO) explain(g *bioGroup, ev map[string]any) (where, why, fix string) {
	m := g.mount
	if m == nil && b.reads() {
		// Not resolved from the call: the mounts whose options fit the cause.
		var cands []string
		for _, c := range b.mounts() {
			if g.cause == "discard" && hasOpt(c.options, "discard") {
				cands = append(cands, c.point+" ("+c.fstype+" on "+c.source+", "+c.options+")")
				if m == nil {
					mc := c
					m = &mc
				}
			}
		}
		if len(cands) > 0 {
			ev["mounts_with_discard"] = cands
		}
		if len(cands) != 1 {
			m = nil
		}
	}
	if m != nil {
		where = fmt.Sprintf(" on %s (%s on %s)", m.point, m.fstype, m.source)
		ev["mount"] = map[string]string{"point": m.point, "fstype": m.fstype, "source": m.source, "options": m.options}
	}
	switch g.cause {
	case "discard":
		if m != nil && hasOpt(m.options, "discard") {
			why = fmt.Sprintf(" %s is mounted with `discard`, so freeing blocks (unlink, truncate, O_TRUNC, a rename over a file) "+
				"sends the device a discard, and the call waits for it when the file system issues it inline (ext4 without a journal does).", m.point)
		}
		fix = "Mount without `discard` (remove it from /etc/fstab; `mount -o remount,nodiscard` where the file system allows it) and trim " +
			"periodically instead (`fstrim -av` from a daily timer: systemd's fstrim.timer). Or, if files are deleted and recreated " +
			"constantly, truncate and reuse them instead."
	case "dirty-throttle":
		var lim []string
		for _, k := range []string{"dirty_bytes", "dirty_ratio", "dirty_background_bytes", "dirty_background_ratio"} {
			if v := g.limits[k]; v != "" {
				ev["vm."+k] = v
				if v != "0" {
					lim = append(lim, "vm."+k+"="+v)
				}
			}
		}
		if len(lim) > 0 {
			why = " The dirty limits here: " + strings.Join(lim, ", ") + ". A writer past them sleeps until writeback catches up."
		}
		fix = "Writes are faster than the device: the kernel paces the writer to it. Check the limits (vm.dirty_bytes or " +
			"vm.dirty_ratio; a small absolute dirty_bytes throttles early), write less or to a faster device, or move the " +
			"writes off the latency-sensitive thread (a log writer thread with a queue)."
	case "journal":
		if m != nil && (hasOpt(m.options, "sync") || hasOpt(m.options, "dirsync")) {
			why = fmt.Sprintf(" %s is mounted with synchronous writes (%s): every change waits for its commit.", m.point, m.options)
		}
		fix = "The journal commit is shared by every writer of the file system: one process's fsync storm makes everyone's " +
			"metadata changes wait. Find the heavy committer (sysray stat -e fsync,fdatasync), spread writers over file " +
			"systems, or drop `sync`/`dirsync` mount options."
	case "writeback":
		if m != nil && hasOpt(m.options, "sync") {
			why = fmt.Sprintf(" %s is mounted `sync`: every write waits for the device.", m.point)
		}
		fix = "The call waited for pages of the file still being written to the device (truncating, overwriting or closing a file " +
			"with writeback in flight; ext4's auto_da_alloc flushes a file replaced by rename). Avoid rewriting or truncating " +
			"files that were just written, or write them once and rename them into place."
	case "flush":
		fix = "A cache flush waits for everything the device has buffered. Drop `sync`/barrier-forcing options if safe, or " +
			"batch the changes that cause flushes."
	}
	return where, why, fix
}

func hasOpt(options, opt string) bool {
	for _, o := range strings.Split(options, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

func procMounts(pid uint32) []mount { return readMounts(fmt.Sprintf("/proc/%d/mountinfo", pid)) }

// mountOf finds the mount of path: the longest mount point that prefixes it.
func mountOf(ms []mount, path string) *mount {
	var best *mount
	for i := range ms {
		p := ms[i].point
		if path == p || strings.HasPrefix(path, strings.TrimSuffix(p, "/")+"/") {
			if best == nil || len(p) > len(best.point) {
				best = &ms[i]
			}
		}
	}
	return best
}

func hostMounts() []mount { return readMounts("/proc/self/mountinfo") }

// readMounts parses mountinfo: block-backed file systems only.
func readMounts(path string) []mount {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 6 || len(b) < 3 || !strings.HasPrefix(b[1], "/dev/") {
			continue
		}
		point := strings.ReplaceAll(a[4], `\040`, " ") // mountinfo escapes spaces
		out = append(out, mount{point: point, fstype: b[0], source: b[1], options: a[5] + "," + b[2]})
	}
	return out
}

func readSysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// reads reports whether the detector may read the host's files now.
func (b *blockedIO) reads() bool { return b.live && (b.canRead == nil || b.canRead()) }
