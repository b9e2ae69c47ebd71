package doctor

// Paths and exits as several detectors read them.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// procExit is how a process ended, from its exit event.
type procExit struct {
	at   uint64
	code int // exit status, or 128+signal
}

// absPath makes a relative path absolute, live: relative to the directory
// descriptor the call named (the *at calls), else to the process's cwd.
// A directory that cannot be read leaves the path as the call gave it.
func absPath(pid uint32, dirfd int32, path string) string {
	at := fmt.Sprintf("/proc/%d/cwd", pid)
	if dirfd != -100 {
		at = fmt.Sprintf("/proc/%d/fd/%d", pid, dirfd)
	}
	if dir, err := os.Readlink(at); err == nil && strings.HasPrefix(dir, "/") {
		return filepath.Join(dir, path)
	}
	return path
}
