// Package audit reads the kernel audit subsystem's state over NETLINK_AUDIT
// (no auditctl needed): whether it is on, how full its backlog is, and who
// is supposed to be draining it.
package audit

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Status is struct audit_status from linux/audit.h.
type Status struct {
	Mask                  uint32 `json:"-"`
	Enabled               uint32 `json:"enabled"`
	Failure               uint32 `json:"failure"`
	PID                   uint32 `json:"pid"` // the registered audit daemon, 0 if none
	RateLimit             uint32 `json:"rate_limit"`
	BacklogLimit          uint32 `json:"backlog_limit"`
	Lost                  uint32 `json:"lost"`
	Backlog               uint32 `json:"backlog"`
	FeatureBitmap         uint32 `json:"-"`
	BacklogWaitTime       uint32 `json:"backlog_wait_time"`        // jiffies a task may wait for room
	BacklogWaitTimeActual uint32 `json:"backlog_wait_time_actual"` // total jiffies tasks waited, since reset
}

const (
	auditGet     = 1000
	statusFields = 11
)

// Full says the backlog is at its limit: every audited syscall on the host
// now waits in audit_log_start (for up to backlog_wait_time) for the audit
// daemon to make room.
func (s *Status) Full() bool {
	return s != nil && s.Enabled != 0 && s.BacklogLimit > 0 && s.Backlog >= s.BacklogLimit
}

// statusTimeout bounds a status read: the kernel answers from a kernel
// thread at once, but nothing promises it.
const statusTimeout = 2 * time.Second

// GetStatus asks the kernel for its audit status.
//
// While the backlog is over its limit the kernel puts whoever sends it a
// request to sleep after handling it (audit_receive: "penalize the
// sender"), for up to backlog_wait_time, which is 60 s by default. The
// reply does not wait for that: a kernel thread sends it as soon as the
// request is handled. So the request is sent from its own goroutine (whose
// thread may sleep on) and the reply is read here. The thread that sent it
// keeps the process from exiting until it wakes.
func GetStatus() (*Status, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return nil, fmt.Errorf("audit netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	tv := unix.NsecToTimeval(statusTimeout.Nanoseconds())
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	// Closed once both the sender and the reader are done with it.
	var users sync.WaitGroup
	users.Add(2)
	go func() {
		users.Wait()
		unix.Close(fd)
	}()
	req := make([]byte, unix.NLMSG_HDRLEN)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], auditGet)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(req[8:], 1)
	sent := make(chan error, 1)
	sending.Add(1)
	go func() {
		defer users.Done()
		defer sending.Add(-1)
		sent <- unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
	}()
	type reply struct {
		st  *Status
		err error
	}
	got := make(chan reply, 1)
	go func() {
		defer users.Done()
		st, err := readStatus(fd)
		got <- reply{st, err}
	}()
	for {
		select {
		case err := <-sent:
			if err != nil {
				// Nothing will come; the reader times out on its own.
				return nil, fmt.Errorf("asking for the audit status: %w", err)
			}
			sent = nil
		case r := <-got:
			return r.st, r.err
		}
	}
}

// sending counts status requests whose sender has not come back from the
// kernel (asleep there while the backlog is full).
var sending atomic.Int32

// Sending says a status request's sender is still asleep in the kernel:
// another request now would only add a sleeper.
func Sending() bool { return sending.Load() > 0 }

func readStatus(fd int) (*Status, error) {
	buf := make([]byte, 8192)
	for range 4 {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("reading the audit status: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case syscall.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
						errno := unix.Errno(-code)
						if errno == unix.EPERM {
							// Said where the error is made, so every reader of it (stderr, the agent's log, the report) knows why.
							return nil, fmt.Errorf("audit status: %w (reading it needs CAP_AUDIT_CONTROL)", errno)
						}
						return nil, fmt.Errorf("audit status: %w", errno)
					}
				}
			case auditGet:
				var v [statusFields]uint32
				for i := range v {
					if 4*i+4 <= len(m.Data) {
						v[i] = binary.NativeEndian.Uint32(m.Data[4*i:])
					}
				}
				return &Status{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10]}, nil
			}
		}
	}
	return nil, errors.New("no audit status in the kernel's reply")
}

// Daemon describes the process registered to receive audit records.
type Daemon struct {
	PID     uint32 `json:"pid"`
	Comm    string `json:"comm"`
	Cgroup  string `json:"cgroup"`
	Queued  uint64 `json:"queued_bytes"` // unread bytes in its audit socket
	Dropped uint64 `json:"socket_drops"` // records its socket dropped
	// CPU throttling of its cgroup (cpu.stat): a throttled daemon cannot
	// drain the backlog.
	NrPeriods     uint64 `json:"nr_periods,omitempty"`
	NrThrottled   uint64 `json:"nr_throttled,omitempty"`
	ThrottledUsec uint64 `json:"throttled_usec,omitempty"`
	CPUMax        string `json:"cpu_max,omitempty"`
}

