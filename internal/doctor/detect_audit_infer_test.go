package doctor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/audit"
	"github.com/sysray/sysray/internal/event"
)

const (
	nrClose       = 3
	sockNonblock  = 0x800
	auditSetMask  = 0x1 | 0x10 | 0x20 // enabled, backlog_limit, backlog_wait_time
	stallNS       = 600e6
	fastNS        = 100e3
	ruleAt        = 1.1e9
	acceptorStart = 2e9
)

// imported is a strace import's host: no stacks, and the audit traffic
// the traced processes sent.
func imported(t *testing.T, facts ...audit.Fact) Host {
	t.Helper()
	h := host
	h.Meta = map[string]string{"source": "strace", "absent": "stacks,page_faults,cgroups,cpu"}
	if len(facts) > 0 {
		b, err := json.Marshal(facts)
		if err != nil {
			t.Fatal(err)
		}
		h.Meta["strace_audit"] = string(b)
	}
	return h
}

func auditSet(at uint64, enabled, limit, wait uint32) audit.Fact {
	return audit.Fact{Time: at, Message: "AUDIT_SET",
		Fields: map[string]uint32{"enabled": enabled, "backlog_limit": limit, "backlog_wait_time": wait}}
}

func auditRule(at uint64, syscalls ...string) audit.Fact {
	return audit.Fact{Time: at, Message: "AUDIT_ADD_RULE", Syscalls: syscalls}
}

// acceptor is a libuv-like server: non-blocking accept4 calls every 10 ms
// from acceptorStart, every tenth of them stalled, and 1000 fast closes
// besides. flags are accept4's; slowClose of the closes are slow too.
func acceptor(flags uint64, slowClose int) (evs []event.Event, stalled int) {
	tm := uint64(acceptorStart)
	for i := range 100 {
		lat := uint64(fastNS)
		if i%10 == 3 {
			lat, stalled = stallNS, stalled+1
		}
		evs = append(evs, sys(5, tm, nrAccept4, 6, lat, 3, 0, 0, flags))
		tm += 10e6 + lat
	}
	for i := range 1000 {
		lat := uint64(5e3)
		if i < slowClose {
			lat = 50e6
		}
		evs = append(evs, sys(6, tm, nrClose, 0, lat, 7))
		tm += 1e6 + lat
	}
	return evs, stalled
}

// The scenario's settings (audit on, backlog 16, a rule on accept4) and
// non-blocking accept4 calls of 600 ms make the stall, said to be inferred.
func TestAuditStallInferred(t *testing.T) {
	evs, stalled := acceptor(sockNonblock, 0)
	h := imported(t, auditSet(1e9, 1, 16, 250), auditRule(ruleAt, "accept4"))
	fs := auditReport(h, evs)
	f := byID(fs, "audit-backlog-stall")
	if f == nil {
		t.Fatalf("no audit-backlog-stall: %v", titlesOf(fs))
	}
	// Nothing the kernel said confirms the backlog was full: one step
	// below the critical a seen 600 ms stall is.
	if f.Severity != Warning {
		t.Errorf("severity %v, want warning", f.Severity)
	}
	if f.Evidence["count"] != uint64(stalled) || f.Evidence["non_blocking_calls"] != uint64(stalled) {
		t.Errorf("count %v, non-blocking %v; want %d", f.Evidence["count"], f.Evidence["non_blocking_calls"], stalled)
	}
	if s := f.Evidence["audit_settings"].(map[string]uint32); s["backlog_limit"] != 16 || s["enabled"] != 1 || s["backlog_wait_time"] != 250 {
		t.Errorf("settings %v", s)
	}
	if r := f.Evidence["audit_rules"].([]string); len(r) != 1 || r[0] != "accept4" {
		t.Errorf("rules %v", r)
	}
	if sh := f.Evidence["slow_share"].(map[string]string); sh["audited"] != "10 of 100" || sh["other"] != "0 of 1000" {
		t.Errorf("slow share %v", sh)
	}
	for _, w := range []string{"inferred from the calls' durations", "not from a kernel stack", "backlog limit of 16"} {
		if !strings.Contains(f.Summary, w) {
			t.Errorf("summary lacks %q: %s", w, f.Summary)
		}
	}
	if !strings.Contains(f.Title, "inferred") {
		t.Errorf("title %q does not say it is inferred", f.Title)
	}
	if g := byID(fs, "slow-syscall"); g != nil {
		t.Errorf("the stalled calls are also slow-syscall's: %s", g.Title)
	}

	// The status the processes read back shows records lost while audit
	// was on: the detector's own rule, critical from one 100 ms stall.
	get := func(at uint64, lost, waited uint32) audit.Fact {
		return audit.Fact{Time: at, Message: "AUDIT_GET", Fields: map[string]uint32{"enabled": 1, "backlog_limit": 16,
			"backlog": 3, "lost": lost, "backlog_wait_time": 250, "backlog_wait_time_actual": waited}}
	}
	h = imported(t, auditSet(1e9, 1, 16, 250), auditRule(ruleAt, "accept4"), get(1.2e9, 700, 10), get(5e9, 706, 1000))
	f = byID(auditReport(h, evs), "audit-backlog-stall")
	if f == nil || f.Severity != Critical {
		t.Fatalf("confirmed by the counters: want critical, got %+v", f)
	}
	if f.Evidence["lost_records"] != uint32(6) || f.Evidence["waited_jiffies"] != uint32(990) {
		t.Errorf("lost %v, waited %v; want 6 and 990", f.Evidence["lost_records"], f.Evidence["waited_jiffies"])
	}
}

