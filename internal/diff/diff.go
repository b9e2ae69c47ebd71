package diff

import (
	"sort"
	"time"
)

// Stats is one row's numbers on one side.
type Stats struct {
	Calls   uint64            `json:"calls"`
	Errors  uint64            `json:"errors"`
	TotalNS uint64            `json:"total_ns"`
	P50NS   uint64            `json:"p50_ns"`
	P99NS   uint64            `json:"p99_ns"`
	MaxNS   uint64            `json:"max_ns"`
	Errnos  map[string]uint64 `json:"errnos,omitempty"`
	// RatePerS is Calls per second of the input's duration; nil when the
	// input does not say how long it lasted.
	RatePerS *float64 `json:"rate_per_s"`
}

// Group is a row of one side: a syscall, or a process or container with,
// where the input kept them, the syscalls it made.
type Group struct {
	Stats
	Syscalls map[string]Stats
	PIDs     []uint32 // --by process: the processes of this name
}

// Side is one input, tallied by the grouping it was read with.
type Side struct {
	Path     string
	Kind     string // KindCapture or KindStat
	By       string // syscall, process or container
	Duration time.Duration
	Drops    uint64
	Groups   map[string]*Group
}

// Kinds of input.
const (
	KindCapture = "capture"
	KindStat    = "stat"
)

// NewSide returns an empty side.
func NewSide(path, kind, by string) *Side {
	return &Side{Path: path, Kind: kind, By: by, Groups: map[string]*Group{}}
}

// Group returns the named group, creating it.
func (s *Side) Group(name string) *Group {
	g := s.Groups[name]
	if g == nil {
		g = &Group{}
		s.Groups[name] = g
	}
	return g
}

// Row statuses.
const (
	StatusNew      = "new"      // absent from A
	StatusVanished = "vanished" // absent from B
	StatusChanged  = "changed"  // calls, errors or an errno's count differ
	StatusSame     = "same"     // the same counts (times may differ)
)

// Delta is B minus A. Percentile deltas are nil unless both sides have the row.
type Delta struct {
	Calls    int64    `json:"calls"`
	Errors   int64    `json:"errors"`
	TotalNS  int64    `json:"total_ns"`
	P50NS    *int64   `json:"p50_ns"`
	P99NS    *int64   `json:"p99_ns"`
	MaxNS    *int64   `json:"max_ns"`
	RatePerS *float64 `json:"rate_per_s"`
}

// Errno is one errno's change within a row.
type Errno struct {
	Name   string `json:"errno"`
	A      uint64 `json:"a"`
	B      uint64 `json:"b"`
	Delta  int64  `json:"delta"`
	Status string `json:"status"` // new, vanished, changed or same
}

// Row is one compared row.
type Row struct {
	Name     string   `json:"name"`
	Status   string   `json:"status"`
	A        *Stats   `json:"a"` // nil when new
	B        *Stats   `json:"b"` // nil when vanished
	Delta    Delta    `json:"delta"`
	Errnos   []Errno  `json:"errnos"`
	PIDsA    []uint32 `json:"pids_a,omitempty"`
	PIDsB    []uint32 `json:"pids_b,omitempty"`
	Syscalls []Row    `json:"syscalls,omitempty"`
}

// Input describes one side in a result.
type Input struct {
	Path       string `json:"path"`
	Kind       string `json:"kind"`
	DurationNS *int64 `json:"duration_ns"`
	Drops      uint64 `json:"drops"`
}

// Change names a row (and, for nested rows, its syscall) whose syscall or
// errno appeared or vanished.
type Change struct {
	Row     string `json:"row"`
	Syscall string `json:"syscall,omitempty"`
	Errno   string `json:"errno,omitempty"`
	A       uint64 `json:"a"`
	B       uint64 `json:"b"`
}

// Result is a whole comparison.
type Result struct {
	A              Input    `json:"a"`
	B              Input    `json:"b"`
	By             string   `json:"by"`
	Sort           string   `json:"sort"`
	Rows           []Row    `json:"rows"`
	New            []Change `json:"new"`
	Vanished       []Change `json:"vanished"`
	NewErrnos      []Change `json:"new_errnos"`
	VanishedErrnos []Change `json:"vanished_errnos"`
	MaxRelError    float64  `json:"percentile_max_relative_error"`
}

// SortKey names the order of rows, for the JSON document.
const SortKey = "abs_delta_total_ns"

func input(s *Side) Input {
	in := Input{Path: s.Path, Kind: s.Kind, Drops: s.Drops}
	if s.Duration > 0 {
		d := s.Duration.Nanoseconds()
		in.DurationNS = &d
	}
	return in
}

// withRate is a copy of st with its rate over d filled in (left nil when d
// is unknown); nil for nil.
func withRate(st *Stats, d time.Duration) *Stats {
	if st == nil {
		return nil
	}
	c := *st
	c.RatePerS = ratePerS(c.Calls, d)
	return &c
}

func ratePerS(calls uint64, d time.Duration) *float64 {
	if d <= 0 {
		return nil
	}
	r := float64(calls) / d.Seconds()
	return &r
}

