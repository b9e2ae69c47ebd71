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

// The findings it reports.
const (
	// MapCountLimit: the memory-management calls of a process fail with
	// ENOMEM because it holds vm.max_map_count mappings, whatever memory
	// is free.
	MapCountLimit ID = "map-count-limit"
	// MemoryRefused: the same calls fail with ENOMEM because of another
	// limit that is not the memory the host has: strict overcommit's
	// commit limit, or the process's RLIMIT_AS or RLIMIT_DATA.
	MemoryRefused ID = "memory-refused"
)

func init() {
	register(registration{ids: []ID{MapCountLimit, MemoryRefused},
		build: func(h *Host) Detector { return newMapCount(h.Arch, h.Live, h.canRead) }})
}

// mapCount explains ENOMEM ("Cannot allocate memory") from the calls that
// make, split or move mappings: mmap, mprotect, pkey_mprotect, munmap,
// mremap, brk. On a host with gigabytes free the errno points at memory,
// but the kernel returns it for limits that are not memory: the count of
// a process's mappings (vm.max_map_count; each split by mprotect or munmap
// needs one more), the commit limit under vm.overcommit_memory=2, and the
// process's RLIMIT_AS and RLIMIT_DATA. A memory cgroup's limit does not
// fail these calls: it is charged at page fault, where it reclaims or
// kills (cgroup-limit's). A MAP_32BIT mmap that fails is the low 2 GiB
// being full, failed-syscall-retry's: it is left out.
//
// Live, the first failure of a process makes the detector read its map
// count, RSS and soft RLIMIT_AS and RLIMIT_DATA, and the host's limits
// (hostfacts.Limits), because by report time the process may have unmapped,
// exited or been restarted. From a capture the count at the time cannot
// be known: the detector infers the map count from the header's facts
// when nothing else there explains the failures, and says so.
type mapCount struct {
	arch event.Arch
	// read returns what a live process and the host held; nil offline.
	// Unit tests replace it.
	read  func(pid uint32) *mapFacts
	procs map[uint32]*mapProc
	// made counts, by process, the mmap and munmap calls that succeeded
	// before its first failure: in a capture, where the count is not
	// known, the mappings the process was seen making.
	made map[uint32]*[2]uint64
	// locked marks processes whose mmap failed with EAGAIN: the limit on
	// locked memory (memlock-limit's), which after mlockall(MCL_FUTURE)
	// refuses brk too. Their failed brk says nothing of the map count.
	locked map[uint32]bool
	reads  int // processes read
	// closest is the process Findings found nearest a finding (near).
	closest *Near
}

type mapProc struct {
	comm     string
	fails    map[string]uint64 // by syscall
	first    uint64
	lastRead uint64 // event time of the failure that prompted the last read
	reads    int
	example  string
	munmap   bool   // a munmap failed: only the map count explains it
	largest  uint64 // the largest length a failed mmap or mremap asked for
	facts    *mapFacts
}

// mapFacts is what a process and the host held when a failure was seen.
type mapFacts struct {
	Count int // mappings; -1 unknown
	RSS   uint64
	// Soft RLIMIT_AS and RLIMIT_DATA in bytes, -1 unlimited; Rlimits says
	// they were read.
	AS, Data int64
	Rlimits  bool
	VmSize   uint64 // the address space the process held, bytes (0 unknown)
	// VmData is its data and stack mappings (statm's data field), bytes:
	// what RLIMIT_DATA counts (private writable mappings), and the stack,
	// so an upper bound (0 unknown).
	VmData uint64
	Meta   map[string]string // the host's limits then (hostfacts.Limits)
	Err    string            // why some facts are missing
}

