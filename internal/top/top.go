// Package top is sysray's live view: containers, their processes, and
// their syscalls, refreshed every second from counts the kernel keeps.
package top

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/output"
	"github.com/sysray/sysray/internal/stat"
	"github.com/sysray/sysray/internal/units"
)

// Sample is one read of the kernel's counts.
type Sample struct {
	At     time.Time
	Cells  []stat.Cell
	Counts map[uint32]ProcCounts
}

// ProcCounts are a process's page faults and vsyscall emulations so far.
type ProcCounts struct{ Faults, Vsyscalls uint64 }

// Source reads the counts; Names describe keys.
type Source struct {
	Read      func() (Sample, error)
	Process   func(pid uint32) string                // "comm[pid]"
	Container func(pid uint32, cgroup uint64) string // "" for the host
	Arch      event.Arch
}

// Row is one line of the view: rates over the last interval.
type Row struct {
	Key       string
	Name      string
	Calls     float64 // syscalls/s
	TimePct   float64 // % of one CPU's time spent in syscalls
	P99       uint64  // ns, over the interval
	Errors    float64 // /s
	Vsyscalls float64 // /s
	Faults    float64 // /s
}

// Level of the drill-down.
const (
	Containers = iota
	Processes
	Syscalls
)

// View computes the rows of one level between two samples. within narrows
// processes to a container and syscalls to a process (its Key).
func View(src *Source, prev, cur Sample, level int, within string) []Row {
	secs := cur.At.Sub(prev.At).Seconds()
	if secs <= 0 {
		secs = 1
	}
	old := map[stat.Key]stat.Cell{}
	for _, c := range prev.Cells {
		old[c.Key] = c
	}
	type acc struct {
		Row
		hist  stat.Hist
		max   uint64
		total uint64
		pids  map[uint32]bool
	}
	rows := map[string]*acc{}
	for _, c := range cur.Cells {
		o := old[c.Key]
		if c.Count < o.Count {
			o = stat.Cell{} // the process went and its pid came back
		}
		dc := c.Count - o.Count
		if dc == 0 {
			continue
		}
		ctr := src.Container(c.PID, c.Cgroup)
		if ctr == "" {
			ctr = "host"
		}
		proc := fmt.Sprintf("%d", c.PID)
		var key, name string
		switch level {
		case Containers:
			key, name = ctr, ctr
		case Processes:
			if within != "" && ctr != within {
				continue
			}
			key, name = proc, src.Process(c.PID)
		default:
			if within != "" && proc != within {
				continue
			}
			key, name = fmt.Sprint(c.Nr), event.SyscallName(src.Arch, c.Nr)
		}
		r := rows[key]
		if r == nil {
			r = &acc{Row: Row{Key: key, Name: name}, pids: map[uint32]bool{}}
			rows[key] = r
		}
		r.Calls += float64(dc)
		r.Errors += float64(c.Errors - o.Errors)
		r.total += c.Total - o.Total
		for i := range c.Hist {
			r.hist[i] += c.Hist[i] - o.Hist[i]
		}
		r.max = max(r.max, c.Max)
		r.pids[c.PID] = true
	}
	out := make([]Row, 0, len(rows))
	for _, r := range rows {
		r.Calls /= secs
		r.Errors /= secs
		r.TimePct = 100 * float64(r.total) / 1e9 / secs
		r.P99 = r.hist.Quantile(0.99, r.max)
		if level != Syscalls {
			for pid := range r.pids {
				n, p := cur.Counts[pid], prev.Counts[pid]
				if n.Faults >= p.Faults {
					r.Faults += float64(n.Faults-p.Faults) / secs
					r.Vsyscalls += float64(n.Vsyscalls-p.Vsyscalls) / secs
				}
			}
		}
		out = append(out, r.Row)
	}
	return out
}

// Sorts of the view, cycled with 's'.
var sorts = []string{"time", "calls", "p99", "errors", "vsyscalls", "faults"}

// CheckSort says what is wrong with by as a --sort key.
func CheckSort(by string) error {
	if slices.Contains(sorts, by) {
		return nil
	}
	return fmt.Errorf("--sort %s: want %s", by, strings.Join(sorts, ", "))
}

func sortRows(rows []Row, by string) {
	key := func(r Row) float64 {
		switch by {
		case "calls":
			return r.Calls
		case "p99":
			return float64(r.P99)
		case "errors":
			return r.Errors
		case "vsyscalls":
			return r.Vsyscalls
		case "faults":
			return r.Faults
		}
		return r.TimePct
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if a, b := key(rows[i]), key(rows[j]); a != b {
			return a > b
		}
		return rows[i].Name < rows[j].Name
	})
}

