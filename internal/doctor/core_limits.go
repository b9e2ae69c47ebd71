package doctor

// Reading a process's resource limits.

import (
	"strconv"
	"strings"
)

// rlimit finds the limit named name ("Max open files", "Max processes")
// in the text of /proc/PID/limits: its soft and hard values, -1 where
// unlimited, and whether the line was there.
func rlimit(text, name string) (soft, hard int64, ok bool) {
	for _, line := range strings.Split(text, "\n") {
		rest, found := strings.CutPrefix(line, name)
		if !found {
			continue
		}
		fs := strings.Fields(rest)
		if len(fs) < 2 {
			return 0, 0, false
		}
		return rlimitValue(fs[0]), rlimitValue(fs[1]), true
	}
	return 0, 0, false
}

func rlimitValue(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil { // "unlimited"
		return -1
	}
	return n
}
