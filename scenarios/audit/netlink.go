package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// status mirrors struct audit_status from linux/audit.h.
type status struct {
	Mask                  uint32
	Enabled               uint32
	Failure               uint32
	Pid                   uint32
	RateLimit             uint32
	BacklogLimit          uint32
	Lost                  uint32
	Backlog               uint32
	Version               uint32 // also feature_bitmap
	BacklogWaitTime       uint32 // jiffies
	BacklogWaitTimeActual uint32 // jiffies, cumulative
}

const statusSize = 11 * 4

func (s *status) bytes() []byte {
	b := make([]byte, statusSize)
	for i, v := range []uint32{s.Mask, s.Enabled, s.Failure, s.Pid, s.RateLimit, s.BacklogLimit,
		s.Lost, s.Backlog, s.Version, s.BacklogWaitTime, s.BacklogWaitTimeActual} {
		binary.NativeEndian.PutUint32(b[4*i:], v)
	}
	return b
}

func parseStatus(b []byte) status {
	// Older kernels send a shorter struct; missing fields read as zero.
	var v [11]uint32
	for i := range v {
		if 4*i+4 <= len(b) {
			v[i] = binary.NativeEndian.Uint32(b[4*i:])
		}
	}
	return status{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10]}
}

// conn is one NETLINK_AUDIT socket.
type conn struct {
	fd  int
	seq uint32
}

func dial() (*conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return nil, fmt.Errorf("netlink audit socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind netlink audit socket: %w", err)
	}
	c := &conn{fd: fd, seq: uint32(time.Now().UnixNano())}
	// The kernel answers from a kthread; a reply that never comes must not
	// hang a restore.
	c.setTimeout(5 * time.Second)
	return c, nil
}

func (c *conn) close() { unix.Close(c.fd) }

func (c *conn) setTimeout(d time.Duration) {
	tv := unix.NsecToTimeval(d.Nanoseconds())
	unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
}

func (c *conn) send(typ uint16, flags uint16, payload []byte) (uint32, error) {
	c.seq++
	b := make([]byte, unix.NLMSG_HDRLEN+len(payload))
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	binary.NativeEndian.PutUint16(b[6:], flags|unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(b[8:], c.seq)
	copy(b[unix.NLMSG_HDRLEN:], payload)
	err := unix.Sendto(c.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
	return c.seq, err
}

type message struct {
	typ  uint16
	seq  uint32
	data []byte
}

// recv returns the messages of one datagram.
func (c *conn) recv() ([]message, error) {
	buf := make([]byte, 1<<16)
	n, _, err := unix.Recvfrom(c.fd, buf, 0)
	for errors.Is(err, unix.EINTR) {
		n, _, err = unix.Recvfrom(c.fd, buf, 0)
	}
	if err != nil {
		return nil, err
	}
	var ms []message
	b := buf[:n]
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(binary.NativeEndian.Uint32(b[0:]))
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			break
		}
		ms = append(ms, message{
			typ:  binary.NativeEndian.Uint16(b[4:]),
			seq:  binary.NativeEndian.Uint32(b[8:]),
			data: b[unix.NLMSG_HDRLEN:l],
		})
		al := (l + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
		if al > len(b) {
			break
		}
		b = b[al:]
	}
	return ms, nil
}

// await reads until done accepts a message carrying seq. Audit records
// (seq 0) and stale replies in between are skipped, which matters on the
// socket registered as the daemon.
func (c *conn) await(seq uint32, done func(m message) (bool, error)) error {
	for {
		ms, err := c.recv()
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				return fmt.Errorf("no answer from the kernel: %w", err)
			}
			return err
		}
		for _, m := range ms {
			if m.seq != seq {
				continue
			}
			if m.typ == unix.NLMSG_ERROR {
				if len(m.data) < 4 {
					return errors.New("short netlink error")
				}
				if e := int32(binary.NativeEndian.Uint32(m.data)); e != 0 {
					return syscall.Errno(-e)
				}
			}
			if ok, err := done(m); ok || err != nil {
				return err
			}
		}
	}
}

