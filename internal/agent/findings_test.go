package agent

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sysray/sysray/internal/doctor"
)

var number = regexp.MustCompile(`[0-9]+([.,][0-9]+)*`)

// finding is a detector's finding, keyed by its title without the
// numbers, as a detector keys without counts, times or pids.
func finding(id doctor.ID, sev doctor.Severity, title string, pids ...uint32) doctor.Finding {
	f := doctor.Finding{ID: id, Severity: sev, Title: title}
	f.Key = string(id) + ":" + number.ReplaceAllString(title, "#")
	for _, p := range pids {
		f.Procs = append(f.Procs, doctor.ProcRef{PID: p, Cgroup: uint64(p)})
	}
	return f
}

// Pid 1xx runs in container "web", 2xx in "db", the rest on the host.
func testNamer(pid uint32, cg uint64) (Labels, bool) {
	switch pid / 100 {
	case 1:
		return Labels{Container: "web", Pod: "web-1", Namespace: "shop"}, true
	case 2:
		return Labels{Container: "db"}, true
	}
	return Host, true
}

// The same finding window after window is one finding, seen many times;
// its severity rises and does not fall back; it stops being active after
// a quiet spell and is forgotten later.
func TestFindingsDeduplicate(t *testing.T) {
	s := NewFindings(FindingsOptions{ActiveFor: 30 * time.Second, Forget: time.Hour, Name: testNamer, MaxContainers: 10})
	t0 := time.Unix(1_700_000_000, 0)
	w := func(i int) time.Time { return t0.Add(time.Duration(i) * 10 * time.Second) }

	news := s.Merge([]doctor.Finding{finding("slow-syscall", doctor.Info, "3 slow write, up to 12.5ms", 101)}, w(0))
	if len(news) != 0 {
		t.Errorf("an info finding triggered a capture: %+v", news)
	}
	news = s.Merge([]doctor.Finding{finding("slow-syscall", doctor.Warning, "7 slow write, up to 140ms", 102)}, w(1))
	if len(news) != 1 || news[0].Severity != doctor.Warning || news[0].Occurrences != 2 {
		t.Fatalf("the rise to warning: %+v", news)
	}
	news = s.Merge([]doctor.Finding{finding("slow-syscall", doctor.Info, "2 slow write, up to 11ms", 101),
		finding("fatal-signal", doctor.Critical, "crash[7] was killed by SIGSEGV", 7)}, w(2))
	if len(news) != 1 || news[0].ID != "fatal-signal" {
		t.Errorf("only the new crash is news: %+v", news)
	}
	l := s.List(w(2))
	if len(l) != 2 {
		t.Fatalf("want 2 findings, got %+v", l)
	}
	if l[0].ID != "fatal-signal" || l[0].Labels[0] != Host {
		t.Errorf("first: %+v", l[0])
	}
	sl := l[1]
	if sl.Severity != doctor.Warning || sl.Occurrences != 3 || !sl.FirstSeen.Equal(w(0)) || !sl.LastSeen.Equal(w(2)) ||
		sl.Title != "2 slow write, up to 11ms" || sl.Labels[0].Container != "web" || !sl.Active {
		t.Errorf("slow-syscall kept as %+v", sl)
	}
	if l := s.List(w(6)); l[0].Active || l[1].Active {
		t.Errorf("still active 40 s later: %+v", l)
	}
	s.Merge(nil, t0.Add(2*time.Hour))
	if l := s.List(t0.Add(2 * time.Hour)); len(l) != 0 {
		t.Errorf("not forgotten after an hour: %+v", l)
	}
}

