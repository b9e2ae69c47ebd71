package filter

import (
	"strings"

	"github.com/sysray/sysray/internal/event"
)

// Env gives the filter what an event alone does not carry.
type Env interface {
	Arch() event.Arch
	Cmdline(pid uint32) string // "" if unknown
	// Container describes the container a thread runs in; the zero value
	// for the host or unknown.
	Container(pid uint32, cgroup uint64) Container
}

// Container is what filters can ask of an event's container.
type Container struct {
	ID           string // full id (a 12-character prefix matches too)
	Name         string
	Image        string
	Runtime      string
	PodName      string
	PodNamespace string
}

// Filter is a compiled expression. It is immutable, so one Filter may be
// used by many goroutines at once. A nil *Filter matches every event, which
// spares callers a special case for "no filter".
type Filter struct {
	root node
}

// hostEnv stands in for a nil Env: a trace of the local machine with no
// process or container knowledge.
type hostEnv struct{}

func (hostEnv) Arch() event.Arch                   { return event.HostArch() }
func (hostEnv) Cmdline(uint32) string              { return "" }
func (hostEnv) Container(uint32, uint64) Container { return Container{} }

// Match reports whether e passes the filter. env may be nil.
func (f *Filter) Match(e *event.Event, env Env) bool {
	if f == nil {
		return true
	}
	if env == nil {
		env = hostEnv{}
	}
	return f.root.match(e, env)
}

// String is the expression in canonical form: Parse(f.String()) gives a
// filter that matches the same events and prints the same.
func (f *Filter) String() string {
	if f == nil {
		return ""
	}
	var b strings.Builder
	f.root.format(&b)
	return b.String()
}
