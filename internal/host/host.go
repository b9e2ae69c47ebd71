// Package host reads the facts about this machine that explain findings and
// travel with a capture: kernel, vsyscall mode, clocks, and the limits
// behind errnos that name another resource.
package host

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Uname returns the node name and "release version" of the kernel.
func Uname() (node, kernel string) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", ""
	}
	return unix.ByteSliceToString(u.Nodename[:]), unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Version[:])
}

// Mono is CLOCK_MONOTONIC in ns, the clock BPF stamps events with.
func Mono() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// BootTime is the Unix time, in ns, at which CLOCK_MONOTONIC was zero.
func BootTime() int64 {
	return time.Now().UnixNano() - int64(Mono())
}

// VsyscallMode tells how the kernel treats the legacy vsyscall page:
// "emulate" (readable and callable), "xonly" (callable only: calls are
// emulated, reads fault) or "none" (every use faults: SIGSEGV). It reads the
// mapping the kernel shows every process, which reflects both the boot
// option and the kernel's default.
func VsyscallMode() string {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasSuffix(line, "[vsyscall]") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) > 1 && strings.HasPrefix(fields[1], "r") {
			return "emulate"
		}
		return "xonly"
	}
	return "none"
}

// Facts are the host facts stored in a capture's header: the kernel, the
// vsyscall mode, the Limits and the resolver's settings (MetaResolvConf).
func Facts() map[string]string {
	_, kernel := Uname()
	m := Limits()
	m["kernel"] = kernel
	m["vsyscall_mode"] = VsyscallMode()
	for k, v := range MemoryFacts() {
		m[k] = v
	}
	if rc := ResolvConf("/etc/resolv.conf"); rc != "" {
		m[MetaResolvConf] = rc
	}
	return m
}

// OOMKills is the kernel's count of processes killed for lack of memory
// since boot (/proc/vmstat oom_kill).
func OOMKills() uint64 {
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.ParseUint(v, 10, 64)
			return n
		}
	}
	return 0
}