// Findings in other containers are other findings; a finding naming two
// containers is active in both; containers past the cap fold into other.
func TestFindingsMetrics(t *testing.T) {
	s := NewFindings(FindingsOptions{ActiveFor: 30 * time.Second, Name: testNamer, MaxContainers: 1})
	now := time.Now()
	s.Merge([]doctor.Finding{
		finding("kernel-hotspot", doctor.Warning, "3 processes in 2 cgroups spend 40% in fadvise", 101, 201),
		finding("slow-syscall", doctor.Warning, "1 slow fsync, up to 300ms", 101),
		finding("slow-syscall", doctor.Warning, "1 slow fsync, up to 300ms", 201),
	}, now)
	s.Merge([]doctor.Finding{finding("slow-syscall", doctor.Warning, "2 slow fsync, up to 310ms", 101)}, now)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	want := `
# HELP sysray_finding_active Findings active now (found in one of the last few windows), by detector, their highest severity, and container.
# TYPE sysray_finding_active gauge
sysray_finding_active{container="other",id="kernel-hotspot",namespace="",pod="",severity="warning"} 1
sysray_finding_active{container="other",id="slow-syscall",namespace="",pod="",severity="warning"} 1
sysray_finding_active{container="web",id="kernel-hotspot",namespace="shop",pod="web-1",severity="warning"} 1
sysray_finding_active{container="web",id="slow-syscall",namespace="shop",pod="web-1",severity="warning"} 1
# HELP sysray_findings_total Doctor windows in which a finding was made, by detector, the severity it had then, and container.
# TYPE sysray_findings_total counter
sysray_findings_total{container="other",id="kernel-hotspot",namespace="",pod="",severity="warning"} 1
sysray_findings_total{container="other",id="slow-syscall",namespace="",pod="",severity="warning"} 1
sysray_findings_total{container="web",id="kernel-hotspot",namespace="shop",pod="web-1",severity="warning"} 1
sysray_findings_total{container="web",id="slow-syscall",namespace="shop",pod="web-1",severity="warning"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// Containers come and go: one no finding has named for the grace period
// gives its label slot to the next, and its findings_total series go;
// a container with an active finding keeps its slot however old.
func TestFindingsReleaseContainers(t *testing.T) {
	s := NewFindings(FindingsOptions{ActiveFor: 30 * time.Second, Grace: time.Minute, Name: testNamer, MaxContainers: 1})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	t0 := time.Now()
	crash := func(pid uint32) doctor.Finding {
		return finding("fatal-signal", doctor.Critical, fmt.Sprintf("crasher[%d] was killed by SIGSEGV", pid), pid)
	}
	s.Merge([]doctor.Finding{crash(101)}, t0)
	// db's crash, while web holds the one slot: other.
	s.Merge([]doctor.Finding{crash(201)}, t0.Add(10*time.Second))
	if n := testutil.CollectAndCount(s, "sysray_findings_total"); n != 2 {
		t.Fatalf("%d findings_total series, want web's and other's", n)
	}
	// Two minutes on web has no finding: db's next crash gets the slot,
	// and web's series are gone.
	s.Merge([]doctor.Finding{crash(202)}, t0.Add(2*time.Minute))
	want := `
# HELP sysray_findings_total Doctor windows in which a finding was made, by detector, the severity it had then, and container.
# TYPE sysray_findings_total counter
sysray_findings_total{container="db",id="fatal-signal",namespace="",pod="",severity="critical"} 1
sysray_findings_total{container="other",id="fatal-signal",namespace="",pod="",severity="critical"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sysray_findings_total"); err != nil {
		t.Error(err)
	}
	// db stays named while its finding is active, past the grace.
	for _, m := range []time.Duration{3 * time.Minute, 3*time.Minute + 20*time.Second} {
		s.Merge([]doctor.Finding{crash(203)}, t0.Add(m))
	}
	s.Merge([]doctor.Finding{crash(102)}, t0.Add(4*time.Minute+10*time.Second))
	// web's crash while db's finding is active: other in the metrics, but
	// its own finding, under its own name, in the store (the finding of
	// its first crash, seen again).
	want = `
# HELP sysray_findings_total Doctor windows in which a finding was made, by detector, the severity it had then, and container.
# TYPE sysray_findings_total counter
sysray_findings_total{container="db",id="fatal-signal",namespace="",pod="",severity="critical"} 3
sysray_findings_total{container="other",id="fatal-signal",namespace="",pod="",severity="critical"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sysray_findings_total"); err != nil {
		t.Error(err)
	}
	var web bool
	for _, f := range s.List(t0) {
		web = web || f.Labels[0].Container == "web" && f.Occurrences == 2 && strings.Contains(f.Title, "[102]")
	}
	if !web {
		t.Errorf("web's second crash is not web's finding seen twice: %+v", s.List(t0))
	}
}

// Findings are one across windows by their key, which their detector
// defines (the audit backlog: one state of the host, whichever part of it
// a window saw), whatever their titles.
func TestFindingsKey(t *testing.T) {
	s := NewFindings(FindingsOptions{ActiveFor: 30 * time.Second, Forget: time.Hour, Name: testNamer, MaxContainers: 10})
	t0 := time.Unix(1_700_000_000, 0)
	titles := []string{"The audit backlog was full: audited syscalls waited for room in it",
		"Tasks waited 8.3s in all for room in the full audit backlog",
		"1 syscalls stalled up to 635ms waiting for room in the audit backlog"}
	for i, title := range titles {
		f := finding("audit-backlog-stall", doctor.Critical, title)
		f.Key = "audit-backlog-stall:audit backlog"
		s.Merge([]doctor.Finding{f}, t0.Add(time.Duration(i)*10*time.Second))
	}
	if l := s.List(t0.Add(20 * time.Second)); len(l) != 1 || l[0].Occurrences != 3 || l[0].Title != titles[2] {
		t.Errorf("three windows of one backlog: %+v", l)
	}
	// Other keys keep them apart.
	s2 := NewFindings(FindingsOptions{ActiveFor: 30 * time.Second, Forget: time.Hour, Name: testNamer, MaxContainers: 10})
	for i, title := range titles {
		s2.Merge([]doctor.Finding{finding("audit-backlog-stall", doctor.Critical, title)}, t0.Add(time.Duration(i)*10*time.Second))
	}
	if l := s2.List(t0.Add(20 * time.Second)); len(l) != 3 {
		t.Errorf("three keys: %d findings, want 3", len(l))
	}
}
