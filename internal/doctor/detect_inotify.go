package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/sysray/sysray/internal/event"
	hostfacts "github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/stat"
)

// The findings it reports.
const (
	InotifyWatchLimit    ID = "inotify-watch-limit"
	InotifyInstanceLimit ID = "inotify-instance-limit"
)

func init() {
	register(registration{ids: []ID{InotifyWatchLimit, InotifyInstanceLimit},
		build: func(h *Host) Detector { return newInotifyLimits(h) }})
}

// inotifyLimits finds file watchers refused by the per-user inotify limits,
// whose errnos name other resources: inotify_add_watch fails with ENOSPC
// ("No space left on device") when the user's watches reach
// fs.inotify.max_user_watches, and inotify_init with EMFILE ("Too many open
// files") when the user's instances reach fs.inotify.max_user_instances.
// The disk and the descriptor table may be nearly empty. The limits are
// per user, summed over every process running as that user, so the
// process refused may hold few of them: the holders are what a reader
// needs.
//
// ENOSPC from inotify_add_watch has no other cause in the kernel (the
// charge in inotify_new_watch is the only place it is returned), so it is
// keyed on alone; a full disk or a file system out of inodes fails other
// calls (write, openat with O_CREAT, mkdir), and a quota answers EDQUOT,
// none of which this detector takes. inotify_init's EMFILE is either the
// instance limit or the process's descriptor table: live, the detector
// reads both and says which; from a capture it says what the process's
// other calls show.
//
// Live, the first refusal of a process makes the detector read its user,
// and, once per user, the user's holders (proc.InotifyByUser) and the
// limits in force (hostfacts.Sysctl): by report time the watcher may have given
// up and closed its instance. From a capture it uses the limits the header
// stored when recording began.
type inotifyLimits struct {
	arch event.Arch
	meta map[string]string
	// read returns what a live process and its user hold at a refusal; nil
	// offline. Unit tests replace it.
	read func(pid uint32, kind inotifyKind, path string) *inotifyFacts
	// readUser returns a user's holders and the limits; nil offline.
	readUser func(uid uint32) *inotifyUser
	procs    map[uint32]*inotifyProc
	// users holds the facts read for each user, so that a user's holders
	// are read once however many of its processes are refused.
	users map[uint32]*inotifyUser
	reads int
	// addedEv counts each process's watches added, from events: all of
	// them in a capture, a sample live (where the kernel's counts are
	// exact).
	addedEv map[uint32]uint64
	// instFDs holds, from a capture (where every call is there), the
	// inotify instances each process made and had not closed: at a
	// refusal, as many as the limit prove the instance limit.
	instFDs map[uint32]map[int]bool
}

// added is how many watches process pid added during the trace, and
// whether that is known exactly.
func (x *inotifyLimits) added(pid uint32) (uint64, bool) {
	p := x.procs[pid]
	if p != nil && p.counted {
		return max(p.added, x.addedEv[pid]), true
	}
	return x.addedEv[pid], x.read == nil && x.addedEv[pid] > 0
}

// inotifyKind is which limit a refusal is about.
type inotifyKind int

const (
	inotifyWatches inotifyKind = iota
	inotifyInstances
)

func (k inotifyKind) id() ID {
	if k == inotifyInstances {
		return InotifyInstanceLimit
	}
	return InotifyWatchLimit
}

type inotifyProc struct {
	comm        string
	fails       map[string]uint64 // by syscall, from events
	exact       map[string]uint64 // by syscall, the kernel's counts
	added       uint64            // watches added, the kernel's count (exact where counted)
	counted     bool
	first, last [2]uint64
	example     [2]string
	path        string // a path whose watch was refused
	// Offline evidence on which limit an inotify_init EMFILE was: a
	// descriptor made after the first refusal (the table had room), or
	// other descriptor-making calls refused EMFILE too.
	madeFDAfter, otherEMFILE uint64
	// heldAtRefusal: the instances it had made and not closed when first
	// refused, from a capture.
	heldAtRefusal int
	// Other calls that failed with ENOSPC or EDQUOT: a full disk or a
	// quota, another matter than the watches.
	diskErrs map[string]uint64
	facts    *inotifyFacts
}

