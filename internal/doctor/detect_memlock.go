package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/event"
	hostfacts "github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/units"
)

// MemlockLimit: calls that lock memory fail because the process reached its
// RLIMIT_MEMLOCK, whatever memory is free.
const MemlockLimit ID = "memlock-limit"

func init() {
	register(registration{ids: []ID{MemlockLimit},
		build: func(h *Host) Detector { return newMemlock(h.Arch, h.Live, h.canRead) }})
}

// memlock explains "Cannot allocate memory" (ENOMEM) and "Resource
// temporarily unavailable" (EAGAIN) from the calls that lock memory. The
// kernel counts a process's locked pages (VmLck) against its
// RLIMIT_MEMLOCK, 8 MiB by default and often 64 KiB in containers, unless
// it has CAP_IPC_LOCK:
//
//   - mlock and mlock2 fail with ENOMEM when VmLck plus the length would
//     pass the limit, and mlockall(MCL_CURRENT) when the whole address
//     space (VmSize) would;
//   - mmap with MAP_LOCKED, and any mmap once mlockall(MCL_FUTURE) made
//     every new mapping locked, fail with EAGAIN (mlock_future_ok), as does
//     an mremap that grows a locked mapping;
//   - with the limit 0, all of them fail with EPERM;
//   - io_uring_setup fails with ENOMEM when the rings would pass the limit,
//     counted (on 6.18) against the user's locked pages over all its
//     processes, which no /proc file shows.
//
// mmap's ENOMEM is map-count-limit's and memory-refused's (the map count,
// the commit limit, RLIMIT_AS and RLIMIT_DATA): mmap here is its EAGAIN
// and EPERM only, which those limits never return, so no failure is
// claimed by both.
//
// Live, the first failure of a process makes the detector read its
// RLIMIT_MEMLOCK, VmLck, VmSize and capabilities, and the host's
// MemAvailable. From a capture they cannot be known: the detector infers
// the limit from the calls and their errnos, and says so.
type memlock struct {
	arch event.Arch
	// read returns what a live process held; nil offline. Unit tests
	// replace it.
	read    func(pid uint32) *memlockFacts
	procs   map[uint32]*mlProc
	reads   int
	closest *Near
}

type mlProc struct {
	comm    string
	fails   map[string]uint64 // by syscall
	errnos  map[string]uint64
	example string
	// asked is the largest number of bytes a failed call asked to lock
	// (mlock's and mmap's length, what mremap grows by); 0 where no call
	// said (mlockall, io_uring_setup).
	asked   uint64
	entries uint64 // the largest io_uring_setup entries refused
	all     bool   // an mlockall(MCL_CURRENT) failed
	unread  string // why the doctor did not read it, live
	exited  bool
	code    int // exit status, or 128+signal
	reads   int
	last    uint64 // event time of the last read
	facts   *memlockFacts
}

// memlockFacts is what a live process held when a failure was seen.
type memlockFacts struct {
	Soft, Hard int64  // RLIMIT_MEMLOCK, bytes; -1 unlimited
	Limits     bool   // Soft and Hard were read
	VmLck      uint64 // bytes locked
	VmSize     uint64 // bytes of address space: mlockall(MCL_CURRENT) must lock them all
	Status     bool   // VmLck and VmSize were read
	IPCLock    bool   // CAP_IPC_LOCK in its effective set: the limit does not apply
	Available  uint64 // the host's MemAvailable, bytes (0 unknown)
	Err        string
}

// Thresholds. See docs/detectors/memlock-limit.md.
const (
	// A program that probes for locking (a database that tries mlock and
	// goes on unlocked, a crypto library locking a key page) fails once or
	// twice and carries on: that is handled, not a fault. One stuck on the
	// limit fails the same call again and again; three failures are past
	// any probe of one call and its one fallback.
	mlRetryMin = 3
	// The read comes after the failure: by then the program may have
	// unlocked some of what it held (a retry loop's own munlock, a buffer
	// freed). Locked memory plus the refused length within 1/8 of the
	// limit counts as at it; a program far from its limit that fails
	// mlock with ENOMEM has an unmapped range (ENOMEM too) or hit its map
	// count on the split.
	mlSlackShare = 8
	// Reads of a live process: at its first failure, and again while no
	// read found it at the limit, at most mlReadsEach times, mlReadEvery
	// apart in event time. A read is three small /proc files.
	mlReadEvery = 1e9 // ns
	mlReadsEach = 3
	mlReadProcs = 64
)

