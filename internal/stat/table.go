package stat

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/output"
	"github.com/sysray/sysray/internal/units"
)

// Key is what the kernel counts by.
type Key struct {
	PID    uint32
	Nr     uint32
	Cgroup uint64
}

// Cell is the count of one syscall in one process and cgroup.
type Cell struct {
	Key
	Count, Errors, Total, Max uint64
	// Runq is the part of Total the calls spent preempted, waiting for a
	// CPU (known live with sleep tracking on; 0 otherwise).
	Runq uint64
	// Timed is how many calls' latencies were measured. Under budgeted
	// timing it is fewer than Count, and Hist is weighted: each timed
	// call counts for the calls it stands for.
	Timed  uint64
	Hist   Hist
	Errnos map[int]uint64 // failures by errno
}

// Merge adds o's counts to c's: the same key counted in two places (a
// cell let go from the kernel, and the one its key made anew).
func (c *Cell) Merge(o *Cell) {
	c.Count += o.Count
	c.Errors += o.Errors
	c.Total += o.Total
	c.Max = max(c.Max, o.Max)
	c.Runq += o.Runq
	c.Timed += o.Timed
	c.Hist.Merge(&o.Hist)
	if len(o.Errnos) > 0 {
		errnos := make(map[int]uint64, len(c.Errnos)+len(o.Errnos))
		for e, n := range c.Errnos {
			errnos[e] += n
		}
		for e, n := range o.Errnos {
			errnos[e] += n
		}
		c.Errnos = errnos
	}
}

// Table accumulates cells, from the kernel or from events.
type Table struct {
	arch  event.Arch
	cells map[Key]*Cell
	// Every is the sampling of budgeted timing (Budget.Every) when the
	// cells came from it; 0 when every call was timed.
	Every uint32
}

// NewTable returns an empty table for arch's syscall names.
func NewTable(arch event.Arch) *Table { return &Table{arch: arch, cells: map[Key]*Cell{}} }

// Set replaces the table's contents (a fresh read of the kernel's counts).
func (t *Table) Set(cells []Cell) {
	t.cells = make(map[Key]*Cell, len(cells))
	for i := range cells {
		c := cells[i]
		t.cells[c.Key] = &c
	}
}

// AddEvent counts a syscall event exactly (captures, traces).
func (t *Table) AddEvent(e *event.Event) {
	if e.Kind != event.KindSyscall || e.Syscall.Unfinished {
		return
	}
	k := Key{PID: e.PID, Nr: e.Syscall.Nr, Cgroup: e.Cgroup}
	c := t.cells[k]
	if c == nil {
		c = &Cell{Key: k}
		t.cells[k] = c
	}
	s := &e.Syscall
	c.Count++
	c.Timed++
	c.Total += s.Latency
	c.Max = max(c.Max, s.Latency)
	c.Hist.Add(s.Latency)
	if s.Failed() {
		c.Errors++
		if c.Errnos == nil {
			c.Errnos = map[int]uint64{}
		}
		c.Errnos[int(-s.Ret)]++
	}
}

// StatRow is one line of a stat table.
type StatRow struct {
	Name    string            `json:"name"`
	Calls   uint64            `json:"calls"`
	Errors  uint64            `json:"errors"`
	TotalNS uint64            `json:"total_ns"`
	Percent float64           `json:"percent_time"`
	P50NS   uint64            `json:"p50_ns"`
	P90NS   uint64            `json:"p90_ns"`
	P99NS   uint64            `json:"p99_ns"`
	MaxNS   uint64            `json:"max_ns"`
	Errnos  map[string]uint64 `json:"errnos,omitempty"`
	// Timed is how many calls were timed by the clock; the percentiles
	// come from them. P50Rank and P99Rank bound how far, in fractions of
	// the calls, the rank each percentile was read at may lie from 0.5
	// and 0.99 (budgeted timing; 0 when every call was timed).
	Timed   uint64  `json:"timed"`
	P50Rank float64 `json:"p50_rank_error"`
	P99Rank float64 `json:"p99_rank_error"`
	hist    Hist
}