// inotifyFacts is what was read at a process's first refusal.
type inotifyFacts struct {
	UID   uint32
	Known bool // UID was read
	// UserNS: the process runs in a user namespace other than the
	// doctor's, whose own limits (/proc/sys/user/max_inotify_*) count too
	// and read only from inside it.
	UserNS bool
	// The process's descriptors, for inotify_init's EMFILE.
	Open       int
	Soft       int64 // RLIMIT_NOFILE soft; -1 unlimited
	NofileRead bool
	// The watched path's file system (statfs), for ENOSPC: what the errno
	// seems to say.
	FS  *inotifyFS
	Err string
}

type inotifyFS struct {
	Path                  string
	BlocksFree, InodeFree float64 // shares available to an unprivileged user
}

// inotifyUser is a user's holders and limits, read once.
type inotifyUser struct {
	Holders              []inotifyHolder // most watches first
	Watches, Instances   int
	MaxWatches, MaxInsts uint64
	MaxRead              [2]bool
	Err                  string
}

type inotifyHolder struct {
	PID                uint32
	Comm               string
	Watches, Instances int
}

// Thresholds. See docs/detectors/inotify-watch-limit.md.
const (
	// One refusal is a warning: the kernel gives inotify_add_watch's
	// ENOSPC for nothing but the watch limit, and each refusal is a
	// directory whose changes the program will never hear of (a build
	// tool that does not rebuild, a log shipper that misses a file);
	// watchers log it once, or fall back to polling, and go on. No
	// program provokes it to learn something.
	inotifyWarnRefusals = 1
	// Users whose holders are read, at most: reading them is a pass over
	// every process's descriptors, and a host where many users are
	// refused is described by the first ones.
	inotifyReadUsers = 8
	// Processes whose user and descriptors are read at their first
	// refusal, at most.
	inotifyReadProcs = 64
	// Holders named in a finding: the few that hold most explain the sum.
	inotifyTopHolders = 5
)

func newInotifyLimits(h *Host) *inotifyLimits {
	x := &inotifyLimits{arch: h.Arch, meta: h.Meta, procs: map[uint32]*inotifyProc{}, users: map[uint32]*inotifyUser{},
		addedEv: map[uint32]uint64{}, instFDs: map[uint32]map[int]bool{}}
	if h.Live {
		x.read = func(pid uint32, kind inotifyKind, path string) *inotifyFacts {
			if !h.canRead() {
				return nil // opening /proc would stall: the events alone
			}
			return readInotifyFacts(pid, kind, path)
		}
		x.readUser = func(uid uint32) *inotifyUser {
			if !h.canRead() {
				return nil
			}
			return readInotifyUser(uid)
		}
	}
	return x
}

func (x *inotifyLimits) proc(pid uint32, comm string) *inotifyProc {
	p := x.procs[pid]
	if p == nil {
		p = &inotifyProc{comm: comm, diskErrs: map[string]uint64{}, fails: map[string]uint64{}, exact: map[string]uint64{}}
		x.procs[pid] = p
	}
	if p.comm == "" {
		p.comm = comm
	}
	return p
}

func (x *inotifyLimits) Observe(e *event.Event) {
	if e.Kind != event.KindSyscall {
		return
	}
	s := &e.Syscall
	if s.Unfinished || s.Refused {
		return
	}
	name := event.SyscallName(x.arch, s.Nr)
	p := x.procs[e.PID]
	if !s.Failed() || !inotifyRefused(name, int(-s.Ret)) {
		if name == "inotify_add_watch" && !s.Failed() {
			x.addedEv[e.PID]++
		}
		if x.read == nil && !s.Failed() {
			x.trackInstances(e.PID, name, s)
		}
		if p == nil {
			return
		}
		// What the process's other calls say about the errno.
		switch {
		case s.Failed() && (s.Ret == -enospc || s.Ret == -edquot):
			p.diskErrs[name+" "+event.ErrnoName(int(-s.Ret))]++
		case s.Ret == -emfile && createsFD(x.arch, s):
			p.otherEMFILE++
		case !s.Failed() && createsFD(x.arch, s) && p.first[inotifyInstances] != 0:
			p.madeFDAfter++
		}
		return
	}
	kind := inotifyWatches
	if name != "inotify_add_watch" {
		kind = inotifyInstances
	}
	p = x.proc(e.PID, e.Comm)
	p.fails[name]++
	if kind == inotifyInstances && p.heldAtRefusal == 0 {
		p.heldAtRefusal = len(x.instFDs[e.PID])
	}
	if p.first[kind] == 0 || e.Time < p.first[kind] {
		p.first[kind] = e.Time
	}
	p.last[kind] = max(p.last[kind], e.Time)
	if p.example[kind] == "" {
		p.example[kind] = event.FormatSyscall(x.arch, s)
	}
	if kind == inotifyWatches && p.path == "" && s.Data[1] != nil {
		p.path = string(s.Data[1])
	}
	if p.facts == nil && x.read != nil && x.reads < inotifyReadProcs {
		x.reads++
		p.facts = x.read(e.PID, kind, p.path)
		if p.facts != nil && p.facts.Known {
			x.user(p.facts.UID)
		}
	}
}

