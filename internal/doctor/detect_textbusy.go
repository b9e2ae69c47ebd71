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
	"github.com/sysray/sysray/internal/stat"
	"github.com/sysray/sysray/internal/units"
)

// TextBusy: a write to a file some process executes, or an exec of a file
// some process holds open for writing, refused with ETXTBSY.
const TextBusy ID = "text-busy"

func init() {
	register(registration{ids: []ID{TextBusy},
		build: func(h *Host) Detector { return newTextBusy(h) }})
}

// textBusy answers "Text file busy: busy with what?". The message names no
// holder, and the file is not locked in any sense the program can see. The
// kernel keeps, per inode, a count of writers against a count of
// executions (i_writecount):
//
//   - an open for writing (open, openat, openat2, creat with O_WRONLY or
//     O_RDWR) and truncate fail with ETXTBSY while some process's running
//     executable (its mm's exe_file, /proc/PID/exe) is that inode, as a
//     build or deploy that copies over a running binary does; an active
//     swap file refuses the same way;
//   - execve and execveat fail with ETXTBSY while some process holds the
//     file open for writing: a script still open in the writer that made
//     it, or a writable descriptor a forked child inherited.
//
// Mappings do not count: the kernel has ignored MAP_DENYWRITE since 5.15,
// so a shared library in use can be written (and its users crash), and only
// /proc/PID/exe is read for the first case.
//
// Live, at the first failure of each (process, file), the detector stats
// the file through the failing process's root (/proc/PID/root, so a
// container's path names the container's file) and walks /proc: each
// process's exe, compared by device and inode, never by name, for a write;
// each process's descriptors, by device and inode, with their access mode
// from /proc/PID/fdinfo, for an exec. A capture holds calls, not the
// kernel's inode counts: from one, the holder is named only when the
// capture's own calls show it (an exec of that path by a process that had
// not exited, an open of it for writing not closed), and said to be
// inferred.
//
// The cost is what the program did next: it retried, or it exited with an
// error soon after (a deploy or build that failed). One refusal the
// program handled (it wrote a new file and renamed it over) is a note.
type textBusy struct {
	arch event.Arch
	// read reads, live, who holds the file (nil offline; tests replace
	// it); abs makes a relative path absolute from the process's cwd or
	// directory descriptor.
	read  func(pid uint32, path string, exec bool) *tbFacts
	abs   func(pid uint32, dirfd int32, path string) string
	files map[string]*tbFile
	exits map[uint32]procExit
	exact map[uint32]uint64
	reads int
	// A capture's inference: who executed each path (latest first kept),
	// and each process's descriptors opened for writing, by path.
	execs   map[string][]tbHolder
	writers map[uint32]map[uint64]string
	comms   map[uint32]string
}

// tbFile is one file refused, in one direction.
type tbFile struct {
	path    string
	exec    bool // execve refused: a writer holds it
	calls   map[string]uint64
	procs   map[uint32]*tbProc
	example string
	first   uint64
	facts   *tbFacts
	// inferred: the holders the capture's calls show, at the first failure.
	inferred []tbHolder
}

type tbProc struct {
	comm        string
	fails       uint64
	first, last uint64
}

// tbFacts is what /proc showed at a process's first failure on the file.
type tbFacts struct {
	Ino     uint64
	Dev     string // "major:minor"
	Holders []tbHolder
	More    int  // holders past the ones kept
	Swap    bool // an active swap file
	// MntNS is the failing process's mount namespace ("mnt:[N]"); OwnNS
	// says it is not the host's (sysray's): the path is then the
	// container's, and a command run on the host with it names another
	// file, or none.
	MntNS string
	OwnNS bool
	Err   string
}

type tbHolder struct {
	PID  uint32
	Comm string
	FD   int    // exec: the descriptor open for writing; -1 for an executable
	Mode string // exec: "O_WRONLY" or "O_RDWR"
}

