package doctor

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/units"
)

// ReadOnlyFS: writes refused with EROFS because the path is on a mount, or
// a filesystem, that is read-only.
const ReadOnlyFS ID = "read-only-fs"

func init() {
	register(registration{ids: []ID{ReadOnlyFS},
		build: func(h *Host) Detector { return newROFS(h) }})
}

// rofs answers "Read-only file system: which one, and why?". The kernel
// refuses a change to a path (creating, writing, truncating, removing,
// renaming, linking, a change of mode, owner, times or attributes) with
// EROFS when either the mount the path is reached through is read-only
// (MNT_READONLY: a bind mount made ro, a container volume mounted :ro, a
// container's root with readOnlyRootFilesystem) or the filesystem itself
// is (SB_RDONLY: mounted ro, an image format that cannot be written such as
// squashfs or iso9660, an overlay with no upper layer, or ext4 or xfs
// remounted ro by the kernel after I/O errors). The two read alike in the
// errno; they differ in /proc/PID/mountinfo, whose per-mount options and
// superblock options say which, and in the fix.
//
// Permissions are not this: EACCES and EPERM are, and a full disk is
// ENOSPC. access(W_OK) answers EROFS too, but it is a question, not a
// write, and is not counted.
//
// Live, at the first failure of a process on a path (a bounded number of
// reads), the detector reads the failing process's own
// /proc/PID/mountinfo (its mount namespace's, a container's), finds the
// mount of the path (the longest mount point that prefixes it, checked
// against the device of its nearest existing ancestor, stat'ed through
// /proc/PID/root), and says whether the mount or the superblock is
// read-only, its type and source. From a capture there is no mount table:
// a mount the capture's calls made read-only over the path (mount with
// MS_RDONLY, a remount) is named, inferred; else the mount is unknown.
type rofs struct {
	arch event.Arch
	// read reads, live, the mount of path as pid sees it (nil offline;
	// tests replace it); abs makes a relative path absolute.
	read   func(pid uint32, path string) *rofsFacts
	abs    func(pid uint32, dirfd int32, path string) string
	groups map[string]*rofsGroup
	exits  map[uint32]procExit
	reads  int
	// A capture's inference: the mounts its calls made, latest last.
	mounts []rofsMountCall
}

type rofsMountCall struct {
	target, fstype, comm string
	pid                  uint32
	flags                uint64
}

// rofsGroup is the failures on one mount (or, unknown, one directory).
type rofsGroup struct {
	key      string
	facts    *rofsFacts
	inferred *rofsMountCall
	dir      string // the directory of the first path, when the mount is unknown
	calls    map[string]uint64
	paths    map[string]uint64
	procs    map[uint32]*rofsProc
	example  string
	total    uint64
}

type rofsProc struct {
	comm        string
	fails       uint64
	first, last uint64
	byPath      map[string]uint64
}

// rofsFacts is the mount of a refused path, as the failing process saw it.
type rofsFacts struct {
	Point     string // mount point
	FSType    string
	Source    string
	MountOpts string // per-mount options
	SuperOpts string // the superblock's
	MountRO   bool
	SuperRO   bool
	OwnNS     bool // the process's mount namespace is not the doctor's
	MntNS     string
	DevMatch  bool // the path's device is the mount's
	Err       string
}

// Thresholds. See docs/detectors/read-only-fs.md.
const (
	// A second refusal of the same path is a retry by definition: a
	// program that handles a read-only path writes elsewhere after the
	// first.
	rofsRetries = 2
	// Refusals on one mount, over any paths, past which the program is
	// persisting, not probing: a probe of candidate directories (XDG
	// dirs, $HOME, /tmp, the working directory) tries a handful, each
	// once; ten refused writes are past such a list.
	rofsPersist = 10
	// A program that gives up exits from its error path at once; 2 s
	// holds that path's cleanup on a loaded host.
	rofsGiveUp = 2e9
	// (process, path) pairs read live, at most: each read stats the path
	// and parses the process's mountinfo.
	rofsReads = 32
	// Paths named per finding.
	rofsPaths = 8
)

const erofs = 30

