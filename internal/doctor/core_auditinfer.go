package doctor

import (
	"encoding/json"
	"sort"

	"github.com/sysray/sysray/internal/audit"
	"github.com/sysray/sysray/internal/event"
)

// Which slow calls of an imported capture a full audit backlog explains
// (detect_audit_infer.go says how it is inferred): audit-backlog-stall
// reports them and slow-syscall leaves them out, so both must pick the same.

// auditFacts is the audit traffic an imported capture recorded, in time
// order.
type auditFacts []audit.Fact

func readAuditFacts(meta map[string]string) auditFacts {
	s := meta["strace_audit"]
	if s == "" {
		return nil
	}
	var fs auditFacts
	if json.Unmarshal([]byte(s), &fs) != nil {
		return nil
	}
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Time < fs[j].Time })
	return fs
}

// auditState is what the facts said of audit at one time: the status
// fields last set or read, and the syscalls the rules added so far audit.
// Deleted rules are not in the log's facts (strace's AUDIT_DEL_RULE is not
// read), so a rule counts from when it was added; a later status set of
// enabled=0 ends it all.
type auditState struct {
	fields map[string]uint32
	rules  map[string]bool
}

func (fs auditFacts) at(t uint64) auditState {
	st := auditState{fields: map[string]uint32{}, rules: map[string]bool{}}
	for _, f := range fs {
		if f.Time > t {
			break
		}
		for k, v := range f.Fields {
			st.fields[k] = v
		}
		for _, s := range f.Syscalls {
			st.rules[s] = true
		}
	}
	return st
}

// stalls reports whether a full backlog would make an audited call sleep:
// audit on, a backlog limit (0 is none), and a wait time not set to 0 (with
// 0 the kernel drops records instead of waiting). An unknown wait time is
// the kernel's default, 60 s.
func (st auditState) stalls() bool {
	wait, known := st.fields["backlog_wait_time"]
	return st.fields["enabled"] >= 1 && st.fields["backlog_limit"] > 0 && (!known || wait > 0)
}

func (st auditState) covers(name string) bool { return st.rules[name] || st.rules["all"] }

// auditInference is an audit stall inferred from an imported capture.
type auditInference struct {
	state          auditState // at the first stalled call
	auditedSlow    uint64
	auditedTotal   uint64
	otherSlow      uint64
	otherTotal     uint64
	reads          int    // status reads while audit was on
	fullReads      int    // of them, at the backlog limit
	lost, waitedJf uint32 // growth over those reads
}

// A share of slow calls among the audited ones at least this many times
// that among the calls no rule covered: the backlog, not the host. The
// audit scenario under strace saw 7 of 106 accept4 calls stall against 0
// of 2,103 other calls that do not wait (a clone of 12 ms was a vfork
// parent's wait); a loaded host slows every kind of call alike (a factor
// near 1).
const auditShareFactor = 10

// inferAudit picks from the slow calls without sleep records those the
// audit facts explain: audit-backlog-stall reports them, slow-syscall
// leaves them out. counts are all the calls, fast or slow, by number. nil
// when the facts explain none.
func inferAudit(arch event.Arch, facts auditFacts, calls []unstackedCall, counts []uint64) (inf *auditInference, picked, rest []unstackedCall) {
	type pick struct {
		u  *unstackedCall
		st auditState
	}
	var picks []pick
	audited := map[uint32]bool{}
	for i := range calls {
		u := &calls[i]
		name := event.SyscallName(arch, u.sc.Nr)
		if !nonBlocking(arch, &u.sc) && !event.Is(name, event.NeverWaits) {
			continue
		}
		st := facts.at(u.at)
		if !st.stalls() || !st.covers(name) {
			continue
		}
		picks = append(picks, pick{u, st})
		audited[u.sc.Nr] = true
	}
	if len(picks) == 0 {
		return nil, nil, calls
	}
	inf = &auditInference{state: picks[0].st, auditedSlow: uint64(len(picks))}
	for nr, n := range counts {
		name := event.SyscallName(arch, uint32(nr))
		switch {
		case audited[uint32(nr)]:
			inf.auditedTotal += n
		case !event.Is(name, event.MayWait) && !event.Is(name, event.Waits):
			inf.otherTotal += n
		}
	}
	for i := range calls {
		name := event.SyscallName(arch, calls[i].sc.Nr)
		if !audited[calls[i].sc.Nr] && !event.Is(name, event.MayWait) && !vforkCall(name, &calls[i].sc) {
			inf.otherSlow++
		}
	}
	// auditedSlow/auditedTotal ≥ factor × otherSlow/otherTotal
	if inf.otherTotal > 0 && inf.auditedSlow*inf.otherTotal < auditShareFactor*inf.otherSlow*inf.auditedTotal {
		return nil, nil, calls
	}
	inf.counters(facts)
	in := map[*unstackedCall]bool{}
	for _, p := range picks {
		in[p.u] = true
		picked = append(picked, *p.u)
	}
	for i := range calls {
		if !in[&calls[i]] {
			rest = append(rest, calls[i])
		}
	}
	return inf, picked, rest
}

// counters reads what the status replies said while audit was on: a
// backlog at its limit, records lost, time tasks waited.
func (inf *auditInference) counters(facts auditFacts) {
	var first, last map[string]uint32
	for _, f := range facts {
		if f.Message != "AUDIT_GET" || f.Fields["enabled"] == 0 {
			continue
		}
		inf.reads++
		if lim := f.Fields["backlog_limit"]; lim > 0 && f.Fields["backlog"] >= lim {
			inf.fullReads++
		}
		if first == nil {
			first = f.Fields
		}
		last = f.Fields
	}
	if first == nil {
		return
	}
	grow := func(k string) uint32 {
		a, ok1 := first[k]
		b, ok2 := last[k]
		if ok1 && ok2 && b > a {
			return b - a
		}
		return 0
	}
	inf.lost, inf.waitedJf = grow("lost"), grow("backlog_wait_time_actual")
}