// Compare lines up two sides row by row. Both must be grouped alike.
func Compare(a, b *Side, maxRelError float64) *Result {
	res := &Result{A: input(a), B: input(b), By: a.By, Sort: SortKey, MaxRelError: maxRelError,
		New: []Change{}, Vanished: []Change{}, NewErrnos: []Change{}, VanishedErrnos: []Change{}}
	for _, name := range union(a.Groups, b.Groups) {
		ga, gb := a.Groups[name], b.Groups[name]
		var sa, sb *Stats
		if ga != nil {
			sa = &ga.Stats
		}
		if gb != nil {
			sb = &gb.Stats
		}
		r := compareRow(name, sa, sb, a.Duration, b.Duration)
		if ga != nil {
			r.PIDsA = ga.PIDs
		}
		if gb != nil {
			r.PIDsB = gb.PIDs
		}
		// Syscalls within a process or container, where both inputs kept
		// them: a change is then listed once, at the syscall, unless the
		// whole group came or went.
		nested := a.By != "syscall" && (ga == nil || ga.Syscalls != nil) && (gb == nil || gb.Syscalls != nil)
		res.note(name, "", &r, !nested)
		if nested {
			var ca, cb map[string]Stats
			if ga != nil {
				ca = ga.Syscalls
			}
			if gb != nil {
				cb = gb.Syscalls
			}
			for _, sc := range union(ca, cb) {
				var xa, xb *Stats
				if st, ok := ca[sc]; ok {
					xa = &st
				}
				if st, ok := cb[sc]; ok {
					xb = &st
				}
				sr := compareRow(sc, xa, xb, a.Duration, b.Duration)
				if r.Status != StatusNew && r.Status != StatusVanished {
					res.note(name, sc, &sr, true)
				}
				r.Syscalls = append(r.Syscalls, sr)
			}
			sortRows(r.Syscalls)
		}
		res.Rows = append(res.Rows, r)
	}
	sortRows(res.Rows)
	for _, l := range [][]Change{res.New, res.Vanished, res.NewErrnos, res.VanishedErrnos} {
		sort.SliceStable(l, func(i, j int) bool {
			if l[i].Row != l[j].Row {
				return l[i].Row < l[j].Row
			}
			if l[i].Syscall != l[j].Syscall {
				return l[i].Syscall < l[j].Syscall
			}
			return l[i].Errno < l[j].Errno
		})
	}
	return res
}

// note records r's appearance or disappearance and, with errnos, those of
// its errnos.
func (res *Result) note(row, syscall string, r *Row, errnos bool) {
	c := Change{Row: row, Syscall: syscall}
	switch r.Status {
	case StatusNew:
		c.B = r.B.Calls
		res.New = append(res.New, c)
	case StatusVanished:
		c.A = r.A.Calls
		res.Vanished = append(res.Vanished, c)
	}
	if !errnos {
		return
	}
	for _, e := range r.Errnos {
		ec := Change{Row: row, Syscall: syscall, Errno: e.Name, A: e.A, B: e.B}
		switch e.Status {
		case StatusNew:
			res.NewErrnos = append(res.NewErrnos, ec)
		case StatusVanished:
			res.VanishedErrnos = append(res.VanishedErrnos, ec)
		}
	}
}

// compareRow compares a row's sides (nil where absent) over inputs that
// lasted da and db (0 if unknown).
func compareRow(name string, a, b *Stats, da, db time.Duration) Row {
	a, b = withRate(a, da), withRate(b, db)
	r := Row{Name: name, A: a, B: b, Errnos: []Errno{}}
	var za, zb Stats
	if a != nil {
		za = *a
	}
	if b != nil {
		zb = *b
	}
	r.Delta = Delta{
		Calls:   int64(zb.Calls) - int64(za.Calls),
		Errors:  int64(zb.Errors) - int64(za.Errors),
		TotalNS: int64(zb.TotalNS) - int64(za.TotalNS),
	}
	if a != nil && b != nil {
		r.Delta.P50NS = sub(b.P50NS, a.P50NS)
		r.Delta.P99NS = sub(b.P99NS, a.P99NS)
		r.Delta.MaxNS = sub(b.MaxNS, a.MaxNS)
	}
	// A row absent from a side with a known duration has a rate of 0 there.
	ra, rb := ratePerS(za.Calls, da), ratePerS(zb.Calls, db)
	if ra != nil && rb != nil {
		d := *rb - *ra
		r.Delta.RatePerS = &d
	}
	errnoChanged := false
	for _, name := range union(za.Errnos, zb.Errnos) {
		na, nb := za.Errnos[name], zb.Errnos[name]
		e := Errno{Name: name, A: na, B: nb, Delta: int64(nb) - int64(na), Status: StatusChanged}
		switch {
		case na == nb:
			e.Status = StatusSame
		case na == 0:
			e.Status = StatusNew
		case nb == 0:
			e.Status = StatusVanished
		}
		errnoChanged = errnoChanged || na != nb
		r.Errnos = append(r.Errnos, e)
	}
	sort.SliceStable(r.Errnos, func(i, j int) bool {
		di, dj := abs(r.Errnos[i].Delta), abs(r.Errnos[j].Delta)
		if di != dj {
			return di > dj
		}
		return r.Errnos[i].Name < r.Errnos[j].Name
	})
	switch {
	case a == nil:
		r.Status = StatusNew
	case b == nil:
		r.Status = StatusVanished
	case r.Delta.Calls != 0 || r.Delta.Errors != 0 || errnoChanged:
		r.Status = StatusChanged
	default:
		r.Status = StatusSame
	}
	return r
}

func sub(b, a uint64) *int64 {
	d := int64(b) - int64(a)
	return &d
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// sortRows orders rows by the time at stake, |Δ total time|, largest
// first; ties by name.
func sortRows(rows []Row) {
	sort.SliceStable(rows, func(i, j int) bool {
		di, dj := abs(rows[i].Delta.TotalNS), abs(rows[j].Delta.TotalNS)
		if di != dj {
			return di > dj
		}
		return rows[i].Name < rows[j].Name
	})
}

// union is the sorted keys of both maps.
func union[V any](a, b map[string]V) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]V{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}
