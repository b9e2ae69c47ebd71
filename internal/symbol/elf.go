package symbol

import (
	"bytes"
	"debug/elf"
	"debug/gosym"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	// MiniDebugInfo (.gnu_debugdata) is an xz stream, and the standard
	// library has no xz decoder. This is the pure-Go implementation most Go
	// projects use (actively maintained, no dependencies, fuzzed); without
	// it, stripped Fedora/RHEL binaries resolve only their exported symbols.
	"github.com/ulikunitz/xz"
)

// segment is a PT_LOAD program header: file bytes [off, off+filesz) are
// mapped at link-time address vaddr.
type segment struct{ off, filesz, vaddr uint64 }

// image is the symbol table of one ELF file, shared by every process that
// maps that file or another file with the same build-id.
type image struct {
	id      string // GNU build-id, hex; "" if none
	segs    []segment
	syms    table
	source  string // where the symbols came from, for tests and debugging
	bytes   int64
	lastUse uint64
	live    bool // false once evicted: holders must load again
}

// vaddr turns an offset in the file into the link-time address that symbols
// use. Going through the program headers, rather than assuming
// vaddr == offset, is what makes PIE, shared libraries and non-PIE
// executables (and lld's unaligned segments) all work the same way.
func (img *image) vaddr(off uint64) (uint64, bool) {
	for _, s := range img.segs {
		if off >= s.off && off-s.off < s.filesz {
			return off - s.off + s.vaddr, true
		}
	}
	return 0, false
}

// debugSearch says where separate debug files may be.
type debugSearch struct {
	dir  string // usually /usr/lib/debug; "" disables the search
	root string // /proc/PID/root of a process that mapped the file, or ""
	path string // the file's path as that process sees it
	key  fileKey
}

const maxDebugData = 512 << 20 // a decompressed .gnu_debugdata bigger than this is not MiniDebugInfo

// readImage reads the segments and symbols of an ELF file.
func readImage(ef *elf.File, id string, ds debugSearch) (*image, error) {
	img := &image{id: id, live: true}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			img.segs = append(img.segs, segment{p.Off, p.Filesz, p.Vaddr})
		}
	}
	if len(img.segs) == 0 {
		return nil, errors.New("no loadable segments")
	}
	var c []candidate
	if syms, err := ef.Symbols(); err == nil && len(syms) > 0 {
		c, img.source = funcs(ef, syms, c), "symtab"
	}
	if len(c) == 0 {
		if c = gopclntab(ef, c); len(c) > 0 {
			img.source = "gopclntab"
		}
	}
	if len(c) == 0 {
		if c = debugdata(ef, c); len(c) > 0 {
			img.source = "gnu_debugdata"
		}
	}
	if len(c) == 0 {
		var src string
		if c, src = debugFile(ef, img.id, ds, c); len(c) > 0 {
			img.source = src
		}
	}
	// MiniDebugInfo by design omits what .dynsym already has, so .dynsym is
	// always merged; with a full .symtab it only adds duplicates.
	if syms, err := ef.DynamicSymbols(); err == nil {
		n := len(c)
		c = funcs(ef, syms, c)
		if img.source == "" && len(c) > n {
			img.source = "dynsym"
		}
	}
	img.syms = newTable(c)
	img.bytes = img.syms.bytes() + int64(len(img.segs))*24 + 128
	return img, nil
}

// funcs appends the function symbols of syms, which came from ef.
func funcs(ef *elf.File, syms []elf.Symbol, out []candidate) []candidate {
	for _, s := range syms {
		if s.Value == 0 || s.Name == "" || s.Section == elf.SHN_UNDEF || s.Section >= elf.SHN_LORESERVE {
			continue
		}
		var rank int
		switch elf.ST_TYPE(s.Info) {
		case elf.STT_FUNC, elf.STT_GNU_IFUNC:
		case elf.STT_NOTYPE:
			// Hand-written assembly often omits .type; take it only if it
			// lives in code, and never a local label or mapping symbol.
			if int(s.Section) >= len(ef.Sections) || ef.Sections[s.Section].Flags&elf.SHF_EXECINSTR == 0 ||
				s.Name[0] == '$' || strings.HasPrefix(s.Name, ".L") {
				continue
			}
			rank += 10000
		default:
			continue
		}
		// perf's preferences among aliases: global over weak over local,
		// sized over unsized, fewer leading underscores.
		switch elf.ST_BIND(s.Info) {
		case elf.STB_GLOBAL:
		case elf.STB_WEAK:
			rank += 1000
		default:
			rank += 2000
		}
		if s.Size == 0 {
			rank += 100
		}
		rank += min(len(s.Name)-len(strings.TrimLeft(s.Name, "_")), 9)
		size := s.Size
		if size > 1<<32-1 {
			size = 0
		}
		out = append(out, candidate{sym{addr: s.Value, size: uint32(size), name: s.Name}, rank})
	}
	return out
}

