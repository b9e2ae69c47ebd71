package proc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The readers below measure a process against the limits whose errnos name
// another resource (host.Limits): the mappings it holds (mmap's ENOMEM), its
// inotify watches and whose they are (ENOSPC, EMFILE), the TCP ports its
// network namespace holds (connect's EADDRNOTAVAIL). A detector that sees
// the errno reads them while the process is in that state, to say which
// limit was reached and by how much.

func pidDir(pid uint32) string { return filepath.Join(Root, strconv.FormatUint(uint64(pid), 10)) }

// MapCount returns the number of mappings (VMAs) the kernel holds against
// vm.max_map_count for process pid: the lines of /proc/PID/maps but the
// [vsyscall] gate line, which the kernel shows every process without a VMA
// behind it. mmap fails with ENOMEM once the count is above the limit (at
// it, on kernels that changed do_mmap's test to match), and a split
// (mprotect, munmap, mremap of part of a mapping) once it is at the limit,
// whatever memory is free. It counts newlines in place: a
// process near the limit has ~65000 lines (5 MB), and the kernel holds the
// process's mmap lock while it produces each page of them.
func MapCount(pid uint32) (int, error) {
	f, err := os.Open(filepath.Join(pidDir(pid), "maps"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	const gate = "[vsyscall]\n"
	var tail [len(gate)]byte // the last bytes read, right-aligned
	n := 0
	for {
		k, err := f.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if k >= len(tail) {
			copy(tail[:], buf[k-len(tail):k])
		} else if k > 0 {
			copy(tail[:], tail[k:])
			copy(tail[len(tail)-k:], buf[:k])
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if string(tail[:]) == gate {
		n--
	}
	return n, nil
}

// RSS returns the resident memory of process pid in bytes (/proc/PID/statm,
// which the kernel answers from counters, without walking the mappings). A
// process refused memory with ENOMEM while its RSS and the host's
// MemAvailable are small next to each other was refused something else: a
// count of mappings or a commit limit.
func RSS(pid uint32) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(pidDir(pid), "statm"))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, errors.New("statm: short")
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, err
	}
	return pages * uint64(os.Getpagesize()), nil
}

// InotifyFD is one inotify instance a process holds open.
type InotifyFD struct {
	FD      int
	Watches int
}

// InotifyWatches returns the inotify instances process pid holds open and
// the watches each has (the "inotify wd:" lines of its fdinfo). The kernel
// counts both against the user that created the instance (UIDs: the
// effective uid), summed over all of that user's processes:
// inotify_init1 fails with EMFILE past fs.inotify.max_user_instances and
// inotify_add_watch with ENOSPC past fs.inotify.max_user_watches. An
// instance inherited across fork shows in each process that holds it, so a
// sum over processes is an upper bound. Descriptors closed while it reads
// are skipped.
func InotifyWatches(pid uint32) ([]InotifyFD, error) {
	dir := pidDir(pid)
	ents, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return nil, err
	}
	var out []InotifyFD
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(dir, "fd", e.Name()))
		if err != nil || link != "anon_inode:inotify" {
			continue
		}
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, "fdinfo", e.Name()))
		if err != nil {
			continue
		}
		out = append(out, InotifyFD{FD: fd, Watches: countPrefixed(b, "inotify wd:")})
	}
	return out, nil
}

// InotifyUse is what one process holds of its user's inotify limits.
type InotifyUse struct {
	PID       uint32
	Instances int
	Watches   int
}

