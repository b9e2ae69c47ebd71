package filter

import (
	"maps"
	"math"
	"slices"

	"github.com/sysray/sysray/internal/event"
)

// Hints returns what the kernel can filter on without changing the result,
// for syscall events only: other kinds must still be delivered.
//
// syscalls is nil when any syscall may pass; otherwise every syscall event
// the filter accepts has its number in syscalls (sorted, and empty but not
// nil when no syscall event can pass). minLatency is a bound every accepted
// syscall event meets (0 when there is none). Both are conservative: they
// may let through events Match rejects, never the other way round.
func (f *Filter) Hints(arch event.Arch) (syscalls []uint32, minLatency uint64) {
	if f == nil {
		return nil, 0
	}
	h := hintsOf(f.root, false, arch)
	if h.all {
		return nil, h.lat
	}
	nrs := slices.AppendSeq(make([]uint32, 0, len(h.set)), maps.Keys(h.set))
	slices.Sort(nrs)
	return nrs, h.lat
}

// hint bounds the syscall events a node (or its negation) can accept.
type hint struct {
	all bool // any syscall number; otherwise only those in set
	set map[uint32]bool
	lat uint64
}

var anything = hint{all: true}

func (h hint) none() bool { return !h.all && len(h.set) == 0 }

// both is the bound for events that pass a and b.
func both(a, b hint) hint {
	h := hint{all: a.all && b.all, lat: max(a.lat, b.lat)}
	switch {
	case h.all:
	case a.all:
		h.set = b.set
	case b.all:
		h.set = a.set
	default:
		h.set = map[uint32]bool{}
		for nr := range a.set {
			if b.set[nr] {
				h.set[nr] = true
			}
		}
	}
	return h
}

// either is the bound for events that pass a or b.
func either(a, b hint) hint {
	// A side that passes no syscall adds none, so its latency bound, which
	// constrains nothing, must not weaken the other side's.
	switch {
	case a.none():
		return b
	case b.none():
		return a
	}
	h := hint{all: a.all || b.all, lat: min(a.lat, b.lat)}
	if !h.all {
		h.set = maps.Clone(a.set)
		maps.Copy(h.set, b.set)
	}
	return h
}

// hintsOf walks the tree with negations pushed down (De Morgan), which is
// sound only for fields every syscall event has: evt.type, evt.kind and
// evt.latency. Anything else is "anything".
func hintsOf(n node, neg bool, arch event.Arch) hint {
	switch n := n.(type) {
	case *notNode:
		return hintsOf(n.kid, !neg, arch)
	case *andNode, *orNode:
		kids, and := childrenOf(n)
		if neg {
			and = !and
		}
		h := hintsOf(kids[0], neg, arch)
		for _, k := range kids[1:] {
			if and {
				h = both(h, hintsOf(k, neg, arch))
			} else {
				h = either(h, hintsOf(k, neg, arch))
			}
		}
		return h
	case *kindNode:
		if n.kinds.has(event.KindSyscall) != n.neg != neg {
			return anything
		}
		return hint{set: map[uint32]bool{}}
	case *typeNode:
		// On an arch without a table Match compares names, which SyscallByName
		// cannot turn into numbers.
		if n.neg != neg || !slices.Contains(arches[:], arch) {
			return anything
		}
		h := hint{set: map[uint32]bool{}}
		for _, name := range n.names {
			if nr, ok := event.SyscallByName(arch, name); ok {
				h.set[nr] = true
			}
		}
		return h
	case *numNode:
		if n.field == "evt.latency" {
			return hint{all: true, lat: latencyBound(n, neg)}
		}
	}
	return anything
}

func childrenOf(n node) (kids []node, and bool) {
	if a, ok := n.(*andNode); ok {
		return a.kids, true
	}
	return n.(*orNode).kids, false
}

// latencyBound is the least latency a syscall can have and pass n, or, when
// neg, fail it.
func latencyBound(n *numNode, neg bool) uint64 {
	o := n.op
	if neg {
		// Every syscall has a latency, so failing "< X" is passing ">= X".
		switch o {
		case opLt:
			o = opGe
		case opLe:
			o = opGt
		default:
			return 0
		}
	}
	least := uint64(math.MaxUint64)
	for _, l := range n.lits {
		v := l.u
		switch {
		case l.neg:
			v = 0
		case o == opGt && v < math.MaxUint64:
			v++
		case o != opEq && o != opIn && o != opGe && o != opGt:
			v = 0
		}
		least = min(least, v)
	}
	return least
}