// Thresholds. See docs/detectors/text-busy.md.
const (
	// A second refusal of the same file is a retry by definition: a
	// program that handles a busy file writes another and renames it, or
	// waits for the holder, after the first.
	tbRetries = 2
	// A program that gives up exits from its error path at once; 2 s holds
	// that path's cleanup on a loaded host. A later exit followed other
	// work.
	tbGiveUp = 2e9
	// (process, file) pairs read live, at most: each read walks /proc (and,
	// for an exec, every process's descriptors).
	tbReads = 16
	// Holders named per file: a binary run by a thousand workers needs no
	// thousand names to be explained.
	tbHolders = 8
	// The latest execs of a path kept for a capture's inference.
	tbExecs = 16
)

const etxtbsy = 26

func newTextBusy(h *Host) *textBusy {
	x := &textBusy{arch: h.Arch, files: map[string]*tbFile{}, exits: map[uint32]procExit{}, exact: map[uint32]uint64{},
		execs: map[string][]tbHolder{}, writers: map[uint32]map[uint64]string{}, comms: map[uint32]string{}}
	if h.Live {
		x.read = func(pid uint32, path string, exec bool) *tbFacts {
			if !h.canRead() {
				return nil
			}
			return readTextBusy(pid, path, exec)
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

// tbPath is the path argument a call copied, and the directory descriptor
// before it (AT_FDCWD when none).
func tbPath(a event.Arch, s *event.Syscall) (string, int32, bool) {
	spec := event.Lookup(a, s.Nr)
	if spec == nil {
		return "", 0, false
	}
	for i, as := range spec.Args {
		if i >= 6 || as.Kind != event.ArgPath {
			continue
		}
		dirfd := int32(-100)
		if i > 0 && spec.Args[i-1].Kind == event.ArgDirFd {
			dirfd = int32(s.Args[i-1])
		}
		return string(s.Data[i]), dirfd, s.Data[i] != nil
	}
	return "", 0, false
}

func (x *textBusy) Observe(e *event.Event) {
	switch e.Kind {
	case event.KindExit:
		if e.Proc.GroupDead {
			code, sig, _ := e.Proc.Status()
			if sig != 0 {
				code = 128 + sig
			}
			x.exits[e.PID] = procExit{at: e.Time, code: code}
			delete(x.writers, e.PID)
			delete(x.comms, e.PID)
		}
		return
	case event.KindExec:
		if x.read == nil && e.Proc.Filename != "" {
			p := filepath.Clean(e.Proc.Filename)
			hs := append(x.execs[p], tbHolder{PID: e.PID, Comm: e.Comm, FD: -1})
			if len(hs) > tbExecs {
				hs = hs[len(hs)-tbExecs:]
			}
			x.execs[p] = hs
			delete(x.exits, e.PID)
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
	exec := name == "execve" || name == "execveat"
	write := name == "open" || name == "openat" || name == "openat2" || name == "creat" || name == "truncate"
	if x.read == nil {
		x.follow(e, name)
	}
	if s.Ret != -etxtbsy || !exec && !write {
		return
	}
	path, dirfd, ok := tbPath(x.arch, s)
	if !ok || path == "" {
		return
	}
	if !filepath.IsAbs(path) && x.abs != nil {
		path = x.abs(e.PID, dirfd, path)
	}
	path = filepath.Clean(path)
	k := path + "|w"
	if exec {
		k = path + "|x"
	}
	f := x.files[k]
	if f == nil {
		f = &tbFile{path: path, exec: exec, calls: map[string]uint64{}, procs: map[uint32]*tbProc{}, first: e.Time,
			example: event.FormatSyscall(x.arch, s)}
		x.files[k] = f
		if x.read == nil {
			f.inferred = x.infer(path, exec, e.PID)
		}
	}
	p := f.procs[e.PID]
	if p == nil {
		p = &tbProc{comm: e.Comm, first: e.Time}
		f.procs[e.PID] = p
		if x.read != nil && (f.facts == nil || len(f.facts.Holders) == 0) && x.reads < tbReads {
			x.reads++
			if facts := x.read(e.PID, path, exec); facts != nil && (f.facts == nil || len(facts.Holders) > 0) {
				f.facts = facts
			}
		}
	}
	f.calls[name]++
	p.fails++
	p.last = max(p.last, e.Time)
	f.first = min(f.first, e.Time)
}

// follow keeps, from a capture's calls, each process's descriptors open
// for writing, by path.
func (x *textBusy) follow(e *event.Event, name string) {
	s := &e.Syscall
	switch name {
	case "open", "openat", "creat":
		if s.Ret < 0 {
			return
		}
		flags := s.Args[2]
		if name == "open" {
			flags = s.Args[1]
		}
		if name != "creat" && flags&unix.O_ACCMODE == unix.O_RDONLY {
			return
		}
		path, _, ok := tbPath(x.arch, s)
		if !ok || path == "" {
			return
		}
		if x.writers[e.PID] == nil {
			x.writers[e.PID] = map[uint64]string{}
		}
		x.comms[e.PID] = e.Comm
		x.writers[e.PID][uint64(s.Ret)] = filepath.Clean(path)
	case "close":
		if s.Ret == 0 && x.writers[e.PID] != nil {
			delete(x.writers[e.PID], s.Args[0])
		}
	}
}

// infer names, from the calls seen before pid's first failure, who holds
// path: for an exec refused, a process with it open for writing; for a
// write refused, a process that executed it and had not exited since.
func (x *textBusy) infer(path string, exec bool, pid uint32) []tbHolder {
	var out []tbHolder
	if exec {
		var pids []uint32
		for p := range x.writers {
			pids = append(pids, p)
		}
		sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
		for _, p := range pids {
			fds := x.writers[p]
			var nums []uint64
			for fd, wp := range fds {
				if wp == path {
					nums = append(nums, fd)
				}
			}
			sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
			for _, fd := range nums {
				out = append(out, tbHolder{PID: p, Comm: x.comms[p], FD: int(fd), Mode: "for writing"})
			}
		}
		return out
	}
	for _, h := range x.execs[path] {
		if _, gone := x.exits[h.PID]; !gone && h.PID != pid {
			out = append(out, h)
		}
	}
	return out
}

// counts takes the kernel's exact count of ETXTBSY from the calls this
// detector reads.
func (x *textBusy) counts(cells []stat.Cell) {
	for _, c := range cells {
		switch event.SyscallName(x.arch, c.Nr) {
		case "open", "openat", "openat2", "creat", "truncate", "execve", "execveat":
			x.exact[c.PID] += c.Errnos[etxtbsy]
		}
	}
}

func (x *textBusy) forget(pids, _ map[uint32]bool) {
	for pid := range pids {
		delete(x.exits, pid)
		delete(x.writers, pid)
		delete(x.exact, pid)
		delete(x.comms, pid)
	}
}

func (x *textBusy) Findings(env *Env) []Finding {
	var out []Finding
	for _, f := range x.files {
		out = append(out, x.finding(env, f))
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Score > out[j].Score || out[i].Score == out[j].Score && out[i].Key < out[j].Key
	})
	return out
}

func (x *textBusy) finding(env *Env, f *tbFile) Finding {
	var pids []uint32
	var total uint64
	for pid, p := range f.procs {
		pids = append(pids, pid)
		total += p.fails
	}
	sort.Slice(pids, func(i, j int) bool {
		a, b := f.procs[pids[i]], f.procs[pids[j]]
		return a.fails > b.fails || a.fails == b.fails && pids[i] < pids[j]
	})
	// The kernel's exact count, where every failing process's was taken.
	var exact uint64
	for _, pid := range pids {
		exact += x.exact[pid]
	}
	if len(x.files) == 1 && exact > total {
		total = exact
	}
	w := f.procs[pids[0]]
	who := env.ProcName(pids[0], w.comm)
	if len(pids) > 1 {
		who = fmt.Sprintf("%d processes (%s, …)", len(pids), who)
	}
	calls := byValue(f.calls)
	what := "open for writing"
	if f.exec {
		what = "execute"
	} else if len(calls) == 1 && calls[0] == "truncate" {
		what = "truncate"
	}
	ev := map[string]any{"errno": "ETXTBSY", "failures": total, "calls": f.calls, "path": f.path, "example": f.example,
		"processes": len(pids)}
	direction := "write"
	if f.exec {
		direction = "exec"
	}
	ev["refused"] = direction
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d %s call(s) failed with ETXTBSY (\"Text file busy\") trying to %s %q. ", who, total, strings.Join(calls, "/"), what, f.path)
	if f.exec {
		b.WriteString("Nothing locks the file: the kernel refuses to execute a file that any process holds open for writing. ")
	} else {
		b.WriteString("Nothing locks the file: the kernel refuses to write or truncate a file that any process is running as its program. ")
	}

	holderWords, holderKind, fix := x.holders(f, ev, &b)
	if fc := f.facts; fc != nil && fc.MntNS != "" {
		ev["mount_namespace_own"] = fc.OwnNS
		if fc.OwnNS {
			fmt.Fprintf(&b, "The path is as %s[%d] sees it, in a mount namespace of its own (%s, not the host's: a container's "+
				"or a sandbox's); from the host it is /proc/%d/root%s. ", w.comm, pids[0], fc.MntNS, pids[0], f.path)
			fix += fmt.Sprintf(" The path is the container's own: run these in it (`nsenter -t %d -m`, `kubectl exec`, "+
				"`docker exec`), not on the host; for a container, ship the new version in a new image and restart it "+
				"rather than writing into the running one.", pids[0])
		}
	}

	// What the refusal cost.
	var retried, gaveUp []uint32
	var exitCode int
	var exitAfter uint64
	for _, pid := range pids {
		p := f.procs[pid]
		if p.fails >= tbRetries {
			retried = append(retried, pid)
		}
		if ex, ok := x.exits[pid]; ok && ex.code != 0 && ex.at >= p.last && ex.at-p.last <= tbGiveUp {
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
		outcome = fmt.Sprintf("%s gave up: exit status %d %s after its last failure", env.ProcName(gaveUp[0], f.procs[gaveUp[0]].comm),
			exitCode, units.Duration(exitAfter))
		if len(gaveUp) > 1 {
			outcome += fmt.Sprintf(" (%d processes exited so)", len(gaveUp))
		}
		if len(retried) > 0 {
			outcome = fmt.Sprintf("it retried (%d failures in all) and %s", total, outcome)
		}
	case len(retried) > 0:
		sev = Warning
		p := f.procs[retried[0]]
		ev["retry_span_ns"] = p.last - p.first
		outcome = fmt.Sprintf("it kept retrying: %s failed %d times over %s", env.ProcName(retried[0], p.comm), p.fails, units.Duration(p.last-p.first))
		ev["retried_failures"] = p.fails
	default:
		outcome = "one failure, neither retried nor followed by an error exit: a busy file the program handled"
	}
	ev["outcome"] = outcome
	ev["severity_because"] = map[Severity]string{
		Warning: "the program retried the refused call or exited with an error: the write or exec it needed did not happen",
		Info:    "one refusal the program did not retry nor exit on",
	}[sev]
	b.WriteString("Consequence: " + outcome + ".")
	title := fmt.Sprintf("%s: %s of %q failed %d time(s) with ETXTBSY, %s", who, calls[0], f.path, total, holderWords)
	return Finding{ID: TextBusy, Severity: sev, Title: title, Summary: strings.TrimSpace(b.String()), Evidence: ev, Fix: fix,
		Score: float64(total), Key: keyOf(w.comm, direction, f.path, holderKind), Syscalls: calls, Procs: env.refs(pids...)}
}

// holders writes who holds the file into b and ev, and returns the
// title's words, the kind of holder (for the key) and the fix.
func (x *textBusy) holders(f *tbFile, ev map[string]any, b *strings.Builder) (string, string, string) {
	dir, base := filepath.Split(f.path)
	tmp := dir + "." + base + ".new"
	renameFix := fmt.Sprintf("Write the new version to a temporary file in the same directory and rename it over the old one "+
		"(`cp NEW %s && mv %s %s`, or `install NEW %s`, which does the same): rename gives the path a new inode, the running "+
		"process keeps the old one until it restarts, and the next start runs the new one. A copy onto the path in place "+
		"(`cp NEW %s`, a build's linker writing its output) is what is refused.", tmp, tmp, f.path, f.path, f.path)
	closeFix := "Close the file before executing it: the writer must close its descriptor when it has written the file. " +
		"A descriptor inherited across fork is the usual hidden holder (a multithreaded program that writes a script " +
		"while another thread forks): open such files with O_CLOEXEC. Or write under another name, close, and rename " +
		"into place, then exec."
	stopHolder := func(hs []tbHolder) string {
		var ps []string
		for _, h := range hs {
			ps = append(ps, strconv.FormatUint(uint64(h.PID), 10))
		}
		return fmt.Sprintf(" Or stop the holder first (`kill %s`, or the service that runs it).", strings.Join(ps, " "))
	}
	names := func(hs []tbHolder) (string, []uint32) {
		var s []string
		var pids []uint32
		for _, h := range hs {
			pids = append(pids, h.PID)
			if f.exec && h.FD >= 0 {
				s = append(s, fmt.Sprintf("%s[%d] (fd %d, %s)", h.Comm, h.PID, h.FD, h.Mode))
			} else {
				s = append(s, fmt.Sprintf("%s[%d]", h.Comm, h.PID))
			}
		}
		return strings.Join(s, ", "), pids
	}
	if fc := f.facts; fc != nil {
		ev["read"] = "live, at the first failure"
		if fc.Err != "" {
			ev["read_error"] = fc.Err
			fmt.Fprintf(b, "The file could not be read at the first failure (%s): the holder is not known. ", fc.Err)
			if f.exec {
				return "its holder not read", "unknown", closeFix
			}
			return "its holder not read", "unknown", renameFix
		}
		ev["inode"], ev["device"] = fc.Ino, fc.Dev
		if fc.Swap {
			ev["swap"] = true
			b.WriteString("Read at the first failure, it is an active swap file (/proc/swaps): the kernel keeps it from writers. ")
			return "an active swap file", "swap", "`swapoff " + f.path + "` first, or write another file."
		}
		if len(fc.Holders) == 0 {
			b.WriteString("Read at the first failure, no process held that inode any more (by device and inode): the holder ended in between. ")
			if f.exec {
				return "its holder gone when read", "unknown", closeFix
			}
			return "its holder gone when read", "unknown", renameFix
		}
		s, pids := names(fc.Holders)
		ev["holders"] = pids
		more := ""
		if fc.More > 0 {
			ev["holders_more"] = fc.More
			more = fmt.Sprintf(" and %d more", fc.More)
		}
		n := len(fc.Holders) + fc.More
		ev["holder_count"] = n
		if f.exec {
			fmt.Fprintf(b, "Read at the first failure (by device and inode, inode %d), %s%s held it open for writing. ", fc.Ino, s, more)
			return fmt.Sprintf("open for writing by %s[%d]", fc.Holders[0].Comm, fc.Holders[0].PID), "writer", closeFix
		}
		fmt.Fprintf(b, "Read at the first failure (by device and inode, inode %d), it was the running executable (/proc/PID/exe) of %s%s. ", fc.Ino, s, more)
		return fmt.Sprintf("the running program of %s[%d]", fc.Holders[0].Comm, fc.Holders[0].PID), "exe", renameFix + stopHolder(fc.Holders)
	}
	if x.read != nil {
		b.WriteString("The file was not read at the failure (opening /proc would have stalled, or reads were spent). ")
		if f.exec {
			return "its holder not read", "unknown", closeFix
		}
		return "its holder not read", "unknown", renameFix
	}
	ev["read"] = "inferred from the capture's calls; a capture holds no inode counts"
	b.WriteString("A capture holds calls, not the kernel's inode counts, so the holder is inferred from the calls by path only: ")
	if len(f.inferred) > 0 {
		s, pids := names(f.inferred)
		ev["holders"] = pids
		if f.exec {
			fmt.Fprintf(b, "%s opened it for writing earlier in the capture and had not closed it. ", s)
			return fmt.Sprintf("likely open for writing by %s[%d] (inferred)", f.inferred[0].Comm, f.inferred[0].PID), "writer", closeFix
		}
		fmt.Fprintf(b, "%s executed it earlier in the capture and had not exited. ", s)
		return fmt.Sprintf("likely the running program of %s[%d] (inferred)", f.inferred[0].Comm, f.inferred[0].PID), "exe",
			renameFix + stopHolder(f.inferred)
	}
	if f.exec {
		b.WriteString("no process in the capture opened it for writing and kept it open; the holder is unknown (it opened it " +
			"before the capture began, or inherited the descriptor). `fuser -v " + f.path + "` on the host names it. ")
		return "its holder unknown (not in the capture)", "unknown", closeFix
	}
	b.WriteString("no process in the capture executed it; the holder is unknown (it started before the capture began). " +
		"`fuser -v " + f.path + "` on the host names it. ")
	return "its holder unknown (not in the capture)", "unknown", renameFix
}

// readTextBusy reads, live, who holds path as process pid sees it: for an
// exec refused, the descriptors open for writing on its inode; else the
// processes whose running executable it is.
func readTextBusy(pid uint32, path string, exec bool) *tbFacts {
	f := &tbFacts{}
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/root%s", pid, path), &st); err != nil {
		// The process may be gone; the host's view of the path then.
		if err2 := unix.Stat(path, &st); err2 != nil {
			f.Err = err.Error()
			return f
		}
	}
	f.Ino, f.Dev = st.Ino, fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	if mns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err == nil {
		own, _ := os.Readlink("/proc/self/ns/mnt")
		f.MntNS, f.OwnNS = mns, own != "" && mns != own
	}
	same := func(p string) bool {
		var s unix.Stat_t
		return unix.Stat(p, &s) == nil && s.Dev == st.Dev && s.Ino == st.Ino
	}
	if !exec && swapFile(same) {
		f.Swap = true
		return f
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		f.Err = err.Error()
		return f
	}
	add := func(h tbHolder) {
		if len(f.Holders) < tbHolders {
			f.Holders = append(f.Holders, h)
		} else {
			f.More++
		}
	}
	for _, e := range ents {
		p, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			continue
		}
		dir := "/proc/" + e.Name()
		if !exec {
			if same(dir + "/exe") {
				add(tbHolder{PID: uint32(p), Comm: commOf(uint32(p)), FD: -1})
			}
			continue
		}
		fds, err := os.ReadDir(dir + "/fd")
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if !same(dir + "/fd/" + fd.Name()) {
				continue
			}
			mode := fdMode(dir + "/fdinfo/" + fd.Name())
			if mode == "" {
				continue
			}
			n, _ := strconv.Atoi(fd.Name())
			add(tbHolder{PID: uint32(p), Comm: commOf(uint32(p)), FD: n, Mode: mode})
		}
	}
	return f
}

// fdMode reads a descriptor's access mode from its fdinfo flags (octal):
// "O_WRONLY" or "O_RDWR"; "" for read-only or unreadable.
func fdMode(fdinfo string) string {
	fh, err := os.Open(fdinfo)
	if err != nil {
		return ""
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "flags:")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
		if err != nil {
			return ""
		}
		switch n & unix.O_ACCMODE {
		case unix.O_WRONLY:
			return "O_WRONLY"
		case unix.O_RDWR:
			return "O_RDWR"
		}
		return ""
	}
	return ""
}

// swapFile: one of the host's active swap files is the inode same checks.
func swapFile(same func(string) bool) bool {
	b, err := os.ReadFile("/proc/swaps")
	if err != nil {
		return false
	}
	for i, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		if i == 0 || len(fs) < 2 || fs[1] != "file" {
			continue
		}
		if same(fs[0]) {
			return true
		}
	}
	return false
}