// readUser reads a user's holders and the limits once, near its first
// refusal, while the watches that crowded it out are still held.
func (x *inotifyLimits) user(uid uint32) {
	if _, ok := x.users[uid]; ok || x.readUser == nil || len(x.users) >= inotifyReadUsers {
		return
	}
	if u := x.readUser(uid); u != nil {
		x.users[uid] = u
	}
}

// counts takes the kernel's exact counts of refusals and of watches added.
func (x *inotifyLimits) counts(cells []stat.Cell) {
	for _, c := range cells {
		name := event.SyscallName(x.arch, c.Nr)
		var kind inotifyKind
		var errno int
		switch name {
		case "inotify_add_watch":
			kind, errno = inotifyWatches, enospc
		case "inotify_init", "inotify_init1":
			kind, errno = inotifyInstances, emfile
		default:
			continue
		}
		p := x.procs[c.PID]
		if p == nil {
			if c.Errnos[errno] == 0 {
				continue
			}
			p = x.proc(c.PID, "")
		}
		p.exact[name] += c.Errnos[errno]
		if kind == inotifyWatches {
			p.added += c.Count - c.Errors
			p.counted = true
		}
	}
}

// trackInstances follows the inotify instances a process makes and
// closes, from a capture's complete calls.
func (x *inotifyLimits) trackInstances(pid uint32, name string, s *event.Syscall) {
	switch name {
	case "inotify_init", "inotify_init1":
		m := x.instFDs[pid]
		if m == nil {
			m = map[int]bool{}
			x.instFDs[pid] = m
		}
		m[int(s.Ret)] = true
	case "close":
		delete(x.instFDs[pid], int(int32(s.Args[0])))
	}
}

// refused is a process's refusals of one kind by syscall, exact where
// the kernel counted them.
func (p *inotifyProc) refused(k inotifyKind) map[string]uint64 {
	out := map[string]uint64{}
	names := []string{"inotify_add_watch"}
	if k == inotifyInstances {
		names = []string{"inotify_init", "inotify_init1"}
	}
	for _, n := range names {
		if v := max(p.fails[n], p.exact[n]); v > 0 {
			out[n] = v
		}
	}
	return out
}

// refusals is how many calls of one kind a process was refused.
func (p *inotifyProc) refusals(k inotifyKind) uint64 {
	var n uint64
	for _, v := range p.refused(k) {
		n += v
	}
	return n
}

