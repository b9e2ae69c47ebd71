package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNetNS runs fn on this goroutine's thread inside the network namespace
// of process pid, then puts the thread back in its own. It must run on a
// goroutine of its own: if the thread cannot go back, it stays locked, and
// the runtime ends it with the goroutine.
func inNetNS(pid uint32, fn func() (uint16, uint16, error)) (uint16, uint16, error) {
	runtime.LockOSThread()
	own, err := os.Open(filepath.Join(Root, "thread-self/ns/net"))
	if err != nil {
		runtime.UnlockOSThread()
		return 0, 0, err
	}
	defer own.Close()
	target, err := os.Open(filepath.Join(pidDir(pid), "ns/net"))
	if err != nil {
		runtime.UnlockOSThread()
		return 0, 0, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return 0, 0, fmt.Errorf("entering the network namespace of %d: %w", pid, err)
	}
	lo, hi, err := fn()
	if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
		runtime.UnlockOSThread()
	}
	return lo, hi, err
}
