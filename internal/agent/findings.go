package agent

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sysray/sysray/internal/doctor"
)

// Finding is a doctor finding as the agent keeps it across windows: the
// latest occurrence's words and evidence, the highest severity any
// occurrence had (severity rises, never flaps back), and when it was seen.
type Finding struct {
	doctor.Finding
	// Key is the finding's key across windows (findingKey): the doctor's
	// key, which the embedded Finding serves as "key", and its containers.
	Key         string    `json:"store_key"`
	Labels      []Labels  `json:"labels"` // the containers it names; Host when none
	FirstSeen   time.Time `json:"first_seen"`
	LastSeen    time.Time `json:"last_seen"`
	Occurrences uint64    `json:"occurrences"` // windows it was found in
	Active      bool      `json:"active"`      // found in one of the last few windows
}

// FindingsOptions bound the store.
type FindingsOptions struct {
	// ActiveFor: a finding not seen again for this long is no longer
	// active (a few windows: one quiet window is not a recovery).
	ActiveFor time.Duration
	// Forget: a finding not seen for this long is dropped.
	Forget time.Duration
	// Max findings kept; past it the one seen longest ago goes.
	Max int
	// Name labels a process of a finding (the container it runs in).
	Name Namer
	// MaxContainers bounds the containers findings are labelled with;
	// findings in later ones are labelled Other.
	MaxContainers int
	// Grace: a container no finding has named for this long, with none
	// active, gives its label slot back and its sysray_findings_total
	// series go (as the syscall series of a container gone for --grace).
	// Its findings stay listed until Forget. Zero keeps slots for good.
	Grace time.Duration
	// New, if set, is told of each finding whose key the store did not
	// hold, with its processes, as Merge adds it (under the store's lock:
	// it must not wait). A finding forgotten (Forget, Max) and found again
	// is new again.
	New func(f *Finding, procs []doctor.ProcRef)
}

// Findings de-duplicates the doctor's findings from window to window.
type Findings struct {
	opt FindingsOptions

	mu    sync.Mutex
	byKey map[string]*Finding
	// total counts occurrences by (id, severity, container labels): a
	// counter that only grows, whatever the store forgets.
	total map[findingSeries]uint64
	ctrs  map[Labels]time.Time // containers with labels of their own: when a finding last named them
}

type findingSeries struct {
	id, severity string
	Labels
}

// NewFindings returns an empty store.
func NewFindings(opt FindingsOptions) *Findings {
	if opt.Max <= 0 {
		opt.Max = 1000
	}
	return &Findings{opt: opt, byKey: map[string]*Finding{}, total: map[findingSeries]uint64{}, ctrs: map[Labels]time.Time{}}
}

// Merge adds one window's findings, seen at now. It returns the findings
// that are new, or whose severity rose, at warning or above: what a flight
// recorder should keep a capture of.
func (s *Findings) Merge(fs []doctor.Finding, now time.Time) []Finding {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Forget first: a slot given back now is free for this window's
	// findings.
	s.expire(now)
	var news []Finding
	seen := map[string]bool{}
	for i := range fs {
		f := &fs[i]
		ordered, labels := s.labels(f)
		key := findingKey(f, labels)
		if seen[key] {
			continue // the same finding twice in one window (two groups worded alike)
		}
		seen[key] = true
		old := s.byKey[key]
		isNew := old == nil
		if isNew {
			old = &Finding{Key: key, FirstSeen: now}
			s.byKey[key] = old
		}
		rose := old.Occurrences == 0 || f.Severity > old.Severity
		sev := max(old.Severity, f.Severity)
		old.Finding = *f
		old.Finding.Severity = sev
		old.Finding.Procs = nil
		old.Labels = labels
		old.LastSeen = now
		old.Occurrences++
		if isNew && s.opt.New != nil {
			c := *old
			s.opt.New(&c, f.Procs)
		}
		series := map[Labels]bool{}
		for _, l := range ordered {
			series[s.slot(l, now)] = true
		}
		for l := range series {
			s.total[findingSeries{string(f.ID), f.Severity.String(), l}]++
		}
		if rose && sev >= doctor.Warning {
			news = append(news, *old)
		}
	}
	return news
}

// labels names the containers of a finding's processes, unbounded: the
// store and the API keep a crash in container c4 apart from one in c5
// (and a flight capture is named after each); only the metrics fold
// containers past MaxContainers into Other (slot).
// They come in the order of the processes (the order slots are given
// in), and sorted.
func (s *Findings) labels(f *doctor.Finding) (ordered, sorted []Labels) {
	var out []Labels
	have := map[Labels]bool{}
	for _, p := range f.Procs {
		l := Host
		if s.opt.Name != nil {
			l, _ = s.opt.Name(p.PID, p.Cgroup)
		}
		if !have[l] {
			have[l] = true
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		out = []Labels{Host}
	}
	sorted = slices.Clone(out)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Container < sorted[j].Container })
	return out, sorted
}