// Thresholds. See docs/detectors/map-count-limit.md.
const (
	// "At the limit" is a count within this many of vm.max_map_count. The
	// count is read after the failure, and by then the process may have
	// unmapped a few (its retry's own munmap, a thread's stack and guard
	// page freed as it exits); and an mprotect of the middle of a mapping
	// needs two more mappings, so it fails one below the limit. Sixteen
	// covers those, and is nothing next to the limit (65530 by default) or
	// to what a process that is not near it holds (hundreds to a few
	// thousand).
	mapSlack = 16
	// From a capture the count is not known. A single ENOMEM there may be
	// an mprotect of a range that is not mapped (ENOMEM too); a program
	// stuck at its map count fails every time it tries. This many
	// failures in a process, with nothing else in the header to explain
	// them, make the map count the likely cause; one failed munmap is
	// enough, since munmap fails with ENOMEM for no other reason.
	mapInferMin = 10
	// Under strict overcommit the commit limit refuses a request that does
	// not fit in what is left of it. The doctor reads Committed_AS after
	// the failure, so it counts the limit as reached when what is left is
	// less than the largest failed request, or than 1/64 of the limit
	// (what a busy host commits and frees in the moment between the two).
	mapCommitShare = 64
	// Reads of a live process: at its first failure, and again at a later
	// one at least this long after (event time) while no read has found
	// it at the limit, at most mapReadsEach times. Each read is one pass
	// over /proc/PID/maps (the kernel holds the process's mmap lock while
	// it writes each page of it) and a dozen small files.
	mapReadEvery = 1e9 // ns
	mapReadsEach = 4
	// Processes read, at most: a host where every process fails is
	// described well enough by the first ones.
	mapReadProcs = 64
)

func newMapCount(arch event.Arch, live bool, canRead func() bool) *mapCount {
	x := &mapCount{arch: arch, procs: map[uint32]*mapProc{}, made: map[uint32]*[2]uint64{}, locked: map[uint32]bool{}}
	if live {
		x.read = func(pid uint32) *mapFacts {
			if canRead != nil && !canRead() {
				return nil // opening /proc would stall: the events alone
			}
			return readMapFacts(pid)
		}
	}
	return x
}

// mmFailure says whether s is one of the calls this detector explains,
// failing for want of memory. brk does not return an errno: it
// returns the old break when it refuses to move it, which the C library
// turns into ENOMEM.
func mmFailure(name string, s *event.Syscall) bool {
	const enomem, map32bit = -12, 0x40
	switch name {
	case "mmap", "mmap2":
		return s.Ret == enomem && s.Args[3]&map32bit == 0
	case "mprotect", "pkey_mprotect", "munmap", "mremap":
		return s.Ret == enomem
	case "brk":
		return s.Args[0] != 0 && uint64(s.Ret) != s.Args[0] && s.Ret >= 0
	}
	return false
}

func (x *mapCount) Observe(e *event.Event) {
	if e.Kind != event.KindSyscall || e.Syscall.Unfinished || e.Syscall.Refused {
		return
	}
	s := &e.Syscall
	name := event.SyscallName(x.arch, s.Nr)
	if !mmFailure(name, s) {
		if (name == "mmap" || name == "mmap2") && s.Ret == -11 { // EAGAIN
			x.locked[e.PID] = true
		}
		// Live, successes reach the doctor sampled: counted from captures only.
		if x.read == nil && (name == "mmap" || name == "mmap2" || name == "munmap") && !s.Failed() && x.procs[e.PID] == nil {
			m := x.made[e.PID]
			if m == nil {
				m = &[2]uint64{}
				x.made[e.PID] = m
			}
			if name == "munmap" {
				m[1]++
			} else {
				m[0]++
			}
		}
		return
	}
	p := x.procs[e.PID]
	if p == nil {
		p = &mapProc{comm: e.Comm, fails: map[string]uint64{}, first: e.Time}
		x.procs[e.PID] = p
	}
	p.fails[name]++
	p.first = min(p.first, e.Time)
	if p.example == "" {
		p.example = event.FormatSyscall(x.arch, s)
	}
	switch name {
	case "munmap":
		p.munmap = true
	case "mmap", "mmap2":
		p.largest = max(p.largest, s.Args[1])
	case "mremap":
		p.largest = max(p.largest, s.Args[2])
	}
	if x.read == nil || p.reads >= mapReadsEach || p.reads > 0 && (p.facts.atLimit() || e.Time < p.lastRead+mapReadEvery) {
		return
	}
	if p.reads == 0 {
		if x.reads >= mapReadProcs {
			return
		}
		x.reads++
	}
	p.reads++
	p.lastRead = e.Time
	if f := x.read(e.PID); f != nil && (p.facts == nil || f.Count > p.facts.Count) {
		p.facts = f
	}
}