// Mount flags a capture's mount calls carry.
const (
	msRdonly  = 1
	msRemount = 32
	msBind    = 4096
)

// rofsCalls are the calls that change a path, with the index of the path
// argument the change is made at (-1: the first path argument).
var rofsCalls = map[string]int{
	"open": -1, "openat": -1, "openat2": -1, "creat": -1, "truncate": -1, "ftruncate": -1, "fallocate": -1,
	"mkdir": -1, "mkdirat": -1, "rmdir": -1, "unlink": -1, "unlinkat": -1,
	"rename": -1, "renameat": -1, "renameat2": -1, "link": -1, "linkat": -1,
	"symlink": 1, "symlinkat": 2, "mknod": -1, "mknodat": -1,
	"chmod": -1, "fchmod": -1, "fchmodat": -1, "fchmodat2": -1,
	"chown": -1, "lchown": -1, "fchown": -1, "fchownat": -1,
	"utime": -1, "utimes": -1, "utimensat": -1, "futimesat": -1,
	"setxattr": -1, "lsetxattr": -1, "fsetxattr": -1, "removexattr": -1, "lremovexattr": -1, "fremovexattr": -1,
}

func newROFS(h *Host) *rofs {
	x := &rofs{arch: h.Arch, groups: map[string]*rofsGroup{}, exits: map[uint32]procExit{}}
	if h.Live {
		x.read = func(pid uint32, path string) *rofsFacts {
			if !h.canRead() {
				return nil
			}
			return readROFS(pid, path)
		}
		x.abs = func(pid uint32, dirfd int32, path string) string {
			if !h.canRead() {
				return path
			}
			return absPath(pid, dirfd, path)
		}
	}
	return x
}

// rofsPathOf is the path a call changes, its directory descriptor, and
// whether one was copied.
func rofsPathOf(a event.Arch, s *event.Syscall, at int) (string, int32, bool) {
	spec := event.Lookup(a, s.Nr)
	if spec == nil {
		return "", 0, false
	}
	for i, as := range spec.Args {
		if i >= 6 || as.Kind != event.ArgPath || at >= 0 && i != at {
			continue
		}
		dirfd := int32(-100)
		if i > 0 && spec.Args[i-1].Kind == event.ArgDirFd {
			dirfd = int32(s.Args[i-1])
		}
		return string(s.Data[i]), dirfd, len(s.Data[i]) > 0
	}
	return "", 0, false
}

func (x *rofs) Observe(e *event.Event) {
	if e.Kind == event.KindExit {
		if e.Proc.GroupDead {
			code, sig, _ := e.Proc.Status()
			if sig != 0 {
				code = 128 + sig
			}
			x.exits[e.PID] = procExit{at: e.Time, code: code}
		}
		return
	}
	if e.Kind != event.KindSyscall || e.Syscall.Unfinished || e.Syscall.Refused {
		return
	}
	s := &e.Syscall
	name := event.SyscallName(x.arch, s.Nr)
	if name == "mount" && s.Ret == 0 && x.read == nil {
		if t := string(s.Data[1]); t != "" {
			x.mounts = append(x.mounts, rofsMountCall{target: filepath.Clean(t), fstype: string(s.Data[2]), flags: s.Args[3],
				comm: e.Comm, pid: e.PID})
		}
		return
	}
	at, ok := rofsCalls[name]
	if !ok || s.Ret != -erofs {
		return
	}
	path, dirfd, ok := rofsPathOf(x.arch, s, at)
	if ok && !filepath.IsAbs(path) && x.abs != nil {
		path = x.abs(e.PID, dirfd, path)
	}
	if ok {
		path = filepath.Clean(path)
	} else {
		path = "(a descriptor)"
	}
	g := x.group(e.PID, path, ok)
	g.calls[name]++
	g.total++
	if len(g.paths) < rofsPaths || g.paths[path] > 0 {
		g.paths[path]++
	}
	if g.example == "" {
		g.example = event.FormatSyscall(x.arch, s)
	}
	p := g.procs[e.PID]
	if p == nil {
		p = &rofsProc{comm: e.Comm, first: e.Time, byPath: map[string]uint64{}}
		g.procs[e.PID] = p
	}
	p.fails++
	p.byPath[path]++
	p.last = max(p.last, e.Time)
}