func (x *inotifyLimits) Findings(env *Env) []Finding {
	var out []Finding
	for _, kind := range []inotifyKind{inotifyWatches, inotifyInstances} {
		// One finding per user: the limit is the user's. Processes whose
		// user is unknown (offline) make one group.
		groups := map[string][]uint32{}
		for pid, p := range x.procs {
			if p.refusals(kind) == 0 {
				continue
			}
			g := ""
			if p.facts != nil && p.facts.Known {
				g = strconv.FormatUint(uint64(p.facts.UID), 10)
			}
			groups[g] = append(groups[g], pid)
		}
		for g, pids := range groups {
			sort.Slice(pids, func(i, j int) bool {
				a, b := x.procs[pids[i]].refusals(kind), x.procs[pids[j]].refusals(kind)
				return a > b || a == b && pids[i] < pids[j]
			})
			if f, ok := x.finding(env, kind, g, pids); ok {
				out = append(out, f)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	return out
}

func (x *inotifyLimits) finding(env *Env, kind inotifyKind, uidText string, pids []uint32) (Finding, bool) {
	var total uint64
	var procs []map[string]any
	for i, pid := range pids {
		p := x.procs[pid]
		total += p.refusals(kind)
		if i < 8 {
			procs = append(procs, x.procEvidence(env, pid, kind))
		}
	}
	if total < inotifyWarnRefusals {
		return Finding{}, false
	}
	lead := x.procs[pids[0]]
	name := env.ProcName(pids[0], lead.comm)
	who := name
	if len(pids) > 1 {
		who = fmt.Sprintf("%d processes (%s, …)", len(pids), name)
	}
	var user *inotifyUser
	var uid uint32
	if uidText != "" {
		n, _ := strconv.ParseUint(uidText, 10, 32)
		uid = uint32(n)
		user = x.users[uid]
	}
	errno, limitKey, resource := "ENOSPC", hostfacts.MetaInotifyWatches, "watches"
	if kind == inotifyInstances {
		errno, limitKey, resource = "EMFILE", hostfacts.MetaInotifyInstances, "instances"
	}
	calls := map[string]uint64{}
	for _, pid := range pids {
		for c, n := range x.procs[pid].refused(kind) {
			calls[c] += n
		}
	}
	callNames := callList(calls)
	ev := map[string]any{
		"errno": errno, "refusals": total, "calls": calls, "processes": procs,
		"example": lead.example[kind], "limit_name": limitKey,
	}
	userText := "its user"
	if uidText != "" {
		userText = "uid " + uidText
		ev["uid"] = uid
	}

	// The limit in force: read live near the refusal, else the capture's.
	var limit uint64
	limitKnown, limitFrom := false, ""
	if user != nil && user.MaxRead[kind] {
		limit, limitKnown, limitFrom = user.max(kind), true, "read when the first refusal was seen"
	} else if n, ok := hostfacts.MetaUint(x.meta, limitKey); ok {
		limit, limitKnown, limitFrom = n, true, "as the capture's header stored it when recording began"
	}
	if limitKnown {
		ev["limit"] = limit
		ev["limit_from"] = limitFrom
	}
	userNS := lead.facts != nil && lead.facts.UserNS
	if userNS {
		ev["user_namespace"] = true
	}

	// A namespace's limit was reached when the user held less than the
	// host's.
	nsReached := userNS && user != nil && limitKnown && uint64(user.held(kind)) < limit && user.holds(pids)
	if nsReached {
		ev["namespace_limit"] = user.held(kind)
	}

	// Which limit an EMFILE was.
	fdTable := false
	if kind == inotifyInstances {
		fdTable = x.descriptorsFull(pids)
	}

	var b strings.Builder
	var title string
	switch {
	case kind == inotifyWatches:
		title = fmt.Sprintf("%s refused %d inotify watch(es) with ENOSPC: the per-user watch limit, not the disk", who, total)
		fmt.Fprintf(&b, "%s: %d call(s) of inotify_add_watch failed with ENOSPC (\"No space left on device\"). The kernel "+
			"returns that errno there for one reason only: %s had as many inotify watches as its limit allows. Each "+
			"refusal is a file or directory whose changes the program will not hear of. ", who, total, userText)
	case fdTable:
		title = fmt.Sprintf("%s: %s failed %d time(s) with EMFILE at its descriptor limit, not the inotify instance limit", who, callNames, total)
		fmt.Fprintf(&b, "%s: %d call(s) of %s failed with EMFILE (\"Too many open files\"). That errno comes either "+
			"from the per-user limit on inotify instances or from the process's descriptor table; here it was the "+
			"table. ", who, total, callNames)
	case !x.instancesShown(pids, limit, limitKnown):
		title = fmt.Sprintf("%s refused %d inotify instance(s) with EMFILE: the per-user instance limit or the descriptor table", who, total)
		fmt.Fprintf(&b, "%s: %d call(s) of %s failed with EMFILE (\"Too many open files\"). That errno comes either "+
			"from the per-user limit on inotify instances or from the process's descriptor table. ", who, total, callNames)
	default:
		title = fmt.Sprintf("%s refused %d inotify instance(s) with EMFILE: the per-user instance limit, not open files", who, total)
		fmt.Fprintf(&b, "%s: %d call(s) of %s failed with EMFILE (\"Too many open files\"). That errno comes either "+
			"from the per-user limit on inotify instances or from the process's descriptor table. ", who, total, callNames)
	}
	b.WriteString(x.limitText(kind, lead, user, uidText, limit, limitKnown, limitFrom, resource))
	if added, ok := x.added(pids[0]); ok && kind == inotifyWatches {
		fmt.Fprintf(&b, "During the trace %s added %d watch(es)", name, added)
		if user == nil && limitKnown && added < limit && len(pids) == 1 {
			b.WriteString(", under that limit: its user's other processes held the rest, the limit was lowered after " +
				"recording began, or the process ran in a user namespace whose own limit was lower")
		}
		b.WriteString(". ")
	}
	if kind == inotifyInstances {
		b.WriteString(x.tableText(pids, limit, limitKnown))
	} else {
		b.WriteString(x.diskText(pids))
	}
	if kind == inotifyWatches {
		ev["severity_because"] = "one refusal is a watch the program does not get, and the kernel has no other reason for ENOSPC there"
	} else {
		ev["severity_because"] = "one refusal is a watcher the program does not get"
	}

	f := Finding{ID: kind.id(), Severity: Warning, Title: title, Summary: strings.TrimSpace(b.String()), Evidence: ev,
		Fix: x.fix(kind, fdTable, nsReached, user, pids), Score: float64(total), Procs: env.refs(pids...), Syscalls: byValue(calls)}
	if uidText != "" {
		f.Key = keyOf("uid=" + uidText)
	} else {
		f.Key = keyOf(lead.comm)
	}
	if user != nil {
		var holders []string
		for _, h := range user.Holders[:min(len(user.Holders), inotifyTopHolders)] {
			holders = append(holders, fmt.Sprintf("%s[%d]: %d watches in %d instance(s)", h.Comm, h.PID, h.Watches, h.Instances))
		}
		if len(holders) > 0 {
			ev["holders"] = holders
		}
		ev["user_watches"], ev["user_instances"], ev["user_holders"] = user.Watches, user.Instances, len(user.Holders)
		if user.Err != "" {
			ev["read_error"] = user.Err
		}
	}
	return f, true
}

func (u *inotifyUser) max(k inotifyKind) uint64 {
	if k == inotifyInstances {
		return u.MaxInsts
	}
	return u.MaxWatches
}

// holds says whether any of pids was among the user's holders when read.
func (u *inotifyUser) holds(pids []uint32) bool {
	for _, h := range u.Holders {
		if containsPID(pids, h.PID) {
			return true
		}
	}
	return false
}

// refusedPIDs is every process refused by one limit.
func (x *inotifyLimits) refusedPIDs(k inotifyKind) []uint32 {
	var out []uint32
	for pid, p := range x.procs {
		if p.refusals(k) > 0 {
			out = append(out, pid)
		}
	}
	return out
}

func (u *inotifyUser) held(k inotifyKind) int {
	if k == inotifyInstances {
		return u.Instances
	}
	return u.Watches
}

// limitText says which limit was reached, and by whom.
func (x *inotifyLimits) limitText(kind inotifyKind, lead *inotifyProc, user *inotifyUser, uidText string, limit uint64, known bool, from, resource string) string {
	var b strings.Builder
	name := hostfacts.MetaInotifyWatches
	nsName := "max_inotify_watches"
	if kind == inotifyInstances {
		name, nsName = hostfacts.MetaInotifyInstances, "max_inotify_instances"
	}
	if user == nil {
		if known {
			fmt.Fprintf(&b, "The limit, %s, was %d (%s). ", name, limit, from)
		} else {
			fmt.Fprintf(&b, "The limit is %s; its value is not known here. ", name)
		}
		if x.read == nil {
			b.WriteString("Which user was refused, and which processes held its " + resource + ", are read only live: " +
				"run the doctor on the host while it happens. ")
		} else {
			b.WriteString("The doctor did not read the user's " + resource + " at the refusal (opening files in /proc " +
				"would have stalled on this host, or the process was gone), so who held them is not known. ")
		}
		return b.String()
	}
	held := user.held(kind)
	if !user.holds(x.refusedPIDs(kind)) {
		fmt.Fprintf(&b, "When the doctor read them, after the refusal, no refused process held an inotify instance any more "+
			"(it had exited or closed it): uid %s then held %d %s in %d process(es), against ", uidText, held, resource, len(user.Holders))
		if known {
			fmt.Fprintf(&b, "%s = %d. ", name, limit)
		} else {
			fmt.Fprintf(&b, "%s, which could not be read. ", name)
		}
		b.WriteString("What the user held at the refusal is not known. ")
		return b.String()
	}
	fmt.Fprintf(&b, "When the first refusal was seen, %s held %d %s in %d process(es)", "uid "+uidText, held, resource, len(user.Holders))
	if len(user.Holders) > 0 {
		var top []string
		for _, h := range user.Holders[:min(len(user.Holders), 3)] {
			n := h.Watches
			if kind == inotifyInstances {
				n = h.Instances
			}
			top = append(top, fmt.Sprintf("%s[%d] %d", h.Comm, h.PID, n))
		}
		fmt.Fprintf(&b, " (most: %s)", strings.Join(top, ", "))
	}
	b.WriteString(", against ")
	if known {
		fmt.Fprintf(&b, "%s = %d. ", name, limit)
	} else {
		fmt.Fprintf(&b, "%s, which could not be read. ", name)
	}
	switch {
	case known && uint64(held) >= limit:
		b.WriteString("The user was at the host's limit. ")
	case lead.facts != nil && lead.facts.UserNS:
		fmt.Fprintf(&b, "That is under the host's limit, and the process runs in a user namespace of its own: the kernel "+
			"charges each of the user's %s in every user namespace from the process's up to the host's, each against "+
			"its own limit, so the one reached was a namespace's (/proc/sys/user/%s inside it, which reads only from "+
			"there). It equals the %d %s its user held there when refused, the kernel refusing the one that would pass it. ",
			resource, nsName, held, resource)
	case known:
		fmt.Fprintf(&b, "That is under the limit: %s were released between the refusal and the read, or the process "+
			"runs in a user namespace whose own limit (/proc/sys/user/%s) was reached. ", resource, nsName)
	}
	return b.String()
}

// descriptorsFull says whether inotify_init's EMFILE was the descriptor
// table, as far as the facts show: live, the lead process's open
// descriptors at its soft limit.
func (x *inotifyLimits) descriptorsFull(pids []uint32) bool {
	f := x.procs[pids[0]].facts
	return f != nil && f.NofileRead && f.Soft >= 0 && int64(f.Open) >= f.Soft
}

// instancesShown says whether the facts show the instance limit, not the
// descriptor table, refused inotify_init: as tableText argues it.
func (x *inotifyLimits) instancesShown(pids []uint32, limit uint64, limitKnown bool) bool {
	p := x.procs[pids[0]]
	if f := p.facts; f != nil && f.NofileRead {
		return f.Soft < 0 || int64(f.Open) < f.Soft
	}
	return limitKnown && p.heldAtRefusal > 0 && uint64(p.heldAtRefusal) >= limit || p.madeFDAfter > 0
}

// tableText says what shows which limit an inotify_init EMFILE was.
func (x *inotifyLimits) tableText(pids []uint32, limit uint64, limitKnown bool) string {
	p := x.procs[pids[0]]
	f := p.facts
	switch {
	case f != nil && f.NofileRead:
		soft := "unlimited"
		if f.Soft >= 0 {
			soft = strconv.FormatInt(f.Soft, 10)
		}
		if f.Soft >= 0 && int64(f.Open) >= f.Soft {
			return fmt.Sprintf("The process held %d descriptors, its RLIMIT_NOFILE (soft %s): the table was full, whatever the "+
				"instances. ", f.Open, soft)
		}
		return fmt.Sprintf("The process held %d descriptors of the %s its RLIMIT_NOFILE allows: the table had room, so it "+
			"was the instance limit. ", f.Open, soft)
	case limitKnown && p.heldAtRefusal > 0 && uint64(p.heldAtRefusal) >= limit:
		return fmt.Sprintf("It held %d inotify instances it had made in the capture and not closed, as many as the limit: "+
			"it was the instance limit. ", p.heldAtRefusal)
	case p.madeFDAfter > 0:
		return fmt.Sprintf("The process made %d descriptor(s) after the first refusal: its table had room, so it was the "+
			"instance limit. ", p.madeFDAfter)
	case p.otherEMFILE > 0:
		return fmt.Sprintf("Its other descriptor-making calls failed with EMFILE too (%d): the table may have been full "+
			"(fd-exhaustion reports those), and the capture cannot say which limit refused the instances. ", p.otherEMFILE)
	}
	return "The capture does not say how many descriptors the process held, nor did it make one after the refusal: " +
		"it cannot tell the two limits apart. "
}

// diskText says what the file system and the process's other calls show:
// that the errno's "no space" is not the disk's.
func (x *inotifyLimits) diskText(pids []uint32) string {
	var b strings.Builder
	p := x.procs[pids[0]]
	if f := p.facts; f != nil && f.FS != nil {
		fmt.Fprintf(&b, "The disk is not what ran out: the file system of %s had %.0f%% of its blocks and %.0f%% of its "+
			"inodes free. ", f.FS.Path, 100*f.FS.BlocksFree, 100*f.FS.InodeFree)
	}
	disk := map[string]uint64{}
	for _, pid := range pids {
		for k, n := range x.procs[pid].diskErrs {
			disk[k] += n
		}
	}
	if len(disk) > 0 {
		var parts []string
		for _, k := range byValue(disk) {
			parts = append(parts, fmt.Sprintf("%s %d", k, disk[k]))
		}
		fmt.Fprintf(&b, "Other calls failed with ENOSPC or EDQUOT too (%s): a full disk, a file system out of inodes or "+
			"a quota, a separate matter from the watches. ", strings.Join(parts, ", "))
	}
	return b.String()
}

func (x *inotifyLimits) fix(kind inotifyKind, fdTable, nsReached bool, user *inotifyUser, pids []uint32) string {
	if fdTable {
		return "Raise the process's descriptor limit where it is started (`ulimit -n 65536`, `LimitNOFILE=65536` in its " +
			"systemd unit), and look for what it leaks: `ls -l /proc/PID/fd`."
	}
	var b strings.Builder
	ns := map[inotifyKind]string{inotifyWatches: "watches", inotifyInstances: "instances"}[kind]
	if nsReached {
		b.WriteString("The limit reached is the user namespace's: raise /proc/sys/user/max_inotify_" + ns + " inside it, " +
			"where the namespace is made (the container runtime or the program that unshares it), or watch fewer " +
			"directories. The host's limit, if it is reached later, is raised in the same way as follows. ")
	}
	if kind == inotifyWatches {
		b.WriteString("Raise the per-user watch limit: `sysctl fs.inotify.max_user_watches=524288`, and persist it with " +
			"`echo fs.inotify.max_user_watches=524288 > /etc/sysctl.d/60-inotify.conf` (a watch in use costs about 1 KiB " +
			"of kernel memory; an unused limit costs nothing). Or watch fewer directories: exclude dependency and build " +
			"trees (node_modules, target, .git) from the watcher's configuration.")
	} else {
		b.WriteString("Raise the per-user instance limit: `sysctl fs.inotify.max_user_instances=1024`, and persist it with " +
			"`echo fs.inotify.max_user_instances=1024 > /etc/sysctl.d/60-inotify.conf`. Or have the programs share " +
			"instances: one instance holds any number of watches, and an instance per file, thread or task is what " +
			"uses up 128.")
	}
	if user != nil && len(user.Holders) > 0 {
		h := user.Holders[0]
		if !containsPID(pids, h.PID) {
			fmt.Fprintf(&b, " The largest holder is %s[%d] (%d watches in %d instances), not the refused process: "+
				"stopping it, or running it as another user, frees them.", h.Comm, h.PID, h.Watches, h.Instances)
		}
	}
	b.WriteString(" `find /proc/*/fdinfo -type f 2>/dev/null | xargs grep -c '^inotify wd:' 2>/dev/null | sort -t: -k2 -n | tail` " +
		"shows who holds the watches.")
	return b.String()
}

func containsPID(pids []uint32, pid uint32) bool {
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}

func (x *inotifyLimits) procEvidence(env *Env, pid uint32, kind inotifyKind) map[string]any {
	p := x.procs[pid]
	m := map[string]any{"process": env.ProcName(pid, p.comm), "refusals": p.refusals(kind)}
	if p.last[kind] > p.first[kind] {
		m["over_ns"] = p.last[kind] - p.first[kind]
	}
	if kind == inotifyWatches && p.path != "" {
		m["refused_path"] = p.path
	}
	if added, ok := x.added(pid); ok && kind == inotifyWatches {
		m["watches_added"] = added
	}
	if f := p.facts; f != nil {
		if f.Known {
			m["uid"] = f.UID
		}
		if f.NofileRead {
			m["open_fds"], m["nofile_soft"] = f.Open, f.Soft
		}
		if f.FS != nil {
			m["fs_blocks_free"], m["fs_inodes_free"] = f.FS.BlocksFree, f.FS.InodeFree
		}
		if f.Err != "" {
			m["read_error"] = f.Err
		}
	}
	if kind == inotifyInstances && x.read == nil {
		m["made_fd_after"], m["other_emfile"], m["instances_held"] = p.madeFDAfter, p.otherEMFILE, p.heldAtRefusal
	}
	return m
}

// readInotifyFacts reads, at a process's first refusal, its user, whether
// it runs in a user namespace of its own, its descriptors against its
// limit (EMFILE) or the watched path's file system (ENOSPC).
func readInotifyFacts(pid uint32, kind inotifyKind, path string) *inotifyFacts {
	f := &inotifyFacts{}
	var errs []string
	if _, euid, err := proc.UIDs(pid); err == nil {
		f.UID, f.Known = euid, true
	} else {
		errs = append(errs, err.Error())
	}
	dir := "/proc/" + strconv.FormatUint(uint64(pid), 10)
	if self, err1 := os.Stat("/proc/self/ns/user"); err1 == nil {
		if ns, err2 := os.Stat(dir + "/ns/user"); err2 == nil {
			f.UserNS = !os.SameFile(self, ns)
		}
	}
	switch kind {
	case inotifyInstances:
		if b, err := os.ReadFile(dir + "/limits"); err == nil {
			if soft, _, ok := rlimit(string(b), "Max open files"); ok {
				f.Soft, f.NofileRead = soft, true
			}
		}
		if d, err := os.Open(dir + "/fd"); err == nil {
			names, _ := d.Readdirnames(-1)
			d.Close()
			f.Open = len(names)
		} else {
			f.NofileRead = false
			errs = append(errs, err.Error())
		}
	case inotifyWatches:
		if path != "" {
			// In the process's root and working directory, so a path in a
			// container is its own.
			full := filepath.Join(dir, "root", path)
			if !filepath.IsAbs(path) {
				full = filepath.Join(dir, "cwd", path)
			}
			var st syscall.Statfs_t
			if err := syscall.Statfs(full, &st); err == nil && st.Blocks > 0 && st.Files > 0 {
				f.FS = &inotifyFS{Path: path,
					BlocksFree: float64(st.Bavail) / float64(st.Blocks),
					InodeFree:  float64(st.Ffree) / float64(st.Files)}
			}
		}
	}
	f.Err = strings.Join(errs, "; ")
	return f
}

// readInotifyUser reads what a user holds of the inotify limits, and the
// limits.
func readInotifyUser(uid uint32) *inotifyUser {
	u := &inotifyUser{}
	uses, err := proc.InotifyByUser(uid)
	if err != nil {
		u.Err = err.Error()
	}
	for _, use := range uses {
		comm := ""
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", use.PID)); err == nil {
			comm = strings.TrimSpace(string(b))
		}
		u.Holders = append(u.Holders, inotifyHolder{PID: use.PID, Comm: comm, Watches: use.Watches, Instances: use.Instances})
		u.Watches += use.Watches
		u.Instances += use.Instances
	}
	sort.Slice(u.Holders, func(i, j int) bool {
		a, b := u.Holders[i], u.Holders[j]
		if a.Watches != b.Watches {
			return a.Watches > b.Watches
		}
		if a.Instances != b.Instances {
			return a.Instances > b.Instances
		}
		return a.PID < b.PID
	})
	if v, err := hostfacts.Sysctl(hostfacts.MetaInotifyWatches); err == nil {
		u.MaxWatches, err = strconv.ParseUint(v, 10, 64)
		u.MaxRead[inotifyWatches] = err == nil
	}
	if v, err := hostfacts.Sysctl(hostfacts.MetaInotifyInstances); err == nil {
		u.MaxInsts, err = strconv.ParseUint(v, 10, 64)
		u.MaxRead[inotifyInstances] = err == nil
	}
	return u
}

// forget drops processes the doctor let go of.
func (x *inotifyLimits) forget(pids, _ map[uint32]bool) {
	for pid := range pids {
		delete(x.procs, pid)
		delete(x.addedEv, pid)
		delete(x.instFDs, pid)
	}
}