// gopclntab reads function names from a Go program's pc-line table, which
// the Go runtime needs for tracebacks and so survives strip and -ldflags=-s.
func gopclntab(ef *elf.File, out []candidate) []candidate {
	text := ef.Section(".text")
	if text == nil {
		return out
	}
	var data []byte
	if s := ef.Section(".gopclntab"); s != nil {
		data, _ = s.Data()
	} else if ef.Section(".go.buildinfo") != nil {
		// Before Go 1.16 the table held pointers, so PIE programs kept it
		// inside .data.rel.ro with no section of its own; find its header.
		if s := ef.Section(".data.rel.ro"); s != nil {
			if d, err := s.Data(); err == nil {
				data = findPclntab(d, ef.ByteOrder)
			}
		}
	}
	if len(data) == 0 {
		return out
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		return out
	}
	for _, fn := range tab.Funcs {
		if fn.Entry == 0 || fn.End < fn.Entry {
			continue
		}
		size := fn.End - fn.Entry
		if size > 1<<32-1 {
			size = 0
		}
		out = append(out, candidate{sym{addr: fn.Entry, size: uint32(size), name: fn.Name}, 0})
	}
	return out
}

// findPclntab returns data from the first pclntab header on: magic (Go
// 1.2, 1.16, 1.18, 1.20), two zero bytes, instruction quantum (1 on x86),
// pointer size.
func findPclntab(d []byte, bo binary.ByteOrder) []byte {
	for _, magic := range []uint32{0xfffffffb, 0xfffffffa, 0xfffffff0, 0xfffffff1} {
		var m [4]byte
		bo.PutUint32(m[:], magic)
		for i := 0; ; {
			j := bytes.Index(d[i:], m[:])
			if j < 0 {
				break
			}
			i += j
			if i%4 == 0 && len(d)-i > 64 && d[i+4] == 0 && d[i+5] == 0 &&
				(d[i+6] == 1 || d[i+6] == 2 || d[i+6] == 4) && (d[i+7] == 4 || d[i+7] == 8) {
				return d[i:]
			}
			i++
		}
	}
	return nil
}

// debugdata reads MiniDebugInfo: an xz-compressed ELF holding a .symtab of
// the functions that .dynsym lacks, which Fedora and RHEL embed in stripped
// binaries so that backtraces have names without debuginfo packages.
func debugdata(ef *elf.File, out []candidate) []candidate {
	s := ef.Section(".gnu_debugdata")
	if s == nil || s.Type == elf.SHT_NOBITS {
		return out
	}
	data, err := s.Data()
	if err != nil {
		return out
	}
	zr, err := xz.NewReader(bytes.NewReader(data))
	if err != nil {
		return out
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxDebugData))
	if err != nil {
		return out
	}
	mini, err := elf.NewFile(bytes.NewReader(raw))
	if err != nil {
		return out
	}
	syms, err := mini.Symbols()
	if err != nil {
		return out
	}
	return funcs(mini, syms, out)
}