// Group says how rows are formed: by "syscall", "process" or "container".
// name turns a key into the row's name for the grouping.
func (t *Table) Rows(group func(Key) string) []StatRow {
	by := map[string]*StatRow{}
	var all uint64
	for k, c := range t.cells {
		name := group(k)
		r := by[name]
		if r == nil {
			r = &StatRow{Name: name}
			by[name] = r
		}
		r.Calls += c.Count
		r.Timed += c.Timed
		r.Errors += c.Errors
		r.TotalNS += c.Total
		r.MaxNS = max(r.MaxNS, c.Max)
		r.hist.Merge(&c.Hist)
		for e, n := range c.Errnos {
			if r.Errnos == nil {
				r.Errnos = map[string]uint64{}
			}
			r.Errnos[event.ErrnoName(e)] += n
		}
		all += c.Total
	}
	out := make([]StatRow, 0, len(by))
	for _, r := range by {
		r.P50NS = r.hist.Quantile(0.5, r.MaxNS)
		r.P90NS = r.hist.Quantile(0.9, r.MaxNS)
		r.P99NS = r.hist.Quantile(0.99, r.MaxNS)
		r.P50Rank = RankError(0.5, r.Calls, r.Timed, t.Every)
		r.P99Rank = RankError(0.99, r.Calls, r.Timed, t.Every)
		if all > 0 {
			r.Percent = 100 * float64(r.TotalNS) / float64(all)
		}
		out = append(out, *r)
	}
	return out
}

// BySyscall names rows by syscall.
func (t *Table) BySyscall(k Key) string { return event.SyscallName(t.arch, k.Nr) }

// SortRows orders rows by "time" (default), "calls", "errors", "p99", "max" or "name".
func SortRows(rows []StatRow, by string) error {
	less := map[string]func(a, b *StatRow) bool{
		"time":   func(a, b *StatRow) bool { return a.TotalNS > b.TotalNS },
		"calls":  func(a, b *StatRow) bool { return a.Calls > b.Calls },
		"errors": func(a, b *StatRow) bool { return a.Errors > b.Errors },
		"p99":    func(a, b *StatRow) bool { return a.P99NS > b.P99NS },
		"max":    func(a, b *StatRow) bool { return a.MaxNS > b.MaxNS },
		"name":   func(a, b *StatRow) bool { return a.Name < b.Name },
	}[by]
	if less == nil {
		return fmt.Errorf("--sort %s: want time, calls, errors, p99, max or name", by)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if less(&rows[i], &rows[j]) != less(&rows[j], &rows[i]) {
			return less(&rows[i], &rows[j])
		}
		return rows[i].Name < rows[j].Name
	})
	return nil
}

// PrintRows writes the rows like strace -c, with percentiles, and says
// how far to trust them when not every call was timed.
func PrintRows(w io.Writer, rows []StatRow, what string) error {
	if err := printTable(w, rows, what); err != nil {
		return err
	}
	var calls, timed uint64
	var worst float64
	for _, r := range rows {
		calls += r.Calls
		timed += r.Timed
		worst = max(worst, r.P99Rank)
	}
	if timed >= calls {
		return nil
	}
	_, err := fmt.Fprintf(w, "\n%d of %d calls were timed (budgeted timing: docs/stat.md); each percentile is within %.1f%% "+
		"of the latency at a rank within ±%.2f points of its own (99%% confidence); --exact-timing times every call\n",
		timed, calls, 100*MaxRelError, 100*worst)
	return err
}

func printTable(w io.Writer, rows []StatRow, what string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%% time\tseconds\tcalls\terrors\tp50\tp99\tmax\t %s\t\n", what)
	var tot StatRow
	for _, r := range rows {
		errs := ""
		if r.Errors > 0 {
			errs = fmt.Sprint(r.Errors)
		}
		fmt.Fprintf(tw, "%.2f\t%.6f\t%d\t%s\t%s\t%s\t%s\t %s\t\n", r.Percent, float64(r.TotalNS)/1e9, r.Calls, errs,
			units.Duration(r.P50NS), units.Duration(r.P99NS), units.Duration(r.MaxNS), output.Escape(r.Name))
		tot.Calls += r.Calls
		tot.Errors += r.Errors
		tot.TotalNS += r.TotalNS
		tot.MaxNS = max(tot.MaxNS, r.MaxNS)
	}
	fmt.Fprintf(tw, "100.00\t%.6f\t%d\t%d\t\t\t%s\t %s\t\n", float64(tot.TotalNS)/1e9, tot.Calls, tot.Errors, units.Duration(tot.MaxNS), "total")
	return tw.Flush()
}

// PrintJSON writes the rows as one document. drops counts every event and
// call lost, lost those of them the kernel's count table had no cell for.
func PrintJSON(w io.Writer, rows []StatRow, by string, drops uint64, lost Lost) error {
	return json.NewEncoder(w).Encode(map[string]any{"by": by, "rows": rows, "drops": drops,
		"uncounted_table_full": lost.Full, "uncounted_no_memory": lost.NoMem,
		"percentile_max_relative_error": MaxRelError})
}