// atLimit: the read found the process within mapSlack of the limit.
func (f *mapFacts) atLimit() bool {
	if f == nil || f.Count < 0 {
		return false
	}
	lim, ok := hostfacts.MetaUint(f.Meta, hostfacts.MetaMaxMapCount)
	return ok && uint64(f.Count)+mapSlack >= lim
}

// mapCause is what explains a process's failures.
type mapCause int

const (
	causeNone     mapCause = iota
	causeMapCount          // measured at the limit
	causeInferred          // the map count, inferred: no count, nothing else explains them
	causeCommit            // strict overcommit, the commit limit reached
	causeRlimitAS
	causeRlimitData
)

// mapVerdict is one process's part in a finding.
type mapVerdict struct {
	pid   uint32
	p     *mapProc
	n     uint64
	meta  map[string]string // the host's limits: read live, else the capture's
	cause mapCause
	why   string // for causeNone: the nearest rule it fell short of
	close float64
}

func (x *mapCount) verdict(env *Env, pid uint32, p *mapProc) *mapVerdict {
	v := &mapVerdict{pid: pid, p: p, meta: env.Host.Meta}
	for _, n := range p.fails {
		v.n += n
	}
	f := p.facts
	if f != nil && len(f.Meta) > 0 {
		v.meta = f.Meta
	}
	lim, limOK := hostfacts.MetaUint(v.meta, hostfacts.MetaMaxMapCount)
	counted := f != nil && f.Count >= 0
	switch {
	case counted && limOK && uint64(f.Count)+mapSlack >= lim:
		v.cause = causeMapCount
		return v
	case commitReached(v.meta, p.largest):
		v.cause = causeCommit
		return v
	case f != nil && f.Rlimits && nearRlimit(f.AS, f.VmSize, p.largest):
		v.cause = causeRlimitAS
		return v
	case f != nil && f.Rlimits && nearRlimit(f.Data, f.VmData, p.largest):
		v.cause = causeRlimitData
		return v
	case counted && limOK:
		v.close = float64(f.Count) / float64(lim-mapSlack)
		v.why = fmt.Sprintf("its map count was %d of vm.max_map_count %d when read; map-count-limit reports a count within %d of the limit",
			f.Count, lim, mapSlack)
		return v
	case counted:
		return v // the limit unknown: nothing to say
	case !limOK:
		// Neither count nor limit (a capture without the limits, a host
		// whose reads stall): only a failed munmap, which nothing else
		// explains, says it.
		if p.munmap {
			v.cause = causeInferred
		}
		return v
	}
	// No count: a capture, or a process gone before it was read.
	if avail, ok := hostfacts.MetaUint(v.meta, hostfacts.MetaMemAvailable); ok && p.largest > 0 && p.largest >= avail {
		return v // a request larger than the memory available: the heuristic overcommit's refusal, or no room
	}
	// Under strict overcommit the commit limit may have been reached after
	// the limits were read (a capture's header holds them from when the
	// recording began): then only a failed munmap, which commits nothing,
	// says the map count.
	strict := false
	if mode, ok := hostfacts.MetaUint(v.meta, hostfacts.MetaOvercommitMemory); ok && mode == 2 {
		strict = true
	}
	inferN := v.n
	if x.locked[pid] {
		inferN -= p.fails["brk"]
	}
	if p.munmap || inferN >= mapInferMin && !strict {
		v.cause = causeInferred
		return v
	}
	if strict {
		v.close = 0.5
		v.why = fmt.Sprintf("%d failure(s), the map count unknown, under strict overcommit (vm.overcommit_memory=2): "+
			"map-count-limit infers the map count then only from a failed munmap, which commits nothing", v.n)
		return v
	}
	v.close = float64(inferN) / mapInferMin
	v.why = fmt.Sprintf("%d failure(s), the map count unknown; map-count-limit infers it from %d failures, or from one failed munmap", inferN, mapInferMin)
	if inferN < v.n {
		v.why += fmt.Sprintf("; %d failed brk left out: its mmap failed with EAGAIN, the limit on locked memory, which refuses brk too", v.n-inferN)
	}
	return v
}

