// Package render renders a doctor report for people (text) and programs
// (JSON, schema in docs/doctor.md).
package render

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/output"
	"github.com/sysray/sysray/internal/stat"
)

// JSON writes the report as one JSON document.
func JSON(w io.Writer, r *doctor.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// Text writes the report for a terminal. When nothing was found, the
// candidates that came within a tenth of a rule follow, to show what was
// looked at; explain lists every detector's nearest miss, found or not.
func Text(w io.Writer, r *doctor.Report, explain bool) error {
	var b strings.Builder
	count := map[doctor.Severity]int{}
	for _, f := range r.Findings {
		count[f.Severity]++
	}
	fmt.Fprintf(&b, "sysray doctor: %d finding(s): %d critical, %d warning, %d info — from %d events over %.2fs\n",
		len(r.Findings), count[doctor.Critical], count[doctor.Warning], count[doctor.Info], r.Events, float64(r.SpanNS)/1e9)
	fmt.Fprintf(&b, "kernel %s, vsyscall=%s\n", r.Host.Kernel, r.Host.VsyscallMode)
	if r.Drops > 0 {
		fmt.Fprintf(&b, "warning: %d events were lost (ring buffer full); counts below are lower bounds\n", r.Drops)
	}
	if r.Uncounted > 0 {
		why := stat.Lost{Full: r.Uncounted - r.UncountedNoMem, NoMem: r.UncountedNoMem}.Why()
		fmt.Fprintf(&b, "warning: %d syscalls went uncounted (%s); counts below are lower bounds\n", r.Uncounted, why)
	}
	if r.Forgotten > 0 {
		fmt.Fprintf(&b, "warning: %d processes that ended were forgotten to bound memory (the doctor keeps the last %d to end); "+
			"findings about them alone may be missing, and counts over many processes cover those kept\n", r.Forgotten, doctor.MaxEnded)
	}
	if len(r.Findings) == 0 {
		b.WriteString("\nNothing wrong found between these programs and the kernel.\n")
	}
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "\n%s  [%s]  %s\n", strings.ToUpper(f.Severity.String()), f.ID, f.Title)
		wrap(&b, f.Summary, "  ", 100)
		if len(f.Evidence) > 0 {
			b.WriteString("  evidence:\n")
			keys := make([]string, 0, len(f.Evidence))
			for k := range f.Evidence {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				value(&b, k, f.Evidence[k], "    ")
			}
		}
		b.WriteString("  fix:\n")
		wrap(&b, f.Fix, "    ", 100)
	}
	if explain || len(r.Findings) == 0 {
		near(&b, r.Near, explain)
	}
	// Findings quote what processes named themselves and what they
	// touched; none of it may reach the terminal as a control sequence.
	_, err := io.WriteString(w, output.EscapeLines(b.String()))
	return err
}

// nearShown is how close a miss must come to be shown unasked: a tenth of
// the rule's measure, so that a silent report names what nearly was a
// finding, not every process's busiest call.
const nearShown = 0.1

func near(b *strings.Builder, ns []doctor.Near, all bool) {
	head := false
	for _, n := range ns {
		if !all && n.Closeness < nearShown {
			continue
		}
		if !head {
			b.WriteString("\nClosest to a finding, not reported (the rule each fell short of):\n")
			head = true
		}
		way := fmt.Sprintf("%.0f%%", 100*n.Closeness)
		if n.Closeness > 0 && n.Closeness < 0.005 {
			way = "under 1%" // not 0%: it was looked at
		}
		fmt.Fprintf(b, "  %s (%s of the way): %s\n", n.ID, way, n.Subject)
		wrap(b, n.Short, "    ", 100)
	}
	if all && !head {
		b.WriteString("\nNo detector has a near miss to show.\n")
	}
}

func value(b *strings.Builder, k string, v any, indent string) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice:
		if rv.Len() == 0 {
			return
		}
		fmt.Fprintf(b, "%s%s:\n", indent, k)
		for i := range rv.Len() {
			fmt.Fprintf(b, "%s  %v\n", indent, rv.Index(i).Interface())
		}
	case reflect.Map:
		keys := rv.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		var parts []string
		for _, mk := range keys {
			parts = append(parts, fmt.Sprintf("%v=%v", mk, rv.MapIndex(mk)))
		}
		fmt.Fprintf(b, "%s%s: %s\n", indent, k, strings.Join(parts, ", "))
	case reflect.Pointer, reflect.Struct:
		j, _ := json.Marshal(v)
		fmt.Fprintf(b, "%s%s: %s\n", indent, k, j)
	default:
		fmt.Fprintf(b, "%s%s: %v\n", indent, k, v)
	}
}

func wrap(b *strings.Builder, text, indent string, width int) {
	line := indent
	for _, w := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += w
	}
	if len(line) > len(indent) {
		b.WriteString(line + "\n")
	}
}