// InotifyByUser lists the processes running with effective uid uid that
// hold inotify instances, and what each holds. The kernel refuses a watch
// or an instance against the sum over all of a user's processes, so a
// process refused ENOSPC with few watches of its own was crowded out by
// these. It reads every process's status and descriptors: a detector calls
// it once per finding, not per event. Processes that end while it reads
// are skipped.
func InotifyByUser(uid uint32) ([]InotifyUse, error) {
	ents, err := os.ReadDir(Root)
	if err != nil {
		return nil, err
	}
	var out []InotifyUse
	for _, e := range ents {
		pid, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			continue
		}
		if _, euid, err := UIDs(uint32(pid)); err != nil || euid != uid {
			continue
		}
		fds, err := InotifyWatches(uint32(pid))
		if err != nil || len(fds) == 0 {
			continue
		}
		use := InotifyUse{PID: uint32(pid), Instances: len(fds)}
		for _, fd := range fds {
			use.Watches += fd.Watches
		}
		out = append(out, use)
	}
	return out, nil
}

// countPrefixed counts the lines of b that begin with prefix.
func countPrefixed(b []byte, prefix string) int {
	n := 0
	for line := range bytes.Lines(b) {
		if bytes.HasPrefix(line, []byte(prefix)) {
			n++
		}
	}
	return n
}

// UIDs returns the real and effective user ids of process pid as its
// /proc/PID/status shows them (in the reader's user namespace). Per-user
// limits (inotify instances and watches, RLIMIT_NPROC) are charged to the
// effective uid: processes of other programs running as the same user
// share them, which is how a process with few watches of its own is
// refused one.
func UIDs(pid uint32) (real, effective uint32, err error) {
	b, err := os.ReadFile(filepath.Join(pidDir(pid), "status"))
	if err != nil {
		return 0, 0, err
	}
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte("Uid:"))
		if !ok {
			continue
		}
		f := strings.Fields(string(rest))
		if len(f) < 2 {
			break
		}
		r, err1 := strconv.ParseUint(f[0], 10, 32)
		e, err2 := strconv.ParseUint(f[1], 10, 32)
		if err := errors.Join(err1, err2); err != nil {
			return 0, 0, err
		}
		return uint32(r), uint32(e), nil
	}
	return 0, 0, errors.New("status: no Uid line")
}

// TCP states as /proc/net/tcp numbers them (include/net/tcp_states.h).
const (
	TCPEstablished = 1
	TCPSynSent     = 2
	TCPSynRecv     = 3
	TCPFinWait1    = 4
	TCPFinWait2    = 5
	TCPTimeWait    = 6
	TCPClose       = 7
	TCPCloseWait   = 8
	TCPLastAck     = 9
	TCPListen      = 10
	TCPClosing     = 11
	TCPNewSynRecv  = 12
)

// TCPLocal counts the TCP sockets of a network namespace that share one
// local address.
type TCPLocal struct {
	Addr netip.Addr
	// States counts the sockets by state, indexed by the TCP* constants.
	States [TCPNewSynRecv + 1]int
	// MinPort and MaxPort are the lowest and highest local port of the
	// sockets that are not listening: the ephemeral ports in use, to set
	// against net.ipv4.ip_local_port_range (0 when all listen).
	MinPort, MaxPort uint16
}

