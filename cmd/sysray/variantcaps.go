package main

import (
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Capabilities a variant may run sysray without: those some variant names.
var capByName = map[string]uint{
	"audit_control": unix.CAP_AUDIT_CONTROL,
}

// withoutCaps runs fn with the named capabilities out of every thread's
// effective set, as a sysray started without them would be, and puts them
// back after. They stay permitted, so the workload started before is
// untouched and the rest of the run gets them back.
func withoutCaps(names []string, fn func() error) error {
	if len(names) == 0 {
		return fn()
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var was [2]unix.CapUserData
	if err := unix.Capget(&hdr, &was[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	less := was
	for _, n := range names {
		c, ok := capByName[n]
		if !ok {
			return fmt.Errorf("variant: unknown capability %q", n)
		}
		less[c/32].Effective &^= 1 << (c % 32)
	}
	if err := capsetAll(&hdr, &less); err != nil {
		return err
	}
	ferr := fn()
	if err := capsetAll(&hdr, &was); err != nil && ferr == nil {
		ferr = err
	}
	return ferr
}

// capsetAll sets the capabilities of every thread of the process: Go runs
// goroutines on many threads, and capset changes only the caller's.
func capsetAll(hdr *unix.CapUserHeader, data *[2]unix.CapUserData) error {
	_, _, errno := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	runtime.KeepAlive(hdr)
	runtime.KeepAlive(data)
	if errno == syscall.ENOTSUP {
		// Go refuses to change every thread when cgo may have made some.
		return fmt.Errorf("capset on every thread: %w (this sysray was built with cgo; build it as make build does, CGO_ENABLED=0)", errno)
	}
	if errno != 0 {
		return fmt.Errorf("capset on every thread: %w", errno)
	}
	return nil
}
