package filter

import (
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/sysray/sysray/internal/event"
)

// field says how to read one filter field from an event. Exactly one of text,
// num, flag and arg is set; an accessor reports false when the event has no such value (a
// page fault has no latency), and then every comparison on it is false.
type field struct {
	text   func(*event.Event, Env) (string, bool)
	num    func(*event.Event, Env) (uint64, bool)
	flag   func(*event.Event, Env) (bool, bool)
	signed bool                         // num holds an int64
	lit    func(string) (numLit, error) // reads num literals; nil means plain integers
	norm   func(string) string          // rewrites text literals before they are compared
	// set, when present, compiles =, != and in itself, so that names can be
	// checked and resolved once instead of compared as strings per event.
	set func(p pred, neg bool) (node, error)
	arg string // evt.arg.<arg>
}

const argPrefix = "evt.arg."

// fields is the one place a filter field is defined.
var fields = map[string]*field{
	"evt.type":          {text: evtType, set: typeSet},
	"evt.kind":          {text: func(e *event.Event, _ Env) (string, bool) { return e.Kind.String(), true }, set: kindSet},
	"evt.latency":       {num: latency, lit: durationLit},
	"evt.failed":        {flag: failed},
	"evt.res":           {num: res, signed: true, lit: errnoLit},
	"evt.cpu":           {num: func(e *event.Event, _ Env) (uint64, bool) { return uint64(e.CPU), true }},
	"evt.signal":        {num: signal, signed: true, lit: signalLit},
	"sig":               {num: signal, signed: true, lit: signalLit},
	"proc.name":         {text: func(e *event.Event, _ Env) (string, bool) { return e.Comm, true }},
	"proc.pid":          {num: func(e *event.Event, _ Env) (uint64, bool) { return uint64(e.PID), true }},
	"thread.tid":        {num: func(e *event.Event, _ Env) (uint64, bool) { return uint64(e.TID), true }},
	"proc.cmdline":      {text: cmdline},
	"fd.name":           {text: fdName},
	"container.id":      {text: containerID, norm: shortID},
	"container.name":    {text: ctr(func(c Container) string { return c.Name })},
	"container.image":   {text: ctr(func(c Container) string { return c.Image })},
	"container.runtime": {text: ctr(func(c Container) string { return c.Runtime })},
	"k8s.pod.name":      {text: ctr(func(c Container) string { return c.PodName })},
	"k8s.ns.name":       {text: ctr(func(c Container) string { return c.PodNamespace })},
	"fault.addr":        {num: faultAddr},
}

func (f *field) typeName() string {
	switch {
	case f.arg != "":
		return "a syscall argument"
	case f.num != nil:
		return "a number"
	case f.flag != nil:
		return "a bool"
	}
	return "text"
}

// fieldNames lists the valid fields for error messages.
func fieldNames() string {
	names := make([]string, 0, len(fields)+1)
	for n := range fields {
		names = append(names, n)
	}
	slices.Sort(names)
	names = append(names, argPrefix+"<name>")
	return strings.Join(names, ", ")
}

// argHolders maps each argument name in the syscall tables to one syscall
// that has it, which is all knownArg needs to ask ArgValue about an alias.
var argHolders = sync.OnceValue(func() map[string]argHolder {
	m := map[string]argHolder{}
	for _, a := range arches {
		// The cap only guards against a table reporting a nonsense maximum.
		for nr := uint32(0); nr <= min(event.MaxSyscall(a), 1<<16); nr++ {
			if spec := event.Lookup(a, nr); spec != nil {
				for _, arg := range spec.Args {
					if _, ok := m[arg.Name]; !ok {
						m[arg.Name] = argHolder{a, &event.Syscall{Nr: nr}}
					}
				}
			}
		}
	}
	return m
})

type argHolder struct {
	arch event.Arch
	call *event.Syscall
}

// knownArg reports whether ArgValue can find an argument called name in
// some syscall, so that a misspelt evt.arg.<name>, which would silently
// match nothing, is an error. Asking ArgValue itself keeps its aliases (dfd,
// filename) and positional names (arg0) valid.
func knownArg(name string) bool {
	holders := argHolders()
	if _, ok := holders[name]; ok {
		return true
	}
	for _, h := range holders {
		if _, _, ok := event.ArgValue(h.arch, h.call, name); ok {
			return true
		}
	}
	return false
}

func evtType(e *event.Event, env Env) (string, bool) {
	if e.Kind == event.KindSyscall {
		return event.SyscallName(env.Arch(), e.Syscall.Nr), true
	}
	return e.Kind.String(), true
}

func latency(e *event.Event, _ Env) (uint64, bool) {
	return e.Syscall.Latency, e.Kind == event.KindSyscall
}

// finished reports syscall events that have a return value: an unfinished
// call was cut off before it returned, so Ret means nothing.
func finished(e *event.Event) bool {
	return e.Kind == event.KindSyscall && !e.Syscall.Unfinished
}

func failed(e *event.Event, _ Env) (bool, bool) {
	return e.Syscall.Failed(), finished(e)
}

func res(e *event.Event, _ Env) (uint64, bool) {
	return uint64(e.Syscall.Ret), finished(e)
}

func signal(e *event.Event, _ Env) (uint64, bool) {
	ok := e.Kind == event.KindSignalGenerate || e.Kind == event.KindSignalDeliver
	return uint64(int64(e.Signal.Sig)), ok
}

func faultAddr(e *event.Event, _ Env) (uint64, bool) {
	return e.Fault.Addr, e.Kind == event.KindPageFault
}

func cmdline(e *event.Event, env Env) (string, bool) {
	s := env.Cmdline(e.PID)
	return s, s != ""
}

func containerID(e *event.Event, env Env) (string, bool) {
	return shortID(env.Container(e.PID, e.Cgroup).ID), true
}

// shortID gives the host a name users can type (container.id = host) and
// cuts hex ids to the 12 characters tools show, so a full id and its short
// form match alike.
func shortID(id string) string {
	if id == "" {
		return "host"
	}
	if len(id) > 12 && isHex(id) {
		return id[:12]
	}
	return id
}

func isHex(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ctr reads one attribute of the event's container; events on the host have none.
func ctr(get func(Container) string) func(*event.Event, Env) (string, bool) {
	return func(e *event.Event, env Env) (string, bool) {
		v := get(env.Container(e.PID, e.Cgroup))
		return v, v != ""
	}
}

// fdName is the first path or socket address the kernel copied for the
// call, which is what a user means by "the file" of open, connect or bind.
func fdName(e *event.Event, env Env) (string, bool) {
	switch e.Kind {
	case event.KindExec:
		return e.Proc.Filename, e.Proc.Filename != ""
	case event.KindSyscall:
	default:
		return "", false
	}
	spec := event.Lookup(env.Arch(), e.Syscall.Nr)
	if spec == nil {
		return "", false
	}
	for i, a := range spec.Args {
		if i >= len(e.Syscall.Data) {
			break
		}
		d := e.Syscall.Data[i]
		if d == nil {
			continue
		}
		switch a.Kind {
		case event.ArgPath:
			return bytesString(d), true
		case event.ArgSockaddr, event.ArgSockaddrOut:
			return event.FormatSockaddr(d), true
		}
	}
	return "", false
}

// bytesString avoids copying a path on every event: the string is only
// compared during Match and never outlives it, and Match does not run
// concurrently with whoever fills the event.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}