// group finds the failures' group of a path: its mount, read live at the
// first failure of the process on the path's directory, or inferred.
func (x *rofs) group(pid uint32, path string, named bool) *rofsGroup {
	dir := filepath.Dir(path)
	var facts *rofsFacts
	var inferred *rofsMountCall
	key := "dir|" + dir
	if !named {
		key = "fd"
	}
	if named && x.read != nil {
		// A path already read for this process keeps its group.
		for _, g := range x.groups {
			if g.procs[pid] != nil && g.procs[pid].byPath[path] > 0 {
				return g
			}
		}
		if x.reads < rofsReads {
			x.reads++
			facts = x.read(pid, path)
		}
		if facts != nil && facts.Err == "" {
			key = "mount|" + facts.MntNS + "|" + facts.Point
		}
	}
	if named && x.read == nil {
		for i := len(x.mounts) - 1; i >= 0; i-- {
			m := &x.mounts[i]
			if path == m.target || strings.HasPrefix(path, strings.TrimSuffix(m.target, "/")+"/") {
				inferred = m
				key = "mount||" + m.target
				break
			}
		}
	}
	g := x.groups[key]
	if g == nil {
		g = &rofsGroup{key: key, facts: facts, inferred: inferred, dir: dir, calls: map[string]uint64{}, paths: map[string]uint64{},
			procs: map[uint32]*rofsProc{}}
		x.groups[key] = g
	}
	return g
}

func (x *rofs) forget(pids, _ map[uint32]bool) {
	for pid := range pids {
		delete(x.exits, pid)
	}
}

func (x *rofs) Findings(env *Env) []Finding {
	var out []Finding
	for _, g := range x.groups {
		out = append(out, x.finding(env, g))
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Score > out[j].Score || out[i].Score == out[j].Score && out[i].Key < out[j].Key
	})
	return out
}

func (x *rofs) finding(env *Env, g *rofsGroup) Finding {
	var pids []uint32
	for pid := range g.procs {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, j int) bool {
		a, b := g.procs[pids[i]], g.procs[pids[j]]
		return a.fails > b.fails || a.fails == b.fails && pids[i] < pids[j]
	})
	w := g.procs[pids[0]]
	who := env.ProcName(pids[0], w.comm)
	if len(pids) > 1 {
		who = fmt.Sprintf("%d processes (%s, …)", len(pids), who)
	}
	paths := sortedKeys(g.paths)
	var quoted []string
	for _, p := range paths {
		quoted = append(quoted, strconv.Quote(p))
	}
	calls := byValue(g.calls)
	ev := map[string]any{"errno": "EROFS", "failures": g.total, "calls": g.calls, "paths": paths, "example": g.example,
		"processes": len(pids)}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d %s call(s) failed with EROFS (\"Read-only file system\") on %s. ", who, g.total,
		strings.Join(calls, "/"), strings.Join(quoted, ", "))
	where, kind, fix := x.mount(g, ev, &b)

	// What the refusal cost.
	var retried, gaveUp []uint32
	var exitCode int
	var exitAfter uint64
	for _, pid := range pids {
		p := g.procs[pid]
		for _, n := range p.byPath {
			if n >= rofsRetries {
				retried = append(retried, pid)
				break
			}
		}
		if ex, ok := x.exits[pid]; ok && ex.code != 0 && ex.at >= p.last && ex.at-p.last <= rofsGiveUp {
			if len(gaveUp) == 0 {
				exitCode, exitAfter = ex.code, ex.at-p.last
			}
			gaveUp = append(gaveUp, pid)
		}
	}
	sev := Info
	var outcome string
	switch {
	case len(gaveUp) > 0:
		sev = Warning
		ev["exit_status"], ev["exit_after_ns"], ev["gave_up"] = exitCode, exitAfter, len(gaveUp)
		outcome = fmt.Sprintf("%s gave up: exit status %d %s after its last failure", env.ProcName(gaveUp[0], g.procs[gaveUp[0]].comm),
			exitCode, units.Duration(exitAfter))
		if len(gaveUp) > 1 {
			outcome += fmt.Sprintf(" (%d processes exited so)", len(gaveUp))
		}
		if len(retried) > 0 {
			outcome = "it retried and " + outcome
		}
	case len(retried) > 0:
		sev = Warning
		p := g.procs[retried[0]]
		ev["retry_span_ns"], ev["retried_failures"] = p.last-p.first, p.fails
		outcome = fmt.Sprintf("it kept retrying: %s failed %d times over %s", env.ProcName(retried[0], p.comm), p.fails, units.Duration(p.last-p.first))
	case g.total >= rofsPersist:
		sev = Warning
		outcome = fmt.Sprintf("it kept writing there: %d refused changes, past any probe of a few candidate paths", g.total)
	default:
		outcome = "a refusal neither retried nor followed by an error exit: a read-only path the program handled"
	}
	ev["outcome"] = outcome
	ev["severity_because"] = map[Severity]string{
		Warning: "the program retried, kept writing to the read-only mount, or exited with an error: what it meant to write was not written",
		Info:    "refusals the program did not retry nor exit on: a probe it handled",
	}[sev]
	b.WriteString("Consequence: " + outcome + ".")
	title := fmt.Sprintf("%s: %d %s call(s) failed with EROFS under %s", who, g.total, calls[0], where)
	return Finding{ID: ReadOnlyFS, Severity: sev, Title: title, Summary: strings.TrimSpace(b.String()), Evidence: ev, Fix: fix,
		Score: float64(g.total), Key: keyOf(w.comm, g.key, kind), Syscalls: calls, Procs: env.refs(pids...)}
}

