package symbol

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"strings"
)

// mapping is one executable region of a process.
type mapping struct {
	start, end, off uint64
	ino             uint64
	dev             string // as /proc/PID/maps prints it, "fd:01"
	path            string // as the process sees it; "" for anonymous memory
	deleted         bool   // the file was unlinked or replaced after mapping
	obj             *object
}

const (
	anonFile     = "[anon]"
	vdsoFile     = "[vdso]"
	vsyscallFile = "[vsyscall]"
)

// parseMaps returns the executable mappings of a /proc/PID/maps file. Only
// they can hold return addresses, and a process has many more data mappings.
func parseMaps(r io.Reader) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		if m, ok := parseMapsLine(sc.Bytes()); ok {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}

// parseMapsLine parses "start-end perms offset dev inode   path". The path
// may contain spaces, so it is everything after the inode.
func parseMapsLine(line []byte) (mapping, bool) {
	var m mapping
	field := func() string {
		line = bytes.TrimLeft(line, " ")
		i := bytes.IndexByte(line, ' ')
		if i < 0 {
			i = len(line)
		}
		f := string(line[:i])
		line = line[i:]
		return f
	}
	rng, perms, off, dev, ino := field(), field(), field(), field(), field()
	if len(perms) < 3 || perms[2] != 'x' {
		return m, false
	}
	lo, hi, ok := strings.Cut(rng, "-")
	if !ok {
		return m, false
	}
	var err1, err2, err3, err4 error
	m.start, err1 = strconv.ParseUint(lo, 16, 64)
	m.end, err2 = strconv.ParseUint(hi, 16, 64)
	m.off, err3 = strconv.ParseUint(off, 16, 64)
	m.ino, err4 = strconv.ParseUint(ino, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || m.end <= m.start {
		return m, false
	}
	m.dev = dev
	m.path = string(bytes.TrimLeft(line, " "))
	if p, ok := strings.CutSuffix(m.path, " (deleted)"); ok && m.ino != 0 {
		m.path, m.deleted = p, true
	}
	return m, true
}

// isFile reports whether the mapping is backed by a file we can read.
func (m *mapping) isFile() bool {
	return m.ino != 0 && strings.HasPrefix(m.path, "/")
}

// vsyscall names the legacy vsyscall page's three fixed entry points. Calls
// there are emulated by the kernel (or kill the process) and are worth
// seeing by name: story 000 is about exactly this.
func vsyscall(addr, start uint64) (string, uint64) {
	off := addr - start
	switch {
	case off < 0x400:
		return "gettimeofday", off
	case off < 0x800:
		return "time", off - 0x400
	case off < 0xc00:
		return "getcpu", off - 0x800
	}
	return "", 0
}
