package proc

import (
	"io/fs"
	"syscall"
)

// ReadFile reads a file of the kernel's (procfs, sysfs, cgroupfs) whole,
// with open, read and close alone. os.ReadFile also offers each file to
// Go's netpoller: an epoll_ctl (which cgroupfs files accept and then wake
// the poller for), four fcntl and an fstat. For the files the agent reads
// again and again (each process's cgroup every few seconds, /proc/stat
// while it watches steal), that was seven syscalls of ten.
func ReadFile(path string) ([]byte, error) {
	fd, err := open(path)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	// Most such files fit in one page; the kernel fills a read of procfs
	// and sysfs a page at a time, so a short read does not mean the end.
	b := make([]byte, 0, 512)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := syscall.Read(fd, b[len(b):cap(b)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

func open(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}