const (
	errnoEPERM  = -1
	errnoEAGAIN = -11
	errnoENOMEM = -12
	mapLocked   = 0x2000
	mclCurrent  = 1
)

func newMemlock(arch event.Arch, live bool, canRead func() bool) *memlock {
	x := &memlock{arch: arch, procs: map[uint32]*mlProc{}}
	if live {
		x.read = func(pid uint32) *memlockFacts {
			if canRead != nil && !canRead() {
				return nil
			}
			return readMemlockFacts(pid)
		}
	}
	return x
}

// memlockFailure says whether s is a call that locks memory, refused as
// the limit refuses it, and how many bytes it asked to lock (0 unknown).
func memlockFailure(name string, s *event.Syscall) (asked uint64, ok bool) {
	switch name {
	case "mlock", "mlock2":
		return s.Args[1], s.Ret == errnoENOMEM || s.Ret == errnoEPERM
	case "mlockall":
		return 0, s.Ret == errnoENOMEM || s.Ret == errnoEPERM
	case "mmap", "mmap2":
		// EAGAIN: the limit (MAP_LOCKED, or every mapping after
		// mlockall(MCL_FUTURE)); EPERM with MAP_LOCKED: a limit of 0.
		return s.Args[1], s.Ret == errnoEAGAIN || s.Ret == errnoEPERM && s.Args[3]&mapLocked != 0
	case "mremap":
		if s.Args[2] > s.Args[1] {
			return s.Args[2] - s.Args[1], s.Ret == errnoEAGAIN
		}
	case "io_uring_setup":
		return 0, s.Ret == errnoENOMEM
	}
	return 0, false
}

func (x *memlock) Observe(e *event.Event) {
	if e.Kind == event.KindExit {
		if p := x.procs[e.PID]; p != nil && e.Proc.GroupDead {
			code, sig, _ := e.Proc.Status()
			p.exited, p.code = true, code
			if sig != 0 {
				p.code = 128 + sig
			}
		}
		return
	}
	if e.Kind != event.KindSyscall || e.Syscall.Unfinished || e.Syscall.Refused {
		return
	}
	s := &e.Syscall
	name := event.SyscallName(x.arch, s.Nr)
	asked, ok := memlockFailure(name, s)
	if !ok {
		return
	}
	p := x.procs[e.PID]
	if p == nil {
		p = &mlProc{comm: e.Comm, fails: map[string]uint64{}, errnos: map[string]uint64{}}
		x.procs[e.PID] = p
	}
	p.fails[name]++
	p.errnos[event.ErrnoName(int(-s.Ret))]++
	if p.example == "" {
		p.example = event.FormatSyscall(x.arch, s)
	}
	p.asked = max(p.asked, asked)
	if name == "io_uring_setup" {
		p.entries = max(p.entries, s.Args[0])
	}
	if name == "mlockall" && s.Args[0]&mclCurrent != 0 && s.Ret == errnoENOMEM {
		p.all = true
	}
	if x.read == nil || p.reads >= mlReadsEach || p.reads > 0 && (p.facts.atLimit(p) || e.Time < p.last+mlReadEvery) {
		return
	}
	if p.reads == 0 {
		if x.reads >= mlReadProcs {
			p.unread = "it was past the first " + strconv.Itoa(mlReadProcs) + " processes the doctor reads"
			return
		}
		x.reads++
	}
	p.reads++
	p.last = e.Time
	f := x.read(e.PID)
	if f == nil {
		p.unread = "reads of /proc would stall on this host then"
		return
	}
	if p.facts == nil || !p.facts.atLimit(p) {
		p.facts = f
	}
}

// atLimit: the facts explain p's failures by its RLIMIT_MEMLOCK.
func (f *memlockFacts) atLimit(p *mlProc) bool {
	if f == nil || !f.Limits || f.Soft < 0 || f.IPCLock {
		return false
	}
	lim := uint64(f.Soft)
	if lim == 0 {
		return true // every lock refused, with EPERM
	}
	if !f.Status {
		return false
	}
	if p.all && f.VmSize >= lim {
		return true
	}
	if p.entries > 0 && len(p.fails) == 1 {
		// io_uring counts against the user's total, not shown: a finite
		// limit without CAP_IPC_LOCK is all that can be checked.
		return true
	}
	return f.VmLck+p.asked+lim/mlSlackShare > lim
}

