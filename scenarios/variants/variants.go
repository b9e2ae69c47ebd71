package variants

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

// Mode is how sysray is pointed at a variant's workload.
type Mode string

const (
	// Cmd runs `sysray doctor -- CMD`.
	Cmd Mode = "cmd"
	// PID starts the workload first, then runs `sysray doctor -p PID
	// --children --duration D`: the trouble began before sysray did.
	PID Mode = "pid"
	// Host starts the workload first, then runs `sysray doctor --duration D`
	// over the whole host.
	Host Mode = "host"
	// InContainer starts the workload first, in a container, then runs
	// `sysray doctor --container NAME --duration D`.
	InContainer Mode = "container"
)

// Container is a variant's workload run in a real container (containerd
// and runc, through tests/containers/setup.sh): a mount, pid, network and
// IPC namespace of its own, a busybox root, and the scenarios' binaries
// bind-mounted read-only at BinDir ({tmp} is mounted read-write at TmpDir).
// The finding must name the container. Its workload runs for tens of
// seconds: it must outlast the container's start and sysray's (seconds
// each on a loaded host), and the container is removed, workload and all,
// once the trace ends.
type Container struct {
	// ReadOnly makes the container's root filesystem read-only.
	ReadOnly bool
	// Privileged gives the container every capability and no seccomp
	// filter (its namespaces stay its own): for workloads that set their
	// namespace's sysctls or make namespaces of their own.
	Privileged bool
	// Sysctls the workload sets for the whole host (paths under
	// /proc/sys, e.g. "vm/nr_hugepages": a privileged container's are
	// the host's when they are not namespaced). The runner reads them
	// before the container starts and writes them back once it is gone:
	// the container ends with SIGKILL, which its workload cannot catch
	// to put them back itself.
	Sysctls []string
}

// Where a container variant's workload finds the scenarios' binaries and
// its scratch directory.
const (
	BinDir = "/scenarios"
	TmpDir = "/work"
)

// ContainerName is the name a variant's container runs under (its
// containerd id and its Kubernetes container name label).
func (v Variant) ContainerName() string {
	return "sysray-variant-" + strings.NewReplacer("/", "-", ".", "-").Replace(v.Name)
}

// Expect is the finding a variant must produce.
type Expect struct {
	// IDs lists acceptable finding ids ("kernel-contention|kernel-hotspot"
	// where the data decides between two names of one mechanism).
	IDs []doctor.ID
	// Severity is the lowest acceptable severity.
	Severity doctor.Severity
	// Words must all appear in the finding's title or summary.
	Words []string
	// Silent: a benign cousin of the mechanism, on which none of IDs
	// may be reported, at any severity.
	Silent bool
	// Below: a benign cousin on which IDs may be reported only under
	// this severity (an info that says where time went, not a warning).
	Below doctor.Severity
}

// Variant is one reproduction and what the doctor must say about it.
type Variant struct {
	Name    string // detector/what-differs
	Differs string // what differs from the bundled demo, for people
	Mode    Mode
	Argv    []string // argv[0] is relative to the scenarios' bin directory
	// PID and Host: how long the workload runs before sysray starts, and
	// how long sysray traces once attached. A workload there runs longer
	// than both (-d 30) and is stopped with SIGTERM when the trace ends:
	// on a loaded host attaching alone took 3-7 s, and a workload of a
	// few seconds had ended before the trace began. The doctor takes
	// 0.5-1 s to load and attach on an idle 2-CPU VM and up to 6 s on a
	// loaded one: trouble that comes at a set time c after the workload's
	// start is seen for any attach a in that range only when
	// Lead + 6 s < c < Lead + 0.5 s + For. A workload whose trouble lasts
	// (a reader, a retry loop) needs only to outlast the trace.
	Lead   time.Duration
	For    time.Duration
	Expect Expect
	// Without names capabilities sysray gives up before it starts
	// (PID and Host modes, once the workload runs with them all): a
	// user's sysray may have fewer than the root that set the trouble up.
	Without []string
	// Neighbour, when set, runs beside the workload from before sysray
	// starts until it stops, untraced: another tenant of the host (argv[0]
	// relative to the bin directory, as Argv's).
	Neighbour []string
	// Container, when set, runs the workload in a container (Mode PID,
	// Host or InContainer).
	Container *Container
}

// Detector is the detector a variant is about: its name up to the slash.
func (v Variant) Detector() string { d, _, _ := strings.Cut(v.Name, "/"); return d }