// mount writes what made the path read-only into b and ev, and returns
// the title's words for it, its kind (for the key) and the fix.
func (x *rofs) mount(g *rofsGroup, ev map[string]any, b *strings.Builder) (string, string, string) {
	elsewhere := "Write where the program may: point its data, cache or log path at a writable directory (a tmpfs, a volume), " +
		"and keep read-only what should not change."
	if f := g.facts; f != nil && f.Err != "" {
		ev["read"], ev["read_error"] = "not read", f.Err
		fmt.Fprintf(b, "The mount could not be read at the first failure (%s). ", f.Err)
		return fmt.Sprintf("%q (mount not read)", g.dir), "unknown", elsewhere + " `findmnt -T " + g.dir + "` (in the process's mount " +
			"namespace: `nsenter -t PID -m findmnt -T " + g.dir + "`) names the mount and why it is read-only."
	}
	if f := g.facts; f != nil {
		ev["read"] = "live, at the first failure: the process's own /proc/PID/mountinfo"
		ev["mount_point"], ev["fstype"], ev["source"] = f.Point, f.FSType, f.Source
		ev["mount_options"], ev["super_options"], ev["mount_ro"], ev["super_ro"] = f.MountOpts, f.SuperOpts, f.MountRO, f.SuperRO
		ev["mount_namespace_own"] = f.OwnNS
		ns := "in the failing process's mount namespace (the host's)"
		if f.OwnNS {
			ns = "in the failing process's own mount namespace (" + f.MntNS + ", not the host's: a container's or a sandbox's)"
		}
		fmt.Fprintf(b, "The path is on the mount at %q %s: %s from %q, mount options %q, superblock options %q. ", f.Point, ns, f.FSType,
			f.Source, f.MountOpts, f.SuperOpts)
		if !f.DevMatch {
			ev["device_checked"] = false
		}
		mnt := fmt.Sprintf("%q (%s", f.Point, f.FSType)
		switch {
		case f.SuperRO && rofsImage(f.FSType):
			fmt.Fprintf(b, "%s is a read-only format: its filesystem cannot be written at all. ", f.FSType)
			return mnt + ", a read-only image)", "image", "The filesystem cannot be made writable: " + elsewhere +
				" In a container, mount a tmpfs or emptyDir volume at the directory the program writes to."
		case f.SuperRO && f.FSType == "overlay":
			b.WriteString("The overlay is read-only at the superblock: it has no upper (writable) layer, as a container's image layers have none. ")
			fix := elsewhere + " For a container's root, mount a writable volume (Kubernetes emptyDir, `docker run --tmpfs DIR`) at that directory, or give the overlay an upper layer."
			return mnt + ", no upper layer)", "overlay", fix
		case f.SuperRO && f.Point == "/" && f.OwnNS:
			b.WriteString("It is the root filesystem of the process's own mount namespace, read-only: a container run with a read-only root (Kubernetes readOnlyRootFilesystem: true, `docker run --read-only`). ")
			return mnt + ", the container's read-only root)", "container-root", "Keep the root read-only and mount a writable volume " +
				"(Kubernetes emptyDir, `docker run --tmpfs DIR`) at the directory the program writes to, or point the program's " +
				"path at one that is mounted writable."
		case f.SuperRO:
			b.WriteString("The filesystem itself is read-only (ro in its superblock options): it was mounted or remounted read-only")
			if rofsErrorsRemount(f) {
				b.WriteString(", or the kernel remounted it read-only after errors: a " + f.FSType + " that hits an I/O or metadata error " +
					"goes read-only by itself (errors=remount-ro, xfs's shutdown)")
			}
			b.WriteString(". ")
			if !rofsErrorsRemount(f) {
				return mnt + ", read-only filesystem)", "super-ro", fmt.Sprintf("If it should be writable, mount it read-write where it is "+
					"mounted (`mount -o remount,rw %s` in that mount namespace, or the volume's definition); if it is meant read-only, %s",
					f.Point, strings.ToLower(elsewhere[:1])+elsewhere[1:])
			}
			fix := fmt.Sprintf("If it should be writable: `dmesg | grep -iE 'remount|error|I/O'` tells whether the kernel made it read-only "+
				"after errors; then repair it (`fsck` on %s unmounted) before `mount -o remount,rw %s`. If it is meant read-only, %s",
				f.Source, f.Point, strings.ToLower(elsewhere[:1])+elsewhere[1:])
			return mnt + ", read-only filesystem)", "super-ro", fix
		case f.MountRO && f.Point == "/" && f.OwnNS:
			b.WriteString("Only the mount is read-only (ro in its mount options; the filesystem under it is writable), and it is the root " +
				"of the process's own mount namespace: a container run with a read-only root (Kubernetes readOnlyRootFilesystem: true, " +
				"`docker run --read-only`). ")
			return mnt + ", the container's read-only root)", "container-root", "Keep the root read-only and mount a writable volume " +
				"(Kubernetes emptyDir, `docker run --tmpfs DIR`) at the directory the program writes to, or point the program's " +
				"path at one that is mounted writable."
		case f.MountRO:
			b.WriteString("Only this mount is read-only (ro in its mount options; the filesystem under it is writable): a bind mount " +
				"or volume made read-only on purpose (`mount -o bind,remount,ro`, a container volume mounted :ro or readOnly: true). ")
			return mnt + ", a read-only mount of a writable filesystem)", "mount-ro", "If the program is meant to write there, mount " +
				"it writable (drop :ro / readOnly: true, or `mount -o remount,bind,rw " + f.Point + "`); if the mount is read-only " +
				"on purpose, " + strings.ToLower(elsewhere[:1]) + elsewhere[1:]
		}
		b.WriteString("Read at the first failure, neither the mount nor its filesystem said ro: it was made writable again in between, " +
			"or the path crossed into another mount than the one read. ")
		return mnt + ", read-write when read)", "unknown", elsewhere
	}
	if x.read != nil {
		b.WriteString("The mount was not read at the failure (opening /proc would have stalled, or reads were spent). ")
		ev["read"] = "not read"
		return fmt.Sprintf("%q (mount not read)", g.dir), "unknown", elsewhere + " `findmnt -T " + g.dir + "` names the mount."
	}
	ev["read"] = "inferred from the capture's calls; a capture holds no mount table"
	b.WriteString("A capture holds calls, not the mount table, so the mount is inferred from the calls only: ")
	if m := g.inferred; m != nil {
		ev["mount_point"], ev["mounted_by"] = m.target, m.pid
		fstype := "a filesystem (its type not in the capture)"
		if m.fstype != "" {
			ev["fstype"], fstype = m.fstype, m.fstype
		}
		ro := m.flags&msRdonly != 0
		ev["mount_ro_flag"] = ro
		switch {
		case ro && m.flags&msRemount != 0:
			fmt.Fprintf(b, "%s[%d] remounted %q read-only (MS_REMOUNT|MS_RDONLY%s) earlier in the capture. ", m.comm, m.pid, m.target,
				map[bool]string{true: "|MS_BIND: the mount only, not its filesystem", false: ""}[m.flags&msBind != 0])
		case ro:
			fmt.Fprintf(b, "%s[%d] mounted %q read-only (MS_RDONLY, %s) earlier in the capture. ", m.comm, m.pid, m.target, fstype)
		default:
			fmt.Fprintf(b, "%s[%d] mounted %s at %q earlier in the capture, without MS_RDONLY: its type or options made it read-only "+
				"(an overlay with no upper layer, an image format). ", m.comm, m.pid, fstype, m.target)
		}
		return fmt.Sprintf("%q (inferred from the capture's mount calls)", m.target), "inferred", elsewhere +
			" `findmnt -T " + m.target + "` shows the mount and its options."
	}
	b.WriteString("no mount call over the path was in the capture; the mount was read-only from before it began. ")
	return fmt.Sprintf("%q (mount unknown from a capture)", g.dir), "unknown", elsewhere + " `findmnt -T " + g.dir +
		"` (in the process's mount namespace: `nsenter -t PID -m findmnt -T " + g.dir + "`) names the mount and why it is read-only."
}

