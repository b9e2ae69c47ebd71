// Package stat summarises syscalls: counts, errors and time per syscall, as
// strace -c does, but from sysray's event stream or a capture.
package stat

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/sysray/sysray/internal/event"
)

// Row is the summary of one syscall.
type Row struct {
	Name       string `json:"syscall"`
	Calls      uint64 `json:"calls"`  // completed calls
	Errors     uint64 `json:"errors"` // completed calls that returned an error
	Unfinished uint64 `json:"unfinished,omitempty"`
	TotalNS    uint64 `json:"total_ns"`
	MaxNS      uint64 `json:"max_ns"`
}

// Summary accumulates syscall events.
type Summary struct {
	arch event.Arch
	rows map[uint32]*Row
}

// NewSummary returns an empty summary for arch's syscall table.
func NewSummary(arch event.Arch) *Summary {
	return &Summary{arch: arch, rows: map[uint32]*Row{}}
}

// Add counts e if it is a syscall.
func (s *Summary) Add(e *event.Event) {
	if e.Kind != event.KindSyscall {
		return
	}
	sc := &e.Syscall
	r := s.rows[sc.Nr]
	if r == nil {
		r = &Row{Name: event.SyscallName(s.arch, sc.Nr)}
		s.rows[sc.Nr] = r
	}
	if sc.Unfinished {
		// Like strace -c, only calls that returned are counted: exit_group never does.
		r.Unfinished++
		return
	}
	r.Calls++
	if sc.Failed() {
		r.Errors++
	}
	r.TotalNS += sc.Latency
	if sc.Latency > r.MaxNS {
		r.MaxNS = sc.Latency
	}
}

// Rows returns the rows by total time, then calls, then name.
func (s *Summary) Rows() []Row {
	out := make([]Row, 0, len(s.rows))
	for _, r := range s.rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.TotalNS != b.TotalNS {
			return a.TotalNS > b.TotalNS
		}
		if a.Calls != b.Calls {
			return a.Calls > b.Calls
		}
		return a.Name < b.Name
	})
	return out
}

// Print writes a table in the spirit of strace -c.
func (s *Summary) Print(w io.Writer) error {
	rows := s.Rows()
	var total Row
	unfinished := false
	for _, r := range rows {
		total.Calls += r.Calls
		total.Errors += r.Errors
		total.TotalNS += r.TotalNS
		total.Unfinished += r.Unfinished
		if r.Unfinished > 0 {
			unfinished = true
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "% time\tseconds\tusecs/call\tmax usecs\tcalls\terrors\t"
	if unfinished {
		head += "unfinished\t"
	}
	fmt.Fprintln(tw, head+" syscall")
	line := func(r Row, pct float64) {
		per := uint64(0)
		if r.Calls > 0 {
			per = r.TotalNS / r.Calls / 1000
		}
		errs := ""
		if r.Errors > 0 {
			errs = fmt.Sprint(r.Errors)
		}
		fmt.Fprintf(tw, "%.2f\t%.6f\t%d\t%d\t%d\t%s\t", pct, float64(r.TotalNS)/1e9, per, r.MaxNS/1000, r.Calls, errs)
		if unfinished {
			u := ""
			if r.Unfinished > 0 {
				u = fmt.Sprint(r.Unfinished)
			}
			fmt.Fprintf(tw, "%s\t", u)
		}
		fmt.Fprintln(tw, " "+r.Name)
	}
	for _, r := range rows {
		pct := 0.0
		if total.TotalNS > 0 {
			pct = 100 * float64(r.TotalNS) / float64(total.TotalNS)
		}
		line(r, pct)
	}
	total.Name = "total"
	line(total, 100)
	return tw.Flush()
}
