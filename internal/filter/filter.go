package filter

import (
	"strings"

	"github.com/sysray/sysray/internal/event"
)

// Env gives the filter what an event alone does not carry.
type Env interface {
	Arch() event.Arch
	Cmdline(pid uint32) string        // "" if unknown
	ContainerID(cgroup uint64) string // "" for the host/unknown
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

func (hostEnv) Arch() event.Arch          { return event.HostArch() }
func (hostEnv) Cmdline(uint32) string     { return "" }
func (hostEnv) ContainerID(uint64) string { return "" }

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