// rofsErrorsRemount: a filesystem the kernel itself turns read-only when
// it meets errors.
func rofsErrorsRemount(f *rofsFacts) bool {
	switch f.FSType {
	case "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs":
		return true
	}
	return strings.Contains(f.SuperOpts, "errors=remount-ro")
}

// rofsImage: a filesystem type that cannot be written at all.
func rofsImage(fstype string) bool {
	switch fstype {
	case "squashfs", "iso9660", "erofs", "cramfs", "romfs", "udf":
		return true
	}
	return false
}

// readROFS reads, live, the mount of path as process pid sees it.
func readROFS(pid uint32, path string) *rofsFacts {
	f := &rofsFacts{}
	root := fmt.Sprintf("/proc/%d/root", pid)
	// The device of the path, or of its nearest existing ancestor (a file
	// being created does not exist).
	var st unix.Stat_t
	var devOK bool
	for p := path; ; p = filepath.Dir(p) {
		if unix.Stat(root+p, &st) == nil {
			devOK = true
			break
		}
		if p == "/" || p == "." {
			break
		}
	}
	mns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	if err != nil {
		f.Err = "the process had exited when read"
		return f
	}
	own, _ := os.Readlink("/proc/self/ns/mnt")
	f.MntNS, f.OwnNS = mns, mns != "" && mns != own
	fh, err := os.Open(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		f.Err = err.Error()
		return f
	}
	defer fh.Close()
	best := -1
	dev := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, c := strings.Fields(pre), strings.Fields(post)
		if len(a) < 6 || len(c) < 3 {
			continue
		}
		point := strings.ReplaceAll(a[4], `\040`, " ")
		if path != point && !strings.HasPrefix(path, strings.TrimSuffix(point, "/")+"/") {
			continue
		}
		// The longest mount point wins; a later line at the same point
		// is mounted over the earlier.
		if len(point) >= best {
			best = len(point)
			f.Point, f.FSType, f.Source, f.MountOpts, f.SuperOpts = point, c[0], c[1], a[5], c[2]
			f.DevMatch = devOK && a[2] == dev
		}
	}
	if best < 0 {
		f.Err = "no mount of the path in /proc/PID/mountinfo"
		return f
	}
	f.MountRO, f.SuperRO = hasOption(f.MountOpts, "ro"), hasOption(f.SuperOpts, "ro")
	return f
}

func hasOption(opts, o string) bool {
	for _, s := range strings.Split(opts, ",") {
		if s == o {
			return true
		}
	}
	return false
}
