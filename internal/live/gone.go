package live

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// whenGone returns a channel closed once every one of pids has exited (as
// strace -p and perf stat -p end with their processes), or nil when that
// cannot be watched: a pidfd turns readable when its process exits, zombie
// or not. It stops watching when stop is closed.
func whenGone(pids []uint32, stop <-chan struct{}) <-chan struct{} {
	var fds []unix.PollFd
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(int(pid), 0)
		if errors.Is(err, unix.ESRCH) {
			continue // gone already
		}
		if err != nil {
			for _, f := range fds {
				unix.Close(int(f.Fd))
			}
			return nil // no pidfds (Linux < 5.3): run until interrupted, as before
		}
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	gone := make(chan struct{})
	go func() {
		defer func() {
			for _, f := range fds {
				unix.Close(int(f.Fd))
			}
		}()
		for len(fds) > 0 {
			select {
			case <-stop:
				return
			default:
			}
			// Short waits: the loop must notice stop.
			if _, err := unix.Poll(fds, int(200*time.Millisecond/time.Millisecond)); err != nil && !errors.Is(err, unix.EINTR) {
				return
			}
			live := fds[:0]
			for _, f := range fds {
				if f.Revents != 0 {
					unix.Close(int(f.Fd))
					continue
				}
				live = append(live, f)
			}
			fds = live
		}
		close(gone)
	}()
	return gone
}