// slot is the labels container l's findings have in the metrics: its own
// while it holds one of MaxContainers slots (taking a free one if it has
// none), Other past them. now, if set, marks l as named by a finding.
func (s *Findings) slot(l Labels, now time.Time) Labels {
	if l == Host || l == Other {
		return l
	}
	if _, ok := s.ctrs[l]; !ok {
		if now.IsZero() || len(s.ctrs) >= s.opt.MaxContainers {
			return Other
		}
	}
	if !now.IsZero() {
		s.ctrs[l] = now
	}
	return l
}

// findingKey names a finding across windows: its containers and its key
// (doctor.Finding.Key, which its detector defines and which holds no
// count, time or pid: a program failing again after a restart is the same
// finding).
func findingKey(f *doctor.Finding, labels []Labels) string {
	var b strings.Builder
	b.WriteString(f.Key)
	for _, l := range labels {
		b.WriteString("|" + l.Namespace + "/" + l.Pod + "/" + l.Container)
	}
	return b.String()
}

func (s *Findings) expire(now time.Time) {
	for k, f := range s.byKey {
		if s.opt.Forget > 0 && now.Sub(f.LastSeen) > s.opt.Forget {
			delete(s.byKey, k)
		}
	}
	for len(s.byKey) > s.opt.Max {
		var oldest *Finding
		for _, f := range s.byKey {
			if oldest == nil || f.LastSeen.Before(oldest.LastSeen) {
				oldest = f
			}
		}
		delete(s.byKey, oldest.Key)
	}
	if s.opt.Grace <= 0 {
		return
	}
	for l, last := range s.ctrs {
		if now.Sub(last) <= s.opt.Grace || s.named(l, now) {
			continue
		}
		delete(s.ctrs, l)
		for k := range s.total {
			if k.Labels == l {
				delete(s.total, k)
			}
		}
	}
}

// named reports whether an active finding has container l's labels.
func (s *Findings) named(l Labels, now time.Time) bool {
	for _, f := range s.byKey {
		if s.active(f, now) && slices.Contains(f.Labels, l) {
			return true
		}
	}
	return false
}

// List returns the findings kept, active ones first, then by severity and
// last seen.
func (s *Findings) List(now time.Time) []Finding {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Finding, 0, len(s.byKey))
	for _, f := range s.byKey {
		c := *f
		c.Active = s.active(f, now)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := &out[i], &out[j]
		if a.Active != b.Active {
			return a.Active
		}
		if a.Severity != b.Severity {
			return a.Severity > b.Severity
		}
		if !a.LastSeen.Equal(b.LastSeen) {
			return a.LastSeen.After(b.LastSeen)
		}
		return a.Key < b.Key
	})
	return out
}

func (s *Findings) active(f *Finding, now time.Time) bool {
	return s.opt.ActiveFor <= 0 || now.Sub(f.LastSeen) <= s.opt.ActiveFor
}

var (
	findingLabels = append([]string{"id", "severity"}, ctrLabels...)
	descFindings  = prometheus.NewDesc("sysray_findings_total",
		"Doctor windows in which a finding was made, by detector, the severity it had then, and container.",
		findingLabels, nil)
	descActive = prometheus.NewDesc("sysray_finding_active",
		"Findings active now (found in one of the last few windows), by detector, their highest severity, and container.",
		findingLabels, nil)
)

// Describe implements prometheus.Collector.
func (s *Findings) Describe(ch chan<- *prometheus.Desc) {
	ch <- descFindings
	ch <- descActive
}

// Collect implements prometheus.Collector. A series of sysray_finding_active
// exists only while some finding has its labels: Prometheus sees it go
// stale when the finding ends or its severity rises.
func (s *Findings) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, n := range s.total {
		ch <- prometheus.MustNewConstMetric(descFindings, prometheus.CounterValue, float64(n),
			k.id, k.severity, k.Container, k.Pod, k.Namespace)
	}
	active := map[findingSeries]int{}
	for _, f := range s.byKey {
		if !s.active(f, now) {
			continue
		}
		series := map[Labels]bool{}
		for _, l := range f.Labels {
			series[s.slot(l, time.Time{})] = true
		}
		for l := range series {
			active[findingSeries{string(f.ID), f.Severity.String(), l}]++
		}
	}
	for k, n := range active {
		ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, float64(n),
			k.id, k.severity, k.Container, k.Pod, k.Namespace)
	}
}
