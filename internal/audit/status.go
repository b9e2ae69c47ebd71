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
	"syscall"

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

// GetStatus asks the kernel for its audit status.
func GetStatus() (*Status, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return nil, fmt.Errorf("audit netlink socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	tv := unix.Timeval{Sec: 1}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	req := make([]byte, unix.NLMSG_HDRLEN)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], auditGet)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(req[8:], 1)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("asking for the audit status: %w", err)
	}
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
						return nil, fmt.Errorf("audit status: %w", unix.Errno(-code))
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

// ReadDaemon gathers what /proc and the cgroup files say about pid.
func ReadDaemon(pid uint32) *Daemon {
	d := &Daemon{PID: pid}
	dir := fmt.Sprintf("/proc/%d", pid)
	if b, err := os.ReadFile(dir + "/comm"); err == nil {
		d.Comm = strings.TrimSpace(string(b))
	}
	d.Queued, d.Dropped = auditSocket(dir, pid)
	if b, err := os.ReadFile(dir + "/cgroup"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			if parts[0] == "0" {
				d.Cgroup = parts[2]
				readCPUStat(d, findV2(parts[2]))
			} else if strings.Contains(parts[1], "cpu") && d.NrPeriods == 0 {
				for _, mnt := range []string{"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"} {
					if _, err := os.Stat(mnt); err == nil {
						readCPUStat(d, filepath.Join(mnt, parts[2]))
						break
					}
				}
			}
		}
	}
	return d
}

func findV2(path string) string {
	for _, mnt := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(mnt, "cgroup.controllers")); err == nil {
			return filepath.Join(mnt, path)
		}
	}
	return ""
}

func readCPUStat(d *Daemon, dir string) {
	if dir == "" {
		return
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cpu.max")); err == nil {
		d.CPUMax = strings.TrimSpace(string(b))
	} else if q, err := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us")); err == nil {
		p, _ := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us"))
		d.CPUMax = strings.TrimSpace(string(q)) + " " + strings.TrimSpace(string(p))
	}
	f, err := os.Open(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
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
