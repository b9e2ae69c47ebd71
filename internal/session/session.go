package session

import (
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/filter"
	"github.com/sysray/sysray/internal/proc"
)

// Session keeps the tables an event stream updates and filters it. It is
// also the filter.Env its filter and printers read the tables through.
type Session struct {
	arch   event.Arch
	Procs  *proc.Table // nil: processes are not followed
	Ctrs   Containers  // nil: every thread is on the host
	Filter *filter.Filter
}

// New returns a session over the given tables; any may be nil.
func New(arch event.Arch, procs *proc.Table, ctrs Containers, flt *filter.Filter) *Session {
	return &Session{arch: arch, Procs: procs, Ctrs: ctrs, Filter: flt}
}

// Pass updates the tables with e, then says whether the filter keeps it.
// The tables see every event, kept or not: a filtered-out exec still names
// the process and its container for the events that follow.
func (s *Session) Pass(e *event.Event) bool {
	if s.Procs != nil {
		s.Procs.Update(e)
	}
	if o, ok := s.Ctrs.(Observer); ok {
		o.Observe(e)
	}
	// Lost events are always told of: a filter that hid the notice would
	// make an incomplete result look complete.
	return s.Filter == nil || e.Kind == event.KindDrop || s.Filter.Match(e, s)
}

func (s *Session) Arch() event.Arch { return s.arch }

func (s *Session) Cmdline(pid uint32) string {
	if s.Procs == nil {
		return ""
	}
	return s.Procs.Cmdline(pid)
}

func (s *Session) Container(pid uint32, cg uint64) filter.Container {
	if s.Ctrs == nil {
		return filter.Container{}
	}
	return s.Ctrs.Container(pid, cg)
}
