package symbol

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ErrRestricted means /proc/kallsyms listed every address as zero: the kernel
// hides them from this reader (kernel.kptr_restrict, or no CAP_SYSLOG).
var ErrRestricted = errors.New("kernel addresses are hidden (kernel.kptr_restrict): run as root with CAP_SYSLOG, or set sysctl kernel.kptr_restrict=0")

// KallsymsPath is the file LoadKernel reads; tests may point it elsewhere.
var KallsymsPath = "/proc/kallsyms"

// KernelFile is Frame.File for the core kernel image, as perf names it.
// Modules are "[name]", and BPF programs "[bpf]".
const KernelFile = "[kernel.kallsyms]"

// Kernel resolves kernel text addresses. It is immutable once built, so one
// Kernel serves any number of goroutines without locking.
type Kernel struct {
	addrs []uint64 // sorted; searched apart from syms to halve cache misses
	syms  []ksym   // syms[i] starts at addrs[i]; name "" ends a text region
}

type ksym struct {
	addr uint64
	name string
	file string // KernelFile or "[module]", shared between symbols
	rank int    // among aliases at one address, lowest wins
}

// kernelRank orders aliases as perf does: global before local, then fewer
// leading underscores. x86's 32-bit syscall entry points alias the 64-bit
// ones (__ia32_sys_getppid = __x64_sys_getppid) and come last, since naming
// a 64-bit program's syscall after the compat entry misleads.
func kernelRank(typ byte, name string) int {
	r := min(len(name)-len(strings.TrimLeft(name, "_")), 9)
	if typ == 't' || typ == 'w' {
		r += 10
	}
	if strings.HasPrefix(name, "__ia32_") {
		r += 100
	}
	return r
}

var kernel struct {
	sync.Mutex
	k *Kernel
}

// LoadKernel reads /proc/kallsyms the first time it is called and returns the
// same table afterwards: the file has over 100,000 lines, and a report needs
// it once. Modules and BPF programs loaded later are not in it (their
// addresses resolve to the nearest earlier symbol): call ReloadKernel after
// loading BPF programs whose frames should be named. Errors are not kept, so
// a caller may retry after fixing kptr_restrict.
func LoadKernel() (*Kernel, error) {
	kernel.Lock()
	defer kernel.Unlock()
	if kernel.k != nil {
		return kernel.k, nil
	}
	return loadKernel()
}

// ReloadKernel reads /proc/kallsyms again, and makes LoadKernel return the
// new table. Kernels returned before stay valid.
func ReloadKernel() (*Kernel, error) {
	kernel.Lock()
	defer kernel.Unlock()
	return loadKernel()
}

func loadKernel() (*Kernel, error) {
	f, err := os.Open(KallsymsPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	k, err := ParseKallsyms(f)
	if errors.Is(err, ErrRestricted) {
		if b, e := os.ReadFile("/proc/sys/kernel/kptr_restrict"); e == nil {
			err = fmt.Errorf("%w (kptr_restrict=%s, euid=%d)", err, strings.TrimSpace(string(b)), os.Geteuid())
		}
	}
	if err != nil {
		return nil, err
	}
	kernel.k = k
	return k, nil
}

// ParseKallsyms reads the text symbols of a file in /proc/kallsyms format.
func ParseKallsyms(r io.Reader) (*Kernel, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	// Names are substrings of one string: 120,000 small allocations would
	// cost more time and about as much memory.
	text := string(data)
	var (
		syms    = make([]ksym, 0, strings.Count(text, "\n")+1)
		mods    = map[string]string{}
		nonzero bool
		lines   int
	)
	for len(text) > 0 {
		var line string
		line, text, _ = strings.Cut(text, "\n")
		lines++
		// "ffffffff81000000 T _stext" or "... t name\t[module]"
		sp := strings.IndexByte(line, ' ')
		if sp < 0 || len(line) < sp+4 || line[sp+2] != ' ' {
			continue
		}
		addr, err := strconv.ParseUint(line[:sp], 16, 64)
		if err != nil {
			continue
		}
		if addr != 0 {
			nonzero = true
		}
		typ := line[sp+1]
		rest := line[sp+3:]
		file := KernelFile
		if tab := strings.IndexByte(rest, '\t'); tab >= 0 {
			mod := strings.TrimSpace(rest[tab+1:])
			rest = rest[:tab]
			if m, ok := mods[mod]; ok {
				file = m
			} else if mod != "" {
				if !strings.HasPrefix(mod, "[") {
					mod = "[" + mod + "]"
				}
				mods[mod] = mod
				file = mod
			}
		}
		switch typ {
		case 't', 'T', 'w', 'W': // weak text shows as W; weak data would be V
		default:
			continue
		}
		name := rest
		// Past these the core image has no functions (data, or freed init
		// text), so an address there must not become _etext+0x123456.
		if file == KernelFile && (name == "_etext" || name == "_einittext") {
			name = ""
		} else if mangled(name) {
			name = demangleName(name) // Rust in the kernel uses v0 mangling
		}
		syms = append(syms, ksym{addr: addr, name: name, file: file, rank: kernelRank(typ, name)})
	}
	if lines > 0 && !nonzero {
		return nil, ErrRestricted
	}
	if len(syms) == 0 {
		return nil, errors.New("no kernel text symbols found")
	}
	slices.SortStableFunc(syms, func(a, b ksym) int {
		switch {
		case a.addr < b.addr:
			return -1
		case a.addr > b.addr:
			return 1
		}
		// An end marker loses to a function that starts at the same address.
		switch {
		case a.name == "" && b.name != "":
			return 1
		case a.name != "" && b.name == "":
			return -1
		}
		return a.rank - b.rank
	})
	// Aliases at one address: keep the best ranked, and on a tie the first
	// listed (kallsyms prints link order), so the choice is stable.
	k := &Kernel{}
	for _, s := range syms {
		if n := len(k.addrs); n > 0 && k.addrs[n-1] == s.addr {
			continue
		}
		k.addrs = append(k.addrs, s.addr)
		k.syms = append(k.syms, s)
	}
	return k, nil
}

// Resolve names a kernel address. Addresses outside known text come back with
// Func "" and File Unknown.
func (k *Kernel) Resolve(addr uint64) Frame {
	f := Frame{Addr: addr, Kernel: true, File: Unknown}
	// Last symbol at or below addr.
	lo, hi := 0, len(k.addrs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if k.addrs[m] <= addr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return f
	}
	s := &k.syms[lo-1]
	if s.name == "" {
		return f
	}
	f.Func, f.Offset, f.File = s.name, addr-s.addr, s.file
	return f
}

// Len is the number of text symbols known.
func (k *Kernel) Len() int { return len(k.syms) }
