package symbol

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"runtime/debug"
	"strings"
	"testing"
)

// FuzzKallsyms: any /proc/kallsyms text parses or fails, and a parsed
// table names an address only by a symbol at or below it.
func FuzzKallsyms(f *testing.F) {
	for _, name := range []string{"testdata/kallsyms", "testdata/kallsyms-restricted"} {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b, uint64(0xffffffff81000104))
		}
	}
	f.Add([]byte("ffffffff81000000 T _stext\nffffffff81000100 t f\t[mod]\n"), uint64(0xffffffff81000101))
	f.Add([]byte("zz T x\n0 A\n\n"), uint64(0))
	f.Fuzz(func(t *testing.T, text []byte, addr uint64) {
		k, err := ParseKallsyms(bytes.NewReader(text))
		if err != nil {
			return
		}
		for _, a := range []uint64{addr, 0, ^uint64(0)} {
			fr := k.Resolve(a)
			if fr.Func != "" && fr.Offset > a {
				t.Fatalf("%#x resolved to %s+%#x, a symbol above it", a, fr.Func, fr.Offset)
			}
		}
	})
}

// FuzzMaps: any /proc/PID/maps text gives mappings whose range is sound.
func FuzzMaps(f *testing.F) {
	f.Add([]byte("55d5c6a4a000-55d5c6a4c000 r-xp 00002000 fd:01 1835059   /usr/bin/cat\n" +
		"7ffd5b1f2000-7ffd5b1f4000 r-xp 00000000 00:00 0                          [vdso]\n" +
		"7f00a0000000-7f00a0001000 r-xp 00000000 fd:01 42   /tmp/a b (deleted)\n" +
		"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n"))
	f.Add([]byte("1-0 r-xp 0 0 0\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		maps, _ := parseMaps(bytes.NewReader(text))
		for _, m := range maps {
			if m.end < m.start {
				t.Fatalf("mapping %#x-%#x ends before it starts", m.start, m.end)
			}
			_ = m.isFile()
		}
	})
}

// FuzzPerfMap: any perf map gives a table whose lookups land inside the
// symbol they name.
func FuzzPerfMap(f *testing.F) {
	f.Add([]byte("7f0001000 40 LazyCompile:~main /app.js:1\n0x7f0002000 0x10 jitted\n"), uint64(0x7f0001010))
	f.Add([]byte("zz 1 x\n1 zz x\n1 1\n"), uint64(1))
	f.Fuzz(func(t *testing.T, text []byte, addr uint64) {
		tab, err := parsePerfMap(bytes.NewReader(text))
		if err != nil {
			return
		}
		if i := tab.find(addr); i >= 0 {
			s := &tab[i]
			if s.addr > addr || s.size != 0 && addr-s.addr >= uint64(s.size) {
				t.Fatalf("%#x found in %s at %#x size %d", addr, s.name, s.addr, s.size)
			}
			_ = tab.name(i)
		}
	})
}

// FuzzELF: any file a process maps is read as it is live. Resolver.load
// guards the read, as debug/elf and debug/gosym do not promise to survive
// malformed input; a panic in sysray's own code, which the guard would
// hide, fails. A table read finds addresses inside the symbols it names.
func FuzzELF(f *testing.F) {
	// A small real executable: the fuzzer mutates every byte of a seed,
	// so a large one (libc, 2 MB) leaves it no time for anything else.
	if b, err := os.ReadFile("/bin/true"); err == nil && len(b) < 256<<10 {
		f.Add(b)
	}
	// A minimal header alone, and one cut short.
	var hdr bytes.Buffer
	binary.Write(&hdr, binary.LittleEndian, elf.Header64{Ident: [16]byte{0x7f, 'E', 'L', 'F', 2, 1, 1},
		Type: uint16(elf.ET_DYN), Machine: uint16(elf.EM_X86_64), Version: 1, Ehsize: 64, Phentsize: 56, Shentsize: 64})
	f.Add(hdr.Bytes())
	f.Add(hdr.Bytes()[:20])
	f.Fuzz(func(t *testing.T, data []byte) {
		img := readFuzzed(t, data)
		if img == nil {
			return
		}
		for i := range img.syms {
			s := &img.syms[i]
			if j := img.syms.find(s.addr); j < 0 || img.syms[j].addr != s.addr {
				t.Fatalf("symbol %d at %#x not found at its own address", i, s.addr)
			}
			_ = img.syms.name(i)
		}
	})
}

// readFuzzed reads data as an ELF file; a panic is the test's failure
// unless it began in the standard library's readers.
func readFuzzed(t *testing.T, data []byte) (img *image) {
	defer func() {
		if p := recover(); p != nil {
			if !panickedIn(string(debug.Stack()), "debug/", "compress/", "encoding/binary.", "github.com/ulikunitz/xz") {
				t.Fatalf("panic: %v\n%s", p, debug.Stack())
			}
			img = nil
		}
	}()
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil
	}
	_, _, _ = debuglink(ef)
	_ = buildID(ef)
	img, err = readImage(ef, "fuzz", debugSearch{})
	if err != nil {
		return nil
	}
	return img
}

// panickedIn says the function that panicked, in stack (debug.Stack's
// text), is in one of the packages named by prefixes.
func panickedIn(stack string, prefixes ...string) bool {
	lines := strings.Split(stack, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "panic(") {
			continue
		}
		// The panic's caller follows its "panic(...)" and file lines;
		// runtime frames (a bounds check's panicIndex) come first.
		for _, next := range lines[i+2:] {
			if strings.HasPrefix(next, "\t") || strings.HasPrefix(next, "runtime.") {
				continue
			}
			for _, p := range prefixes {
				if strings.HasPrefix(next, p) {
					return true
				}
			}
			return false
		}
	}
	return false
}