// TCPByLocal reads the TCP sockets (IPv4 and IPv6) of the network namespace
// process pid is in (/proc/PID/net/tcp and tcp6) and counts them per local
// address, in the order first seen. connect fails with EADDRNOTAVAIL when
// every port of the namespace's ip_local_port_range is taken towards the
// server it connects to; a client that closes first holds each port in
// TIME_WAIT for 60 s, so TIME_WAIT sockets by the thousand on the client's
// address, spread over the whole range, are what a detector looks for.
// The files list TIME_WAIT sockets too, which ss shows only with -a.
func TCPByLocal(pid uint32) ([]TCPLocal, error) {
	var out []TCPLocal
	index := map[netip.Addr]int{}
	read := 0
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(pidDir(pid), "net", name))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && name == "tcp6" && read > 0 {
				continue // IPv6 off
			}
			return nil, err
		}
		read++
		err = scanTCP(f, func(addr netip.Addr, port uint16, state int) {
			i, ok := index[addr]
			if !ok {
				i = len(out)
				index[addr] = i
				out = append(out, TCPLocal{Addr: addr})
			}
			l := &out[i]
			if state > 0 && state < len(l.States) {
				l.States[state]++
			}
			if state == TCPListen {
				return
			}
			if l.MinPort == 0 || port < l.MinPort {
				l.MinPort = port
			}
			if port > l.MaxPort {
				l.MaxPort = port
			}
		})
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// scanTCP calls fn with the local address, local port and state of each
// socket line of a /proc/net/tcp or tcp6 file.
func scanTCP(r io.Reader, fn func(netip.Addr, uint16, int)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	first := true
	for sc.Scan() {
		if first { // the column names
			first = false
			continue
		}
		// "   0: 0100C80A:1F90 00000000:0000 0A ..."
		line := sc.Bytes()
		_, line, ok := bytes.Cut(line, []byte(": "))
		if !ok {
			continue
		}
		line = bytes.TrimLeft(line, " ")
		local, rest, ok := bytes.Cut(line, []byte(" "))
		if !ok {
			continue
		}
		rest = bytes.TrimLeft(rest, " ")
		_, rest, ok = bytes.Cut(rest, []byte(" ")) // the remote address
		if !ok || len(rest) < 2 {
			continue
		}
		state, err := strconv.ParseUint(string(bytes.TrimLeft(rest, " ")[:2]), 16, 8)
		if err != nil {
			continue
		}
		hexAddr, hexPort, ok := bytes.Cut(local, []byte(":"))
		if !ok {
			continue
		}
		addr, ok := parseProcAddr(hexAddr)
		port, err := strconv.ParseUint(string(hexPort), 16, 16)
		if !ok || err != nil {
			continue
		}
		fn(addr, uint16(port), int(state))
	}
	return sc.Err()
}

// parseProcAddr decodes an address as /proc/net/tcp prints it: the bytes of
// the address, as 32-bit words each printed in hex in the host's byte
// order.
func parseProcAddr(h []byte) (netip.Addr, bool) {
	if len(h) != 8 && len(h) != 32 {
		return netip.Addr{}, false
	}
	var b [16]byte
	for i := 0; i < len(h)/8; i++ {
		w, err := strconv.ParseUint(string(h[i*8:i*8+8]), 16, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		binary.NativeEndian.PutUint32(b[i*4:], uint32(w))
	}
	if len(h) == 8 {
		return netip.AddrFrom4([4]byte(b[:4])), true
	}
	return netip.AddrFrom16(b), true
}

// LocalPortRange returns net.ipv4.ip_local_port_range of the network
// namespace process pid is in: the ports connect picks from there, which
// TCPByLocal's counts are set against. The sysctl is per namespace and
// /proc/sys shows the reader's own, so for a process in another namespace
// one thread enters its namespace to read it (CAP_SYS_ADMIN) and leaves
// again; a thread that cannot leave is ended rather than reused.
func LocalPortRange(pid uint32) (lo, hi uint16, err error) {
	const file = "sys/net/ipv4/ip_local_port_range"
	self, err1 := os.Stat(filepath.Join(Root, "self/ns/net"))
	target, err2 := os.Stat(filepath.Join(pidDir(pid), "ns/net"))
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, err
	}
	if os.SameFile(self, target) {
		return readPortRange(filepath.Join(Root, file))
	}
	type result struct {
		lo, hi uint16
		err    error
	}
	ch := make(chan result, 1)
	go func() {
		r := result{}
		r.lo, r.hi, r.err = inNetNS(pid, func() (uint16, uint16, error) {
			return readPortRange(filepath.Join(Root, file))
		})
		ch <- r
	}()
	r := <-ch
	return r.lo, r.hi, r.err
}

func readPortRange(path string) (lo, hi uint16, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, errors.New("ip_local_port_range: not two numbers")
	}
	l, err1 := strconv.ParseUint(f[0], 10, 16)
	h, err2 := strconv.ParseUint(f[1], 10, 16)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, err
	}
	return uint16(l), uint16(h), nil
}
