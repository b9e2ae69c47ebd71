package symbol

import (
	"slices"
	"strings"

	// Demangling C++ and Rust (legacy and v0) is a large, subtle grammar;
	// this package is maintained by a Go team member, is pure Go with no
	// dependencies, and is what the Go toolchain's own tools use.
	"github.com/ianlancetaylor/demangle"
)

// sym is one function. Tables hold hundreds of thousands of these, so it is
// kept to 32 bytes.
type sym struct {
	addr  uint64
	size  uint32 // 0: unknown, the function runs to the next symbol
	flags uint32
	name  string
}

// flagMangled marks names demangled on first use: most symbols of a C++
// library are never hit, and demangling all of them costs milliseconds.
const flagMangled = 1

// candidate is a symbol before deduplication; lower rank wins among symbols
// at the same address.
type candidate struct {
	sym
	rank int
}

// table is sorted by addr with one symbol per address.
type table []sym

// newTable sorts and deduplicates symbols. When several names share an
// address (glibc has write, __write, __libc_write), the best ranked wins.
func newTable(c []candidate) table {
	slices.SortFunc(c, func(a, b candidate) int {
		switch {
		case a.addr < b.addr:
			return -1
		case a.addr > b.addr:
			return 1
		case a.rank != b.rank:
			return a.rank - b.rank
		}
		return strings.Compare(a.name, b.name) // stable across runs
	})
	t := make(table, 0, len(c))
	for _, s := range c {
		if n := len(t); n > 0 && t[n-1].addr == s.addr {
			if t[n-1].size == 0 {
				t[n-1].size = s.size
			}
			continue
		}
		if mangled(s.name) {
			s.flags |= flagMangled
		}
		t = append(t, s.sym)
	}
	return t
}

// find returns the index of the symbol covering addr, or -1.
func (t table) find(addr uint64) int {
	lo, hi := 0, len(t)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t[m].addr <= addr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	i := lo - 1
	if i < 0 {
		return -1
	}
	if s := &t[i]; s.size != 0 && addr-s.addr >= uint64(s.size) {
		return -1
	}
	return i
}

// name returns the symbol's display name, demangling it the first time. The
// caller must hold the lock that guards the table.
func (t table) name(i int) string {
	s := &t[i]
	if s.flags&flagMangled != 0 {
		s.name = demangleName(s.name)
		s.flags &^= flagMangled
	}
	return s.name
}

// bytes estimates the memory the table holds.
func (t table) bytes() int64 {
	n := int64(cap(t)) * 32
	for i := range t {
		n += int64(len(t[i].name))
	}
	return n
}

func mangled(name string) bool {
	return strings.HasPrefix(name, "_Z") || strings.HasPrefix(name, "_R")
}

// demangleName returns the readable form of a C++ or Rust name, or the name
// itself when it does not demangle. Rust legacy hashes (::h0123...) are
// dropped by the demangler, so one function is one frame across builds.
func demangleName(name string) string {
	if !mangled(name) {
		return name
	}
	// Template-heavy C++ can demangle to many kilobytes; past 4 KiB a
	// flame graph label is useless, and the mangled form is shorter.
	return demangle.Filter(name, demangle.MaxLength(12))
}