// Main reports whether v is its detector's main variant: the first listed,
// the shape nearest the bundled demo. `make test` runs the main variants
// and the long tier the rest (tests/variants_test.go): every detector is
// proven live in minutes, and every shape of it before a change lands.
func (v Variant) Main() bool {
	for _, w := range All {
		if w.Detector() == v.Detector() {
			return w.Name == v.Name
		}
	}
	return false
}

// Match returns the variants whose name matches pattern (a path.Match
// glob, or "all").
func Match(pattern string) ([]Variant, error) {
	var out []Variant
	for _, v := range All {
		ok := pattern == "all" || pattern == v.Name || pattern == v.Detector()
		if !ok {
			m, err := path.Match(pattern, v.Name)
			if err != nil {
				return nil, fmt.Errorf("variant pattern %q: %w", pattern, err)
			}
			ok = m
		}
		if ok {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no variant matches %q", pattern)
	}
	return out, nil
}

// Check returns the finding that meets the expectation, or an error that
// lists what the report said instead.
func (v Variant) Check(r *doctor.Report) (*doctor.Finding, error) {
	if v.Expect.Silent {
		for i := range r.Findings {
			if f := &r.Findings[i]; slices.Contains(v.Expect.IDs, f.ID) {
				return nil, fmt.Errorf("%s: want no %s; got %s %s: %s", v.Name, joinIDs(v.Expect.IDs), f.Severity, f.ID, f.Title)
			}
		}
		return nil, nil
	}
	if v.Expect.Below != 0 {
		for i := range r.Findings {
			if f := &r.Findings[i]; slices.Contains(v.Expect.IDs, f.ID) && f.Severity >= v.Expect.Below {
				return nil, fmt.Errorf("%s: want no %s at %s or above; got %s %s: %s", v.Name, joinIDs(v.Expect.IDs), v.Expect.Below, f.Severity, f.ID, f.Title)
			}
		}
		return nil, nil
	}
	for i := range r.Findings {
		f := &r.Findings[i]
		if !slices.Contains(v.Expect.IDs, f.ID) || f.Severity < v.Expect.Severity {
			continue
		}
		text := strings.ToLower(f.Title + " " + f.Summary)
		missing := ""
		for _, w := range v.Expect.Words {
			if !strings.Contains(text, strings.ToLower(w)) {
				missing = w
				break
			}
		}
		if missing == "" && v.Container != nil && !namesContainer(f, v.ContainerName()) {
			missing = "container " + v.ContainerName() + " (in its containers " + strings.Join(f.Containers, ", ") + ")"
		}
		if missing == "" {
			// Its numbers must be exact or say they are bounds.
			if bad := doctor.NumbersNotInEvidence(f); len(bad) > 0 {
				return f, fmt.Errorf("%s: numbers that are neither evidence nor bounds:\n  %s", v.Name, strings.Join(bad, "\n  "))
			}
			return f, nil
		}
	}
	var got []string
	for _, f := range r.Findings {
		got = append(got, fmt.Sprintf("%s %s: %s", f.Severity, f.ID, f.Title))
	}
	if len(got) == 0 {
		got = append(got, "no findings")
	}
	// What the expected detector saw nearest, when it was silent: the
	// numbers a miss is diagnosed from.
	for _, n := range r.Near {
		if slices.Contains(v.Expect.IDs, n.ID) {
			got = append(got, fmt.Sprintf("nearest %s (%.0f%% of the way): %s: %s", n.ID, 100*n.Closeness, n.Subject, n.Short))
		}
	}
	return nil, fmt.Errorf("%s: want %s at least %s with %q; got:\n  %s", v.Name,
		joinIDs(v.Expect.IDs), v.Expect.Severity, v.Expect.Words, strings.Join(got, "\n  "))
}

// namesContainer reports whether f names the container (as
// session.Describe does: the name, then what else is known in brackets).
func namesContainer(f *doctor.Finding, name string) bool {
	for _, c := range f.Containers {
		if c == name || strings.HasPrefix(c, name+" ") {
			return true
		}
	}
	return false
}

// Want describes the expectation in a line, for docs and output.
func (e Expect) String() string {
	if e.Silent {
		return "no " + joinIDs(e.IDs)
	}
	if e.Below != 0 {
		return "no " + joinIDs(e.IDs) + " ≥ " + e.Below.String()
	}
	s := joinIDs(e.IDs) + " ≥ " + e.Severity.String()
	if len(e.Words) > 0 {
		s += fmt.Sprintf(" %q", e.Words)
	}
	return s
}

func joinIDs(ids []doctor.ID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = string(id)
	}
	return strings.Join(s, "|")
}