func (x *memlock) near(*Env) *Near { return x.closest }

// mlVerdict is one process's part in a finding.
type mlVerdict struct {
	pid      uint32
	p        *mlProc
	n        uint64
	measured bool
}

func (x *memlock) Findings(env *Env) []Finding {
	x.closest = nil
	groups := map[string][]*mlVerdict{}
	for pid, p := range x.procs {
		v := &mlVerdict{pid: pid, p: p}
		for _, n := range p.fails {
			v.n += n
		}
		subject := fmt.Sprintf("%s failing in %s", callList(p.fails), env.ProcName(pid, p.comm))
		switch f := p.facts; {
		case f != nil && f.Limits && (f.Soft < 0 || f.IPCLock):
			why := "its RLIMIT_MEMLOCK is unlimited"
			if f.IPCLock {
				why = "it has CAP_IPC_LOCK, which the limit does not apply to"
			}
			x.nearer(&Near{ID: MemlockLimit, Closeness: 0.1, Subject: subject, Short: why})
			continue
		case f != nil && f.Limits && f.Status:
			if !f.atLimit(p) {
				x.nearer(&Near{ID: MemlockLimit, Closeness: min(0.999, float64(f.VmLck+p.asked)/float64(f.Soft)), Subject: subject,
					Short: fmt.Sprintf("it held %d bytes locked and asked for %d, against RLIMIT_MEMLOCK %d: memlock-limit reports them within 1/%d of it",
						f.VmLck, p.asked, f.Soft, mlSlackShare)})
				continue
			}
			v.measured = true
		case f != nil && f.Limits && f.Soft == 0:
			v.measured = true
		}
		if v.n < mlRetryMin && !(p.exited && p.code != 0) {
			x.nearer(&Near{ID: MemlockLimit, Closeness: float64(v.n) / mlRetryMin, Subject: subject,
				Short: fmt.Sprintf("%d failure(s) and the program carried on: memlock-limit reports %d, or an exit after one", v.n, mlRetryMin)})
			continue
		}
		exe := memlockExe(env, pid, p.comm)
		groups[exe] = append(groups[exe], v)
	}
	var out []Finding
	for exe, vs := range groups {
		sort.Slice(vs, func(i, j int) bool {
			if vs[i].measured != vs[j].measured {
				return vs[i].measured
			}
			return vs[i].n > vs[j].n || vs[i].n == vs[j].n && vs[i].pid < vs[j].pid
		})
		out = append(out, x.finding(env, exe, vs))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func (x *memlock) nearer(n *Near) {
	if x.closest == nil || n.Closeness > x.closest.Closeness {
		x.closest = n
	}
}

// memlockExe names a process's program for a key: its executable's base
// name, or its comm.
func memlockExe(env *Env, pid uint32, comm string) string {
	if env.Procs != nil {
		if p, ok := env.Procs.Get(pid); ok && p.Exe != "" {
			return filepath.Base(p.Exe)
		}
	}
	return comm
}

func (x *memlock) finding(env *Env, exe string, vs []*mlVerdict) Finding {
	w := vs[0]
	calls, errnos := map[string]uint64{}, map[string]uint64{}
	var total uint64
	var pids []uint32
	var procs []map[string]any
	measured, gaveUp := 0, 0
	for i, v := range vs {
		for c, n := range v.p.fails {
			calls[c] += n
		}
		for c, n := range v.p.errnos {
			errnos[c] += n
		}
		total += v.n
		pids = append(pids, v.pid)
		if v.measured {
			measured++
		}
		if v.p.exited && v.p.code != 0 {
			gaveUp++
		}
		if i < 8 {
			procs = append(procs, memlockEvidence(env, v))
		}
	}
	name := env.ProcName(w.pid, w.p.comm)
	who := name
	if len(vs) > 1 {
		who = fmt.Sprintf("%d processes (%s, …)", len(vs), name)
	}
	names := callList(calls)
	errs := callList(errnos)
	ev := map[string]any{"failures": total, "calls": calls, "errnos": errnos, "processes": procs, "example": w.p.example,
		"basis": "measured"}
	if w.p.asked > 0 {
		ev["requested_bytes"] = w.p.asked
	}
	f := Finding{ID: MemlockLimit, Severity: Warning, Procs: env.refs(pids...), Evidence: ev, Key: keyOf(exe),
		Syscalls: byValue(calls), Score: float64(total)}
	var sum strings.Builder
	avail := uint64(0)
	if fc := w.p.facts; fc != nil && fc.Available > 0 {
		avail = fc.Available
	} else if n, ok := hostfacts.MetaUint(env.Host.Meta, hostfacts.MetaMemAvailable); ok {
		avail = n
	}
	msg := "Cannot allocate memory"
	if errnos["EAGAIN"] > errnos["ENOMEM"] {
		msg = "Resource temporarily unavailable"
	}
	fmt.Fprintf(&sum, "%s failed %d %s call(s) (%s: %s)", who, total, names, errs, msg)
	if avail > 0 {
		ev["mem_available"] = avail
		fmt.Fprintf(&sum, " while the host had %s available (MemAvailable): the memory is not short", units.Bytes(avail))
	}
	sum.WriteString(". ")
	if fc := w.p.facts; w.measured && fc != nil {
		ev["rlimit_memlock_soft"], ev["rlimit_memlock_hard"] = fc.Soft, fc.Hard
		hard := "unlimited"
		if fc.Hard >= 0 {
			hard = units.Bytes(uint64(fc.Hard))
		}
		f.Title = fmt.Sprintf("%s reached RLIMIT_MEMLOCK (%s): %d %s call(s) failed with %s", who, units.Bytes(uint64(fc.Soft)), total, names, errs)
		one := "The process's"
		if len(vs) > 1 {
			one = fmt.Sprintf("%s[%d]'s", w.p.comm, w.pid)
		}
		fmt.Fprintf(&sum, "%s RLIMIT_MEMLOCK is %s soft, %s hard (/proc/%d/limits)", one, units.Bytes(uint64(fc.Soft)), hard, w.pid)
		switch {
		case fc.Soft == 0:
			sum.WriteString(": with a limit of 0 every lock is refused with EPERM. ")
		case w.p.entries > 0 && len(w.p.fails) == 1:
			ev["io_uring_entries"] = w.p.entries
			fmt.Fprintf(&sum, ", and it lacks CAP_IPC_LOCK: io_uring_setup of %d entries was refused because the kernel counts a ring's "+
				"pages against it, summed over all of the user's processes (a total no /proc file shows). ", w.p.entries)
		case w.p.all:
			ev["vm_size"] = fc.VmSize
			fmt.Fprintf(&sum, ": mlockall(MCL_CURRENT) must lock the whole address space, and the process held %s of it (VmSize) "+
				"when the doctor read it at its first failure. ", units.Bytes(fc.VmSize))
		default:
			ev["vm_lck"] = fc.VmLck
			fmt.Fprintf(&sum, "; it held %s locked (VmLck) when the doctor read it at its first failure", units.Bytes(fc.VmLck))
			if w.p.asked > 0 {
				fmt.Fprintf(&sum, ", and the refused call asked to lock %s more", units.Bytes(w.p.asked))
			}
			sum.WriteString(". ")
		}
		if measured < len(vs) {
			fmt.Fprintf(&sum, "%d of the %d processes were measured at the limit; the others could not be read. ", measured, len(vs))
		}
	} else {
		ev["basis"] = "inferred"
		f.Title = fmt.Sprintf("%s failed %d %s call(s) with %s: inferred to be RLIMIT_MEMLOCK", who, total, names, errs)
		why, cannot := "The process was gone before the doctor could read its limits", "which the doctor could not rule out"
		switch {
		case x.read == nil:
			why = "Read from a capture: the process's RLIMIT_MEMLOCK and what it held locked at the time cannot be known"
			cannot = "which a capture cannot rule out"
		case w.p.unread != "":
			why = "The doctor did not read the process's limits (" + w.p.unread + ")"
		}
		fmt.Fprintf(&sum, "%s, so the limit is inferred from the calls, not measured: ", why)
		if w.p.asked > 0 {
			fmt.Fprintf(&sum, "the refused call asked to lock %s; ", units.Bytes(w.p.asked))
		}
		sum.WriteString("mlock refuses past the limit with ENOMEM, mmap with EAGAIN, and with a limit of zero both with EPERM. ")
		if errnos["ENOMEM"] > 0 && calls["mlock"]+calls["mlock2"] > 0 {
			sum.WriteString("mlock's ENOMEM also means a range not mapped, " + cannot + ". ")
		}
	}
	switch {
	case gaveUp > 0:
		ev["exit_code"] = w.p.code
		if w.p.exited && w.p.code != 0 {
			fmt.Fprintf(&sum, "It gave up: it exited with status %d. ", w.p.code)
		} else {
			fmt.Fprintf(&sum, "%d of them gave up and exited non-zero. ", gaveUp)
		}
	default:
		sum.WriteString("It kept retrying. ")
	}
	sum.WriteString("The kernel counts every locked page (mlock, mlock2, mlockall, mmap with MAP_LOCKED, every mapping made after " +
		"mlockall(MCL_FUTURE)) against the process's RLIMIT_MEMLOCK unless it has CAP_IPC_LOCK, and refuses past it whatever memory is free.")
	f.Summary = strings.TrimSpace(sum.String())
	f.Fix = fmt.Sprintf("Raise the limit where the process is started: `ulimit -l KIB` (or `unlimited`) in the shell that starts it, "+
		"LimitMEMLOCK= in its systemd unit, `--ulimit memlock=BYTES:BYTES` for docker or podman (containers get 8 MiB or less), "+
		"memlock in /etc/security/limits.conf for login sessions, or `prlimit --pid %d --memlock=SOFT:HARD` for the running process. "+
		"Or give it CAP_IPC_LOCK (AmbientCapabilities=CAP_IPC_LOCK, `--cap-add IPC_LOCK`), which the limit does not apply to. "+
		"`grep VmLck /proc/%d/status` shows what it holds locked.", w.pid, w.pid)
	return f
}

func memlockEvidence(env *Env, v *mlVerdict) map[string]any {
	m := map[string]any{"process": env.ProcName(v.pid, v.p.comm), "failures": v.n, "calls": v.p.fails}
	if v.p.exited {
		m["exit_code"] = v.p.code
	}
	if f := v.p.facts; f != nil {
		if f.Limits {
			m["rlimit_memlock_soft"], m["rlimit_memlock_hard"] = f.Soft, f.Hard
		}
		if f.Status {
			m["vm_lck"], m["vm_size"] = f.VmLck, f.VmSize
		}
		if f.IPCLock {
			m["cap_ipc_lock"] = true
		}
		if f.Err != "" {
			m["read_error"] = f.Err
		}
	}
	return m
}

// forget drops ended processes (Doctor.forget).
func (x *memlock) forget(pids, _ map[uint32]bool) {
	for pid := range pids {
		delete(x.procs, pid)
	}
}

// readMemlockFacts reads, at a failure, a live process's RLIMIT_MEMLOCK,
// what it holds locked, and its capabilities.
func readMemlockFacts(pid uint32) *memlockFacts {
	f := &memlockFacts{Soft: -1, Hard: -1}
	dir := filepath.Join(proc.Root, strconv.FormatUint(uint64(pid), 10))
	var errs []string
	if b, err := os.ReadFile(filepath.Join(dir, "limits")); err != nil {
		errs = append(errs, err.Error())
	} else {
		f.Soft, f.Hard, f.Limits = rlimit(string(b), "Max locked memory")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "status")); err != nil {
		errs = append(errs, err.Error())
	} else {
		f.VmLck, f.VmSize, f.IPCLock, f.Status = parseMemlockStatus(string(b))
	}
	if n, ok := hostfacts.MetaUint(hostfacts.Limits(), hostfacts.MetaMemAvailable); ok {
		f.Available = n
	}
	f.Err = strings.Join(errs, "; ")
	return f
}

// parseMemlockStatus reads VmLck, VmSize (kB) and CAP_IPC_LOCK (bit 14 of
// CapEff) from the text of /proc/PID/status.
func parseMemlockStatus(text string) (lck, size uint64, ipcLock, ok bool) {
	const capIPCLock = 14
	var seen int
	for _, line := range strings.Split(text, "\n") {
		k, v, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		switch k {
		case "VmLck", "VmSize":
			n, err := strconv.ParseUint(fs[0], 10, 64)
			if err != nil {
				continue
			}
			if k == "VmLck" {
				lck = n << 10
			} else {
				size = n << 10
			}
			seen++
		case "CapEff":
			if c, err := strconv.ParseUint(fs[0], 16, 64); err == nil {
				ipcLock = c&(1<<capIPCLock) != 0
			}
		}
	}
	return lck, size, ipcLock, seen == 2
}
