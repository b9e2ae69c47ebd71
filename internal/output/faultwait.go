package output

import (
	"fmt"
	"strings"

	"github.com/sysray/sysray/internal/event"
)

// faultWaitText is one line for a window of sleeps outside syscalls: the
// totals, then each place's first frame below the scheduler and its file.
func faultWaitText(w *event.FaultWait) string {
	var b strings.Builder
	fmt.Fprintf(&b, "fault_wait sleeps=%d majflt=%d minflt=%d", w.Count, w.MajFaults, w.MinFaults)
	for _, p := range w.Places {
		fmt.Fprintf(&b, " [%d×", p.Count)
		if len(p.Stack) > 0 {
			b.WriteString(" " + Escape(firstOwnFrame(p.Stack)))
		}
		if p.Map.Path != "" {
			b.WriteString(" " + Escape(p.Map.Path))
		}
		fmt.Fprintf(&b, " <%d.%06d>]", p.Duration/1e9, p.Duration%1e9/1e3)
	}
	if m := &w.Mem; m.Read && !m.Host {
		fmt.Fprintf(&b, " memcg=%s refault_file=%d", Escape(m.Cgroup), m.RefaultFile)
	}
	fmt.Fprintf(&b, " <%d.%06d>", w.Duration/1e9, w.Duration%1e9/1e3)
	return b.String()
}

// firstOwnFrame is the first frame that is not the scheduler's or the
// tracer's: where the thread chose to sleep.
func firstOwnFrame(st []event.Frame) string {
	for _, f := range st {
		fn, _, _ := strings.Cut(f.Name, "+")
		switch {
		case fn == "" || strings.HasPrefix(fn, "__bpf_trace") || strings.HasPrefix(fn, "bpf_trace") ||
			strings.HasPrefix(fn, "__traceiter") || strings.Contains(fn, "schedule") || fn == "__switch_to":
			continue
		}
		return fn
	}
	return ""
}
