package event

import (
	"strconv"
	"strings"
	"sync"
)

// syscallTable returns the name table of a; nil for an unknown arch.
func syscallTable(a Arch) []string {
	switch a {
	case ArchAMD64:
		return syscallsAMD64[:]
	case ArchARM64:
		return syscallsARM64[:]
	}
	return nil
}

// syscallIndex is the reverse of the name tables, built on first use so that
// programs that never look up by name do not pay for it.
var syscallIndex = sync.OnceValue(func() map[Arch]map[string]uint32 {
	idx := make(map[Arch]map[string]uint32, 2)
	for _, a := range []Arch{ArchAMD64, ArchARM64} {
		m := make(map[string]uint32)
		for nr, name := range syscallTable(a) {
			if name != "" {
				m[name] = uint32(nr)
			}
		}
		idx[a] = m
	}
	return idx
})

// syscallName is SyscallName without the fallback, for callers that must
// tell a known syscall from an unknown one.
func syscallName(a Arch, nr uint32) string {
	t := syscallTable(a)
	if uint64(nr) < uint64(len(t)) {
		return t[nr]
	}
	return ""
}

// SyscallName returns the kernel's name for syscall nr on a, or
// "syscall_<nr>" when the number is not in the table, so that every call still
// gets a stable name that SyscallByName can parse back.
func SyscallName(a Arch, nr uint32) string {
	if n := syscallName(a, nr); n != "" {
		return n
	}
	return "syscall_" + strconv.FormatUint(uint64(nr), 10)
}

// SyscallByName returns the number of the named syscall on a. It also accepts
// the "syscall_<nr>" form that SyscallName produces for unknown numbers.
func SyscallByName(a Arch, name string) (uint32, bool) {
	if nr, ok := syscallIndex()[a][name]; ok {
		return nr, true
	}
	if rest, ok := strings.CutPrefix(name, "syscall_"); ok {
		if nr, err := strconv.ParseUint(rest, 10, 32); err == nil && syscallTable(a) != nil {
			return uint32(nr), true
		}
	}
	return 0, false
}

// MaxSyscall returns the highest syscall number with a name on a.
func MaxSyscall(a Arch) uint32 {
	t := syscallTable(a)
	for nr := len(t) - 1; nr >= 0; nr-- {
		if t[nr] != "" {
			return uint32(nr)
		}
	}
	return 0
}

// SyscallNames is a's syscall table, numbered as the kernel numbers them:
// a capture's header carries it so that a reader elsewhere names the
// calls as the writer did.
func SyscallNames(a Arch) []string {
	names := make([]string, MaxSyscall(a)+1)
	for i := range names {
		names[i] = SyscallName(a, uint32(i))
	}
	return names
}