// Render writes a table of rows, the header naming the level.
func Render(w io.Writer, level int, within string, rows []Row, sortBy string, cursor int, width int) {
	what := []string{"container", "process", "syscall"}[level]
	fmt.Fprintf(w, "sysray top — %s", []string{"containers", "processes", "syscalls"}[level])
	if within != "" {
		fmt.Fprintf(w, " in %s", output.Escape(within))
	}
	fmt.Fprintf(w, " — sorted by %s — enter: drill down, esc: up, s: sort, q: quit\n\n", sortBy)
	fmt.Fprintf(w, "  %-36s %12s %9s %10s %10s %11s %10s\n", strings.ToUpper(what), "SYSCALLS/s", "TIME%", "P99", "ERRORS/s", "VSYSCALL/s", "FAULTS/s")
	for i, r := range rows {
		mark := "  "
		if i == cursor {
			mark = "> "
		}
		name := output.Escape(r.Name)
		if len(name) > 36 {
			name = name[:33] + "..."
		}
		fmt.Fprintf(w, "%s%-36s %12.0f %8.1f%% %10s %10.0f %11.0f %10.0f\n", mark, name, r.Calls, r.TimePct, units.Duration(r.P99), r.Errors, r.Vsyscalls, r.Faults)
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "  (no syscalls in the last interval)")
	}
}

// model is the bubbletea program state.
type model struct {
	src        *Source
	prev, cur  Sample
	level      int
	within     [3]string // the key chosen at each level above
	withinName [3]string
	cursor     int
	sortIdx    int
	rows       []Row
	interval   time.Duration
	err        error
	width      int
}

type tick time.Time

func (m *model) Init() tea.Cmd { return m.wait() }

func (m *model) wait() tea.Cmd {
	return tea.Tick(m.interval, func(t time.Time) tea.Msg { return tick(t) })
}

func (m *model) refresh() {
	s, err := m.src.Read()
	if err != nil {
		m.err = err
		return
	}
	m.prev, m.cur = m.cur, s
	m.recompute()
}

func (m *model) recompute() {
	m.rows = View(m.src, m.prev, m.cur, m.level, m.within[m.level])
	sortRows(m.rows, sorts[m.sortIdx])
	if m.cursor >= len(m.rows) {
		m.cursor = max(0, len(m.rows)-1)
	}
}

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tick:
		m.refresh()
		return m, m.wait()
	case tea.WindowSizeMsg:
		m.width = msg.Width
	case tea.KeyMsg:
		switch msg.String() {
		case "q", "ctrl+c":
			return m, tea.Quit
		case "up", "k":
			if m.cursor > 0 {
				m.cursor--
			}
		case "down", "j":
			if m.cursor < len(m.rows)-1 {
				m.cursor++
			}
		case "enter", "right", "l":
			if m.level < Syscalls && m.cursor < len(m.rows) {
				r := m.rows[m.cursor]
				m.level++
				m.within[m.level], m.withinName[m.level] = r.Key, r.Name
				m.cursor = 0
				m.recompute()
			}
		case "esc", "backspace", "left", "h":
			if m.level > Containers {
				m.level--
				m.cursor = 0
				m.recompute()
			}
		case "s":
			m.sortIdx = (m.sortIdx + 1) % len(sorts)
			m.recompute()
		}
	}
	return m, nil
}

func (m *model) View() string {
	var b strings.Builder
	if m.err != nil {
		fmt.Fprintf(&b, "error: %v\n", m.err)
	}
	Render(&b, m.level, m.withinName[m.level], m.rows, sorts[m.sortIdx], m.cursor, m.width)
	return b.String()
}

// Run shows the live view until the user quits.
func Run(src *Source, interval time.Duration) error {
	first, err := src.Read()
	if err != nil {
		return err
	}
	m := &model{src: src, cur: first, prev: first, interval: interval}
	_, err = tea.NewProgram(m, tea.WithAltScreen()).Run()
	return err
}

// Once waits one interval and prints one snapshot of a level, for scripts.
func Once(w io.Writer, src *Source, interval time.Duration, level int, within, sortBy string) error {
	a, err := src.Read()
	if err != nil {
		return err
	}
	time.Sleep(interval)
	b, err := src.Read()
	if err != nil {
		return err
	}
	rows := View(src, a, b, level, within)
	sortRows(rows, sortBy)
	ew := &errWriter{w: w}
	Render(ew, level, within, rows, sortBy, -1, 0)
	return ew.err
}

// errWriter keeps the first error of a series of writes, which Render,
// also drawing the live view into memory, does not check one by one.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}
