package diff

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/sysray/sysray/internal/output"
	"github.com/sysray/sysray/internal/units"
)

// PrintJSON writes the result as one document (docs/diff.md).
func PrintJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// PrintText writes the result as a table, like sysray stat's, then the rows
// and errnos that appeared or vanished.
func PrintText(w io.Writer, r *Result) error {
	for _, x := range []struct {
		l  string
		in Input
	}{{"A", r.A}, {"B", r.B}} {
		d := "duration unknown"
		if x.in.DurationNS != nil {
			d = fmt.Sprintf("%.3fs", float64(*x.in.DurationNS)/1e9)
		}
		fmt.Fprintf(w, "%s: %s (%s, %s", x.l, x.in.Path, x.in.Kind, d)
		if x.in.Drops > 0 {
			fmt.Fprintf(w, ", %d events lost: its counts are short", x.in.Drops)
		}
		fmt.Fprintln(w, ")")
	}
	fmt.Fprintf(w, "by %s, ordered by |Δ time|, the time at stake\n\n", r.By)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "Δ time\ttime A→B\tcalls A→B\tΔ calls\tcalls/s A→B\terrors A→B\tp50 A→B\tp99 A→B\tmax A→B\t\n")
	var ta, tb Stats
	for _, row := range r.Rows {
		line(tw, &row, "")
		for _, sc := range row.Syscalls {
			line(tw, &sc, "  ")
		}
		if row.A != nil {
			ta.add(row.A)
		}
		if row.B != nil {
			tb.add(row.B)
		}
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\t%s\t\t\t%s\t %s\n", signedDur(int64(tb.TotalNS)-int64(ta.TotalNS)),
		pair(true, true, dur(ta.TotalNS), dur(tb.TotalNS)), pair(true, true, fmt.Sprint(ta.Calls), fmt.Sprint(tb.Calls)),
		signed(int64(tb.Calls)-int64(ta.Calls)), pair(true, true, fmt.Sprint(ta.Errors), fmt.Sprint(tb.Errors)),
		pair(true, true, dur(ta.MaxNS), dur(tb.MaxNS)), "total")
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	changes(w, "new", r.New, func(c Change) string { return fmt.Sprintf("%s (%d calls)", where(c), c.B) })
	changes(w, "vanished", r.Vanished, func(c Change) string { return fmt.Sprintf("%s (%d calls)", where(c), c.A) })
	changes(w, "new errnos", r.NewErrnos, func(c Change) string { return fmt.Sprintf("%s %s (%d)", where(c), c.Errno, c.B) })
	changes(w, "vanished errnos", r.VanishedErrnos, func(c Change) string { return fmt.Sprintf("%s %s (%d)", where(c), c.Errno, c.A) })
	if r.MaxRelError > 0 {
		_, err := fmt.Fprintf(w, "percentiles are within %.1f%% of the exact values\n", 100*r.MaxRelError)
		return err
	}
	return nil
}

func (s *Stats) add(o *Stats) {
	s.Calls += o.Calls
	s.Errors += o.Errors
	s.TotalNS += o.TotalNS
	s.MaxNS = max(s.MaxNS, o.MaxNS)
}

func line(w io.Writer, r *Row, indent string) {
	a, b := r.A != nil, r.B != nil
	var za, zb Stats
	if a {
		za = *r.A
	}
	if b {
		zb = *r.B
	}
	rates := ""
	if za.RatePerS != nil || zb.RatePerS != nil {
		rates = pair(a, b, rate(za.RatePerS), rate(zb.RatePerS))
	}
	name := indent + output.Escape(r.Name)
	if r.Status == StatusNew || r.Status == StatusVanished {
		name += " (" + r.Status + ")"
	}
	var errnos []string
	for _, e := range r.Errnos {
		switch e.Status {
		case StatusSame:
		case StatusNew, StatusVanished:
			errnos = append(errnos, fmt.Sprintf("%s %s %s", e.Name, signed(e.Delta), e.Status))
		default:
			errnos = append(errnos, fmt.Sprintf("%s %s", e.Name, signed(e.Delta)))
		}
	}
	if len(errnos) > 0 {
		name += "  [" + strings.Join(errnos, ", ") + "]"
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t %s\n", signedDur(r.Delta.TotalNS),
		pair(a, b, dur(za.TotalNS), dur(zb.TotalNS)),
		pair(a, b, fmt.Sprint(za.Calls), fmt.Sprint(zb.Calls)), signed(r.Delta.Calls), rates,
		pair(a, b, fmt.Sprint(za.Errors), fmt.Sprint(zb.Errors)),
		pair(a, b, dur(za.P50NS), dur(zb.P50NS)), pair(a, b, dur(za.P99NS), dur(zb.P99NS)),
		pair(a, b, dur(za.MaxNS), dur(zb.MaxNS)), name)
}

// pair is "a → b", with "-" for a side the row is absent from.
func pair(hasA, hasB bool, a, b string) string {
	if !hasA {
		a = "-"
	}
	if !hasB {
		b = "-"
	}
	if a == b {
		return a
	}
	return a + " → " + b
}

func dur(ns uint64) string { return units.Duration(ns) }

func rate(r *float64) string {
	if r == nil {
		return "?"
	}
	return units.Count(*r)
}

func signed(v int64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%+d", v)
}

func signedDur(v int64) string {
	switch {
	case v > 0:
		return "+" + units.Duration(uint64(v))
	case v < 0:
		return "-" + units.Duration(uint64(-v))
	}
	return "0"
}

func where(c Change) string {
	if c.Syscall != "" {
		return output.Escape(c.Row) + " › " + c.Syscall
	}
	return output.Escape(c.Row)
}

func changes(w io.Writer, what string, l []Change, f func(Change) string) {
	if len(l) == 0 {
		fmt.Fprintf(w, "%s: none\n", what)
		return
	}
	parts := make([]string, len(l))
	for i, c := range l {
		parts[i] = f(c)
	}
	fmt.Fprintf(w, "%s: %s\n", what, strings.Join(parts, ", "))
}
