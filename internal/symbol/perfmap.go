package symbol

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// parsePerfMap reads a perf map file, written by JITs (V8, the JVM with an
// agent, LuaJIT, .NET, Python 3.12's perf trampoline): one "START SIZE name"
// line per function, hex numbers with or without 0x.
func parsePerfMap(r io.Reader) (table, error) {
	var c []candidate
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		a, rest, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		s, name, ok := strings.Cut(rest, " ")
		if !ok || name == "" {
			continue
		}
		addr, err := strconv.ParseUint(strings.TrimPrefix(a, "0x"), 16, 64)
		if err != nil {
			continue
		}
		size, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
		if err != nil || size == 0 || size > 1<<32-1 {
			continue
		}
		// A JIT reuses addresses after freeing code; the later line is the
		// current one, so it gets the better rank.
		c = append(c, candidate{sym{addr: addr, size: uint32(size), name: name}, -len(c)})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return newTable(c), nil
}
