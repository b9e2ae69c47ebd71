package doctor

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"strconv"
	"strings"
)

// callTime calls a C function time(NULL) at fn on a 16-byte aligned stack.
func callTime(fn uintptr) int64

// vdsoTime finds time() in this process's vDSO, the way glibc 2.14 and later
// reach it, so the doctor compares like with like.
func vdsoTime() (uintptr, bool) {
	auxv, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 0, false
	}
	var base uintptr
	for i := 0; i+16 <= len(auxv); i += 16 {
		if binary.NativeEndian.Uint64(auxv[i:]) == 33 { // AT_SYSINFO_EHDR
			base = uintptr(binary.NativeEndian.Uint64(auxv[i+8:]))
		}
	}
	size := vdsoSize()
	if base == 0 || size == 0 {
		return 0, false
	}
	// Read the image through /proc/self/mem: no unsafe pointer arithmetic.
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		return 0, false
	}
	defer mem.Close()
	img := make([]byte, size)
	if _, err := mem.ReadAt(img, int64(base)); err != nil {
		return 0, false
	}
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		return 0, false
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return 0, false
	}
	var load uint64
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			load = p.Vaddr
			break
		}
	}
	for _, s := range syms {
		if s.Name == "__vdso_time" || s.Name == "time" {
			return base + uintptr(s.Value-load), true
		}
	}
	return 0, false
}

func vdsoSize() int {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasSuffix(line, "[vdso]") {
			continue
		}
		lo, hi, _ := strings.Cut(strings.Fields(line)[0], "-")
		a, _ := strconv.ParseUint(lo, 16, 64)
		b, _ := strconv.ParseUint(hi, 16, 64)
		return int(b - a)
	}
	return 0
}