// What must not be taken for an audit stall.
func TestAuditStallNotInferred(t *testing.T) {
	nonblock, _ := acceptor(sockNonblock, 0)
	blocking, _ := acceptor(0, 0)
	loaded, _ := acceptor(sockNonblock, 100) // a tenth of the closes slow too
	cases := []struct {
		name  string
		evs   []event.Event
		facts []audit.Fact
	}{
		{"audit never mentioned", nonblock, nil},
		{"audit disabled", nonblock, []audit.Fact{auditSet(1e9, 0, 16, 250), auditRule(ruleAt, "accept4")}},
		{"no rule on the call", nonblock, []audit.Fact{auditSet(1e9, 1, 16, 250), auditRule(ruleAt, "openat", "connect")}},
		{"no backlog limit", nonblock, []audit.Fact{auditSet(1e9, 1, 0, 250), auditRule(ruleAt, "accept4")}},
		{"records dropped, not waited for", nonblock, []audit.Fact{auditSet(1e9, 1, 16, 0), auditRule(ruleAt, "accept4")}},
		{"audit turned off before the calls", nonblock, []audit.Fact{auditSet(1e9, 1, 16, 250), auditRule(ruleAt, "accept4"),
			auditSet(1.5e9, 0, 16, 250)}},
		{"rule added after the calls", nonblock, []audit.Fact{auditSet(1e9, 1, 16, 250), auditRule(60e9, "accept4")}},
		{"blocking accept4 waits for a client", blocking, []audit.Fact{auditSet(1e9, 1, 16, 250), auditRule(ruleAt, "accept4")}},
		{"every kind of call slow alike", loaded, []audit.Fact{auditSet(1e9, 1, 16, 250), auditRule(ruleAt, "accept4")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := auditReport(imported(t, c.facts...), c.evs)
			if f := byID(fs, "audit-backlog-stall"); f != nil {
				t.Fatalf("audit-backlog-stall: %s", f.Summary)
			}
			// The calls are still reported, without a cause.
			f := byID(fs, "slow-syscall")
			if f == nil || !strings.Contains(f.Title, "accept4") && !strings.Contains(f.Title, "close") {
				t.Fatalf("no slow-syscall on the calls: %v", titlesOf(fs))
			}
		})
	}
}

// Without sleep records, a slow call's cause is unknown; live, or in a
// capture with sleep records, a call that never switched out ran.
func TestSlowCauseUnknownWithoutStacks(t *testing.T) {
	// 64 bytes: no large copy (bulkWork), so nothing explains its time.
	const nrGetrandom = 318
	call := sys(8, 1e9, nrGetrandom, 64, 150e6, 0, 64, 0)
	f := byID(auditReport(imported(t), []event.Event{call}), "slow-syscall")
	if f == nil || !strings.Contains(f.Title, "cause unknown") || strings.Contains(f.Title, "running") ||
		!strings.Contains(f.Summary, "imported from strace") || !strings.Contains(f.Fix, "--stacks") {
		t.Fatalf("strace import: %+v", f)
	}
	if f.Severity != Warning {
		t.Errorf("severity %v: a 150 ms call is a visible stall, whatever its cause", f.Severity)
	}
	f = byID(auditReport(host, []event.Event{call}), "slow-syscall")
	if f == nil || !strings.Contains(f.Title, "cause unknown") || !strings.Contains(f.Summary, "without --stacks") {
		t.Fatalf("capture without sleep records: %+v", f)
	}
	live := host
	live.Live = true
	f = byID(auditReport(live, []event.Event{call}), "slow-syscall")
	if f == nil || !strings.Contains(f.Title, "running in the kernel") {
		t.Fatalf("live: %+v", f)
	}
	// Another call's sleep record: sleep tracking was on, so this one ran.
	waited := sys(9, 2e9, nrOpenat, 3, 20e6)
	waited.Syscall.Sleeps = []event.Sleep{{Duration: 19e6, Stack: frames("__schedule+0x1", "schedule+0x2", "rwsem_down_read_slowpath+0x3")}}
	ran := false
	for _, g := range auditReport(host, []event.Event{call, waited}) {
		ran = ran || g.ID == "slow-syscall" && strings.Contains(g.Title, "getrandom") && strings.Contains(g.Title, "running in the kernel")
	}
	if !ran {
		t.Fatalf("capture with sleep records: the getrandom is not running: %v", titlesOf(auditReport(host, []event.Event{call, waited})))
	}
}

func titlesOf(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, string(f.ID)+": "+f.Title)
	}
	return out
}

// Without stacks, a parent in clone(CLONE_VFORK) waited for its child to
// exec, by design (posix_spawn does it); a plain clone that slow did not.
func TestSlowVforkWithoutStacks(t *testing.T) {
	const cloneVfork, cloneVM, sigchld = 0x4000, 0x100, 17
	spawn := sys(8, 1e9, nrClone, 99, 120e6, cloneVM|cloneVfork|sigchld)
	if f := byID(auditReport(imported(t), []event.Event{spawn}), "slow-syscall"); f != nil {
		t.Errorf("a vfork parent's wait reported: %s", f.Title)
	}
	fork := sys(8, 1e9, nrClone, 99, 120e6, sigchld)
	if f := byID(auditReport(imported(t), []event.Event{fork}), "slow-syscall"); f == nil || !strings.Contains(f.Title, "clone") {
		t.Errorf("a 120 ms fork not reported: %+v", f)
	}
}