// Reading says whether the daemon seems to keep up: its socket is not full.
func (d *Daemon) Reading() bool { return d.Queued < 64<<10 && d.Dropped == 0 }

// ReadDaemon gathers what /proc and the cgroup files say about pid. The
// files are read at once rather than one after another: on a host whose
// audit backlog is full an audited open waits, and waits overlap.
func ReadDaemon(pid uint32) *Daemon { return readDaemon(pid, "") }

// readDaemon is ReadDaemon with its name already read ("" if not).
func readDaemon(pid uint32, comm string) *Daemon {
	d := &Daemon{PID: pid, Comm: comm}
	dir := fmt.Sprintf("/proc/%d", pid)
	var wg sync.WaitGroup
	var cgroups []byte
	wg.Add(2)
	if comm == "" {
		wg.Add(1)
		go func() { defer wg.Done(); d.Comm = Comm(pid) }()
	}
	go func() { defer wg.Done(); d.Queued, d.Dropped = auditSocket(dir, pid) }()
	go func() { defer wg.Done(); cgroups, _ = os.ReadFile(dir + "/cgroup") }()
	wg.Wait()
	var v2, v1 string
	for _, line := range strings.Split(string(cgroups), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" {
			d.Cgroup = parts[2]
			v2 = findV2(parts[2])
		} else if strings.Contains(parts[1], "cpu") && v1 == "" {
			for _, mnt := range []string{"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"} {
				if _, err := os.Stat(mnt); err == nil {
					v1 = filepath.Join(mnt, parts[2])
					break
				}
			}
		}
	}
	// v2 first; a hybrid host binds cpu to v1, where the quota then is.
	readCPUStat(d, v2)
	if d.CPUMax == "" {
		readCPUStat(d, v1)
	}
	return d
}

// Comm is the name of process pid, "" if it is gone.
func Comm(pid uint32) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func findV2(path string) string {
	for _, mnt := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(mnt, "cgroup.controllers")); err == nil {
			return filepath.Join(mnt, path)
		}
	}
	return ""
}

// readCPUStat reads the CPU limit and throttling of the cgroup at dir:
// cpu.max on v2, cpu.cfs_quota_us and cpu.cfs_period_us on v1, and
// cpu.stat. Only files that exist are opened (a stat costs no open, and a
// failed open waits like any other on a host whose audit backlog is full),
// all at once.
func readCPUStat(d *Daemon, dir string) {
	if dir == "" {
		return
	}
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}
	var names []string
	switch {
	case exists("cpu.max"):
		names = []string{"cpu.max", "cpu.stat"}
	case exists("cpu.cfs_quota_us"):
		names = []string{"cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.stat"}
	default:
		return // no cpu controller here
	}
	files := make([][]byte, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			files[i], _ = os.ReadFile(filepath.Join(dir, name))
		}()
	}
	wg.Wait()
	if names[0] == "cpu.max" {
		d.CPUMax = strings.TrimSpace(string(files[0]))
	} else {
		d.CPUMax = strings.TrimSpace(string(files[0])) + " " + strings.TrimSpace(string(files[1]))
	}
	for _, line := range strings.Split(string(files[len(files)-1]), "\n") {
		k, v, _ := strings.Cut(line, " ")
		n, _ := strconv.ParseUint(v, 10, 64)
		switch k {
		case "nr_periods":
			d.NrPeriods = n
		case "nr_throttled":
			d.NrThrottled = n
		case "throttled_usec":
			d.ThrottledUsec = n
		case "throttled_time": // v1, ns
			d.ThrottledUsec = n / 1000
		}
	}
}

// auditSocket finds pid's NETLINK_AUDIT socket in /proc/PID/net/netlink:
// "sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode".
func auditSocket(dir string, pid uint32) (rmem, drops uint64) {
	f, err := os.Open(dir + "/net/netlink")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 || fs[1] != strconv.Itoa(unix.NETLINK_AUDIT) || fs[2] != strconv.FormatUint(uint64(pid), 10) {
			continue
		}
		rmem, _ = strconv.ParseUint(fs[4], 10, 64)
		drops, _ = strconv.ParseUint(fs[8], 10, 64)
		return rmem, drops
	}
	return 0, 0
}