// nearRlimit: a soft rlimit is set, and what the process held is within
// the largest failed request, or 1/mapCommitShare of the limit, of it (the
// same margin as the commit limit's, for the same reasons). Unknown use
// counts as near: the limit is then named as a possible cause.
func nearRlimit(limit int64, used, largest uint64) bool {
	if limit < 0 {
		return false
	}
	return used == 0 || used+max(largest, uint64(limit)/mapCommitShare) >= uint64(limit)
}

// commitReached: strict overcommit, and what is left of the commit limit
// is less than the largest failed request or 1/mapCommitShare of it.
func commitReached(meta map[string]string, largest uint64) bool {
	mode, ok1 := hostfacts.MetaUint(meta, hostfacts.MetaOvercommitMemory)
	lim, ok2 := hostfacts.MetaUint(meta, hostfacts.MetaCommitLimit)
	used, ok3 := hostfacts.MetaUint(meta, hostfacts.MetaCommittedAS)
	if !ok1 || !ok2 || !ok3 || mode != 2 {
		return false
	}
	return used+max(largest, lim/mapCommitShare) >= lim
}

func (x *mapCount) near(*Env) *Near { return x.closest }

func (x *mapCount) Findings(env *Env) []Finding {
	x.closest = nil
	type group struct {
		cause mapCause
		exe   string
	}
	groups := map[group][]*mapVerdict{}
	for pid, p := range x.procs {
		v := x.verdict(env, pid, p)
		if v.cause == causeNone {
			if v.why != "" && (x.closest == nil || v.close > x.closest.Closeness) {
				x.closest = &Near{ID: MapCountLimit, Closeness: min(v.close, 0.999),
					Subject: fmt.Sprintf("%s failing with ENOMEM in %s", callList(p.fails), env.ProcName(pid, p.comm)), Short: v.why}
			}
			continue
		}
		g := group{v.cause, mapExe(env, pid, p.comm)}
		if g.cause == causeInferred {
			g.cause = causeMapCount // one finding, measured or not; its text says which processes were measured
		}
		groups[g] = append(groups[g], v)
	}
	var out []Finding
	for g, vs := range groups {
		// Measured processes first: the finding leads with what was read.
		sort.Slice(vs, func(i, j int) bool {
			if mi, mj := vs[i].cause == causeMapCount, vs[j].cause == causeMapCount; mi != mj {
				return mi
			}
			return vs[i].n > vs[j].n || vs[i].n == vs[j].n && vs[i].pid < vs[j].pid
		})
		out = append(out, x.finding(env, g.exe, vs))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// mapExe names a process's program for a key: its executable's base name,
// or its comm.
func mapExe(env *Env, pid uint32, comm string) string {
	if env.Procs != nil {
		if p, ok := env.Procs.Get(pid); ok && p.Exe != "" {
			return filepath.Base(p.Exe)
		}
	}
	return comm
}

func (x *mapCount) finding(env *Env, exe string, vs []*mapVerdict) Finding {
	w := vs[0]
	calls := map[string]uint64{}
	var total uint64
	var pids []uint32
	var procs []map[string]any
	measured := 0
	for i, v := range vs {
		for c, n := range v.p.fails {
			calls[c] += n
		}
		total += v.n
		pids = append(pids, v.pid)
		if v.cause == causeMapCount {
			measured++
		}
		if i < 8 {
			procs = append(procs, x.procEvidence(env, v))
		}
	}
	name := env.ProcName(w.pid, w.p.comm)
	who, is, was := name, "is", "was"
	if len(vs) > 1 {
		who, is, was = fmt.Sprintf("%d processes (%s, …)", len(vs), name), "are", "were"
	}
	names := callList(calls)
	ev := map[string]any{"errno": "ENOMEM", "failures": total, "calls": calls, "processes": procs, "example": w.p.example}
	meta := w.meta
	for _, k := range []string{hostfacts.MetaMaxMapCount, hostfacts.MetaMemAvailable, hostfacts.MetaOvercommitMemory, hostfacts.MetaCommitLimit, hostfacts.MetaCommittedAS} {
		if n, ok := hostfacts.MetaUint(meta, k); ok {
			ev[strings.TrimPrefix(k, "vm.")] = n
		}
	}
	f := Finding{Procs: env.refs(pids...), Evidence: ev, Key: keyOf(exe), Syscalls: byValue(calls), Score: float64(total)}
	var sum strings.Builder
	avail := ""
	if n, ok := hostfacts.MetaUint(meta, hostfacts.MetaMemAvailable); ok {
		avail = fmt.Sprintf(" while the host had %s available (MemAvailable)", units.Bytes(n))
		if x.read == nil {
			avail = fmt.Sprintf(" on a host that had %s available (MemAvailable) when the recording began", units.Bytes(n))
		}
	}
	lim, _ := hostfacts.MetaUint(meta, hostfacts.MetaMaxMapCount)
	switch w.cause {
	case causeMapCount, causeInferred:
		f.ID = MapCountLimit
		ev["basis"] = "measured"
		if measured == 0 {
			ev["basis"] = "inferred"
		}
		fmt.Fprintf(&sum, "%s failed %d %s call(s) with ENOMEM (Cannot allocate memory)%s. ", who, total, names, avail)
		if w.cause == causeMapCount {
			f.Severity = Critical
			f.Title = fmt.Sprintf("%s %s at vm.max_map_count (%d of %d mappings): %d %s call(s) failed with ENOMEM", who, is, w.p.facts.Count, lim, total, names)
			one := "the process"
			if len(vs) > 1 {
				one = fmt.Sprintf("%s[%d]", w.p.comm, w.pid)
			}
			fmt.Fprintf(&sum, "The memory is not short: %s held %d mappings against vm.max_map_count %d when the doctor read its maps at its first failure, "+
				"with an RSS of %s. ", one, w.p.facts.Count, lim, units.Bytes(w.p.facts.RSS))
			if measured < len(vs) {
				fmt.Fprintf(&sum, "%d of the %d processes were measured at the limit; the others' counts could not be read. ", measured, len(vs))
			}
		} else {
			f.Severity = Warning
			limit := "vm.max_map_count"
			if lim > 0 {
				limit = fmt.Sprintf("vm.max_map_count (%d)", lim)
			}
			f.Title = fmt.Sprintf("%s failed %d %s call(s) with ENOMEM: inferred to be %s", who, total, names, limit)
			why := "The process was gone before the doctor could read its map count"
			switch {
			case x.read == nil:
				why = "Read from a capture: the process's map count at the time cannot be known"
			case w.p.facts == nil:
				why = "The doctor did not read the process's map count (reads could stall on this host, or it was past the first " +
					strconv.Itoa(mapReadProcs) + " processes)"
			}
			fmt.Fprintf(&sum, "%s, so the map count is inferred from the facts, not measured: ", why)
			parts := []string{"vm.max_map_count was not known"}
			if lim > 0 {
				parts[0] = fmt.Sprintf("vm.max_map_count was %d", lim)
			}
			if mode, ok := hostfacts.MetaUint(meta, hostfacts.MetaOvercommitMemory); ok && mode != 2 {
				parts = append(parts, fmt.Sprintf("vm.overcommit_memory %d (heuristic: no commit limit)", mode))
			}
			if m := x.made[w.pid]; m != nil && m[0] > 0 {
				parts = append(parts, fmt.Sprintf("before its first failure the capture holds %d mmap calls of it that succeeded and %d munmap "+
					"(each adds a mapping unless it merges with a neighbour; what it held before the capture began is not seen)", m[0], m[1]))
			}
			if w.p.munmap {
				parts = append(parts, "munmap failed, which it does with ENOMEM only when a split would take the process past the count")
			} else {
				parts = append(parts, fmt.Sprintf("%d failures, a process stuck and retrying", w.n))
			}
			sum.WriteString(strings.Join(parts, "; ") + ". RLIMIT_AS and RLIMIT_DATA were not known and may also explain it. ")
		}
		sum.WriteString("Every mapping counts against vm.max_map_count whatever its size, and mmap, and any mprotect, munmap or mremap that " +
			"splits a mapping, fail with ENOMEM once the process holds that many: thread stacks, malloc's arenas and large allocations " +
			"all fail, whatever memory is free.")
		f.Fix = fmt.Sprintf("Raise the limit: `sysctl -w vm.max_map_count=262144` (a file in /etc/sysctl.d/ keeps it; "+
			"Elasticsearch and OpenSearch require 262144, and a JVM with many threads or mapped files needs it). Or make the program map "+
			"fewer, larger regions: `cat /proc/%d/maps | wc -l` and what repeats in it show which; neighbouring mappings merge only with the "+
			"same protection and flags, so alternating PROT_NONE guard pages, many small mmaps (glibc malloc sends every request from "+
			"M_MMAP_THRESHOLD, 128 KiB, to its own mmap: raise it with mallopt or MALLOC_MMAP_THRESHOLD_), many malloc arenas "+
			"(MALLOC_ARENA_MAX), thousands of thread stacks, or mapped files never unmapped each take one.", w.pid)
	case causeCommit:
		f.ID, f.Severity = MemoryRefused, Warning
		f.Key = keyOf("commit-limit", exe)
		cl, _ := hostfacts.MetaUint(meta, hostfacts.MetaCommitLimit)
		ca, _ := hostfacts.MetaUint(meta, hostfacts.MetaCommittedAS)
		f.Title = fmt.Sprintf("%s %s refused memory by the commit limit: %d %s call(s) failed with ENOMEM under vm.overcommit_memory=2", who, was, total, names)
		when := "when the doctor read them at the first failure"
		if x.read == nil {
			when = "as the capture's header holds them, from when the recording began"
		}
		fmt.Fprintf(&sum, "%s failed %d %s call(s) with ENOMEM%s: vm.overcommit_memory is 2 (strict), and the host had committed %s of its "+
			"CommitLimit of %s (Committed_AS: what every process was promised, used or not; %s). Strict overcommit refuses a mapping that "+
			"does not fit in what is left, however much is free.", who, total, names, avail, units.Bytes(ca), units.Bytes(cl), when)
		f.Fix = "Find who commits the most (`grep -E 'Commit' /proc/meminfo`; per process, the writable private mappings in /proc/PID/smaps); " +
			"raise the limit (`sysctl -w vm.overcommit_ratio=N`, or vm.overcommit_kbytes, or add swap), or go back to heuristic overcommit " +
			"(`sysctl -w vm.overcommit_memory=0`) where nothing needs the strict guarantee."
	case causeRlimitAS, causeRlimitData:
		f.ID, f.Severity = MemoryRefused, Warning
		fc := w.p.facts
		lname, lval := "RLIMIT_AS", fc.AS
		what := fmt.Sprintf("it held %s of address space", units.Bytes(fc.VmSize))
		if w.cause == causeRlimitData {
			lname, lval = "RLIMIT_DATA", fc.Data
			what = fmt.Sprintf("it held %s of data and stack mappings, which RLIMIT_DATA counts but for the stack", units.Bytes(fc.VmData))
		}
		f.Key = keyOf(strings.ToLower(lname), exe)
		f.Title = fmt.Sprintf("%s %s refused memory by its %s (%s): %d %s call(s) failed with ENOMEM", who, was, lname, units.Bytes(uint64(lval)), total, names)
		count := "Its map count could not be read"
		if fc.Count >= 0 {
			count = fmt.Sprintf("Its map count (%d) was below vm.max_map_count (%d)", fc.Count, lim)
		}
		fmt.Fprintf(&sum, "%s failed %d %s call(s) with ENOMEM%s. %s and no commit limit was reached, but its soft %s is %s: %s.",
			who, total, names, avail, count, lname, units.Bytes(uint64(lval)), what)
		f.Fix = fmt.Sprintf("Raise or remove the limit where the process is started (`ulimit -v` for RLIMIT_AS, `ulimit -d` for RLIMIT_DATA, "+
			"LimitAS= or LimitDATA= in a systemd unit; `prlimit --pid %d --as=unlimited` changes a running process). Programs that reserve "+
			"large address ranges (JVMs, Go, sanitizers) fail under RLIMIT_AS long before they use the memory; a memory cgroup limits what is used instead.", w.pid)
	}
	f.Summary = strings.TrimSpace(sum.String())
	return f
}

// forget drops ended processes (Doctor.forget).
func (x *mapCount) forget(pids, _ map[uint32]bool) {
	for pid := range pids {
		delete(x.procs, pid)
		delete(x.made, pid)
		delete(x.locked, pid)
	}
}

func (x *mapCount) procEvidence(env *Env, v *mapVerdict) map[string]any {
	m := map[string]any{"process": env.ProcName(v.pid, v.p.comm), "failures": v.n, "calls": v.p.fails}
	if made := x.made[v.pid]; made != nil {
		m["mmap_before_failure"], m["munmap_before_failure"] = made[0], made[1]
	}
	if f := v.p.facts; f != nil {
		if f.Count >= 0 {
			m["map_count"] = f.Count
			m["rss"] = f.RSS
		}
		if f.Rlimits {
			m["rlimit_as"], m["rlimit_data"] = f.AS, f.Data
		}
		if f.VmSize > 0 {
			m["vm_size"], m["vm_data"] = f.VmSize, f.VmData
		}
		if f.Err != "" {
			m["read_error"] = f.Err
		}
	}
	return m
}

// readMapFacts reads, at a failure, what a live process held and the
// host's limits.
func readMapFacts(pid uint32) *mapFacts {
	f := &mapFacts{Count: -1, AS: -1, Data: -1, Meta: hostfacts.Limits()}
	var errs []string
	n, err := proc.MapCount(pid)
	if err != nil {
		errs = append(errs, err.Error())
	} else {
		f.Count = n
		if rss, err := proc.RSS(pid); err == nil {
			f.RSS = rss
		}
	}
	dir := filepath.Join(proc.Root, strconv.FormatUint(uint64(pid), 10))
	if b, err := os.ReadFile(filepath.Join(dir, "limits")); err == nil {
		as, _, ok1 := rlimit(string(b), "Max address space")
		data, _, ok2 := rlimit(string(b), "Max data size")
		f.AS, f.Data, f.Rlimits = as, data, ok1 && ok2
	}
	if b, err := os.ReadFile(filepath.Join(dir, "statm")); err == nil {
		if fs := strings.Fields(string(b)); len(fs) > 0 {
			pages, _ := strconv.ParseUint(fs[0], 10, 64)
			f.VmSize = pages * uint64(os.Getpagesize())
		}
		if fs := strings.Fields(string(b)); len(fs) > 5 {
			pages, _ := strconv.ParseUint(fs[5], 10, 64)
			f.VmData = pages * uint64(os.Getpagesize())
		}
	}
	f.Err = strings.Join(errs, "; ")
	return f
}