// do sends a request that only answers with an acknowledgement.
func (c *conn) do(typ uint16, payload []byte) error {
	seq, err := c.send(typ, unix.NLM_F_ACK, payload)
	if err != nil {
		return err
	}
	return c.await(seq, func(m message) (bool, error) { return m.typ == unix.NLMSG_ERROR, nil })
}

func (c *conn) getStatus() (status, error) {
	var s status
	seq, err := c.send(unix.AUDIT_GET, 0, nil)
	if err != nil {
		return s, err
	}
	err = c.await(seq, func(m message) (bool, error) {
		if m.typ != unix.AUDIT_GET {
			return false, nil
		}
		s = parseStatus(m.data)
		return true, nil
	})
	return s, err
}

func (c *conn) setStatus(s status) error {
	return c.do(unix.AUDIT_SET, s.bytes())
}

// listRules returns every rule as the kernel reports it: struct
// audit_rule_data blobs that AUDIT_DEL_RULE accepts back unchanged.
func (c *conn) listRules() ([][]byte, error) {
	seq, err := c.send(unix.AUDIT_LIST_RULES, 0, nil)
	if err != nil {
		return nil, err
	}
	var rules [][]byte
	err = c.await(seq, func(m message) (bool, error) {
		switch m.typ {
		case unix.NLMSG_DONE:
			return true, nil
		case unix.AUDIT_LIST_RULES:
			rules = append(rules, append([]byte(nil), m.data...))
		}
		return false, nil
	})
	return rules, err
}

// accept4Rule builds "-a always,exit -F arch=b64 -S accept4", narrowed to one
// process when pid > 0 ("-F pid=PID").
func accept4Rule(pid int) []byte {
	var fs []ruleField
	if pid > 0 {
		fs = append(fs, ruleField{field: unix.AUDIT_PID, value: uint32(pid)})
	}
	return syscallRule(unix.SYS_ACCEPT4, fs...)
}

// ruleField is one "-F field=value" of a rule; str, when set, is the value
// of a string field (exe, dir, path) and value is ignored.
type ruleField struct {
	field uint32
	value uint32
	str   string
}

// syscallRule builds "-a always,exit -F arch=b64 -S nr [-F ...]" as a
// struct audit_rule_data.
func syscallRule(nr int, fields ...ruleField) []byte {
	const (
		words    = unix.AUDIT_BITMASK_SIZE
		maxF     = unix.AUDIT_MAX_FIELDS
		offMask  = 12
		offField = offMask + 4*words
		offValue = offField + 4*maxF
		offFlags = offValue + 4*maxF
		offBufl  = offFlags + 4*maxF
		offBuf   = offBufl + 4
	)
	var strs []byte
	for _, f := range fields {
		strs = append(strs, f.str...)
	}
	b := make([]byte, offBuf+len(strs))
	put := func(off int, v uint32) { binary.NativeEndian.PutUint32(b[off:], v) }
	put(0, unix.AUDIT_FILTER_EXIT)
	put(4, unix.AUDIT_ALWAYS)
	put(offMask+4*(nr/32), 1<<(nr%32))
	n := 0
	add := func(field, value uint32) {
		put(offField+4*n, field)
		put(offValue+4*n, value)
		put(offFlags+4*n, unix.AUDIT_EQUAL)
		n++
	}
	add(unix.AUDIT_ARCH, unix.AUDIT_ARCH_X86_64)
	for _, f := range fields {
		if f.str != "" {
			// String fields carry their length as the value; the
			// strings follow one another in buf.
			add(f.field, uint32(len(f.str)))
		} else {
			add(f.field, f.value)
		}
	}
	put(8, uint32(n))
	put(offBufl, uint32(len(strs)))
	copy(b[offBuf:], strs)
	return b
}