// debugFile finds a separate debug file as gdb does: by build-id under the
// debug directory, then by the .gnu_debuglink name next to the file, in its
// .debug subdirectory, and under the debug directory. Each is looked for in
// the process's root first (a container's own debug files), then the host's.
func debugFile(ef *elf.File, id string, ds debugSearch, out []candidate) ([]candidate, string) {
	if ds.dir == "" {
		return out, ""
	}
	type cand struct {
		path, source string
		crc          *uint32 // nil: the path itself names the build-id
	}
	var cands []cand
	if len(id) > 2 {
		cands = append(cands, cand{filepath.Join(ds.dir, ".build-id", id[:2], id[2:]+".debug"), "build-id", nil})
	}
	if name, crc, ok := debuglink(ef); ok && ds.path != "" {
		dir := filepath.Dir(ds.path)
		for _, p := range []string{
			filepath.Join(dir, name),
			filepath.Join(dir, ".debug", name),
			filepath.Join(ds.dir, dir, name),
		} {
			cands = append(cands, cand{p, "debuglink", &crc})
		}
	}
	for _, c := range cands {
		var roots []string
		if ds.root != "" && ds.root != "/" {
			roots = append(roots, ds.root)
		}
		for _, root := range append(roots, "") {
			f, err := os.Open(root + c.path)
			if err != nil {
				continue
			}
			n := len(out)
			out = debugSyms(f, id, c.crc, ds.key, out)
			f.Close()
			if len(out) > n {
				return out, c.source
			}
		}
	}
	return out, ""
}

// debugSyms appends the functions of a debug file if it matches the binary.
func debugSyms(f *os.File, id string, crc *uint32, self fileKey, out []candidate) []candidate {
	if k, err := keyOf(f); err != nil || k == self {
		return out
	}
	df, err := elf.NewFile(f)
	if err != nil {
		return out
	}
	if crc != nil {
		// A debuglink names a file, not a build; a stale one from another
		// build would give plausible but wrong names.
		if did := buildID(df); id != "" && did != "" {
			if did != id {
				return out
			}
		} else {
			h := crc32.NewIEEE()
			if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)); err != nil || h.Sum32() != *crc {
				return out
			}
		}
	}
	syms, err := df.Symbols()
	if err != nil {
		return out
	}
	return funcs(df, syms, out)
}

// debuglink parses .gnu_debuglink: a file name, padding to 4 bytes, CRC32.
func debuglink(ef *elf.File) (string, uint32, bool) {
	s := ef.Section(".gnu_debuglink")
	if s == nil {
		return "", 0, false
	}
	d, err := s.Data()
	if err != nil {
		return "", 0, false
	}
	nul := bytes.IndexByte(d, 0)
	if nul <= 0 {
		return "", 0, false
	}
	off := (nul + 4) &^ 3
	if off+4 > len(d) {
		return "", 0, false
	}
	name := string(d[:nul])
	if strings.ContainsRune(name, '/') {
		return "", 0, false // a name, not a path: refuse to wander
	}
	return name, ef.ByteOrder.Uint32(d[off:]), true
}

// buildID returns the GNU build-id note as hex.
func buildID(ef *elf.File) string {
	for _, s := range ef.Sections {
		if s.Type != elf.SHT_NOTE || s.Size > 1<<16 {
			continue
		}
		if d, err := s.Data(); err == nil {
			if id := noteBuildID(d, ef.ByteOrder); id != "" {
				return id
			}
		}
	}
	for _, p := range ef.Progs {
		if p.Type != elf.PT_NOTE || p.Filesz > 1<<16 {
			continue
		}
		d := make([]byte, p.Filesz)
		if _, err := p.ReadAt(d, 0); err == nil {
			if id := noteBuildID(d, ef.ByteOrder); id != "" {
				return id
			}
		}
	}
	return ""
}

func noteBuildID(d []byte, bo binary.ByteOrder) string {
	for len(d) >= 12 {
		namesz, descsz, typ := bo.Uint32(d), bo.Uint32(d[4:]), bo.Uint32(d[8:])
		d = d[12:]
		nlen := int(namesz+3) &^ 3
		dlen := int(descsz+3) &^ 3
		if nlen < 0 || dlen < 0 || nlen+dlen > len(d) {
			return ""
		}
		if typ == 3 && namesz == 4 && string(d[:4]) == "GNU\x00" && descsz > 0 {
			return hex.EncodeToString(d[nlen : nlen+int(descsz)])
		}
		d = d[nlen+dlen:]
	}
	return ""
}

// fileKey identifies a file's contents cheaply: same inode with the same size
// and modification time is taken as the same binary.
type fileKey struct {
	dev, ino    uint64
	size, mtime int64
}

func keyOf(f *os.File) (fileKey, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return fileKey{}, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return fileKey{}, fmt.Errorf("%s: not a regular file", f.Name())
	}
	return fileKey{uint64(st.Dev), st.Ino, st.Size, st.Mtim.Nano()}, nil
}
