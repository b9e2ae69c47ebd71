package doctor

// Sockets as a process's descriptors and the kernel's tables name them:
// the peer of a socket from the address a connect passed or an accept
// returned, or, live, from /proc/PID/fd and the network namespace's tables.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// sockaddrString turns a struct sockaddr as a call copied it into
// "127.0.0.1:8080" or "[::1]:8080"; "" for other families and short copies.
func sockaddrString(b []byte) string {
	const afInet, afInet6 = 2, 10
	if len(b) < 2 {
		return ""
	}
	switch binary.LittleEndian.Uint16(b) {
	case afInet:
		if len(b) < 8 {
			return ""
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:])).String()
	case afInet6:
		if len(b) < 24 {
			return ""
		}
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])).Unmap(), binary.BigEndian.Uint16(b[2:])).String()
	}
	return ""
}

// tcpPeer reads, live, the remote address of a TCP socket a process holds
// at fd (its inode from /proc/PID/fd, its line in the process's network
// namespace's tcp tables); "" when the descriptor is gone or not a TCP
// socket. accepted: a socket listens on its local address, so this one
// came from accept (a server's end).
func tcpPeer(pid uint32, fd int) (peer string, accepted bool) {
	dir := "/proc/" + strconv.FormatUint(uint64(pid), 10)
	link, err := os.Readlink(dir + "/fd/" + strconv.Itoa(fd))
	if err != nil || !strings.HasPrefix(link, "socket:[") {
		return "", false
	}
	ino := strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")
	local := ""
	listening := map[string]bool{}
	for _, t := range []string{"tcp", "tcp6"} {
		scanTable(dir+"/net/"+t, func(fs []string) {
			if len(fs) < 10 {
				return
			}
			if fs[3] == "0A" { // LISTEN
				listening[fs[1]] = true
				if _, port, ok := strings.Cut(fs[1], ":"); ok && isAnyAddr(fs[1]) {
					listening["*:"+port] = true
				}
			}
			if peer == "" && fs[9] == ino {
				peer, local = hexAddr(fs[2]), fs[1]
			}
		})
	}
	if _, port, ok := strings.Cut(local, ":"); ok {
		accepted = listening[local] || listening["*:"+port]
	}
	return peer, accepted
}

// isAnyAddr: /proc/net/tcp's address is the wildcard (0.0.0.0 or ::), so a
// listener there owns its port on every address.
func isAnyAddr(s string) bool {
	h, _, _ := strings.Cut(s, ":")
	return strings.Trim(h, "0") == ""
}

func scanTable(path string, line func([]string)) {
	fh, err := os.Open(path)
	if err != nil {
		return
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sc.Scan() // the header
	for sc.Scan() {
		line(strings.Fields(sc.Text()))
	}
}

// hexAddr turns /proc/net/tcp's "0100007F:1F90" into "127.0.0.1:8080" (and
// an IPv6 address into its bracketed form).
func hexAddr(s string) string {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return s
	}
	port, _ := strconv.ParseUint(p, 16, 16)
	var ip []byte
	for i := 0; i+8 <= len(h); i += 8 {
		w, err := strconv.ParseUint(h[i:i+8], 16, 32)
		if err != nil {
			return s
		}
		// Each 32-bit word is in the host's order (little-endian here).
		ip = append(ip, byte(w), byte(w>>8), byte(w>>16), byte(w>>24))
	}
	switch len(ip) {
	case 4:
		return fmt.Sprintf("%d.%d.%d.%d:%d", ip[0], ip[1], ip[2], ip[3], port)
	case 16:
		var parts []string
		for i := 0; i < 16; i += 2 {
			parts = append(parts, strconv.FormatUint(uint64(ip[i])<<8|uint64(ip[i+1]), 16))
		}
		return fmt.Sprintf("[%s]:%d", strings.Join(parts, ":"), port)
	}
	return s
}

// tcpSocket is one line of a network namespace's /proc/net/tcp or tcp6.
type tcpSocket struct {
	Local, Remote string // "127.0.0.1:8080"
	State         int    // as proc.TCPListen etc. number them
	Inode         string // "0" for TIME_WAIT sockets, which no descriptor holds
}

// tcpOnPort reads the TCP sockets whose local port is port in the network
// namespace process pid is in: /proc/PID/net/tcp and tcp6 show that
// process's namespace, not the reader's. A socket only bound (not
// listening, not connected) is in neither file.
func tcpOnPort(pid uint32, port uint16) ([]tcpSocket, error) {
	dir := "/proc/" + strconv.FormatUint(uint64(pid), 10) + "/net/"
	if _, err := os.Stat(dir + "tcp"); err != nil {
		return nil, err
	}
	suffix := fmt.Sprintf(":%04X", port)
	var out []tcpSocket
	for _, t := range []string{"tcp", "tcp6"} {
		scanTable(dir+t, func(fs []string) {
			if len(fs) < 10 || !strings.HasSuffix(fs[1], suffix) {
				return
			}
			st, err := strconv.ParseUint(fs[3], 16, 8)
			if err != nil {
				return
			}
			out = append(out, tcpSocket{Local: hexAddr(fs[1]), Remote: hexAddr(fs[2]), State: int(st), Inode: fs[9]})
		})
	}
	return out, nil
}

// netNSOf names the network namespace process pid is in ("net:[4026531840]");
// "" when it cannot be read.
func netNSOf(pid uint32) string {
	s, _ := os.Readlink("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/ns/net")
	return s
}

// socketOwners finds, among the processes in network namespace ns (all of
// them when ns is ""), those holding a descriptor on each socket inode
// asked for: /proc/PID/fd links read "socket:[INODE]". Processes in other
// namespaces cannot hold a socket of this one's tables, so their
// descriptors are not read.
func socketOwners(inodes map[string]bool, ns string) map[string][]uint32 {
	out := map[string][]uint32{}
	if len(inodes) == 0 {
		return out
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			continue
		}
		if ns != "" && netNSOf(uint32(pid)) != ns {
			continue
		}
		dir := "/proc/" + e.Name() + "/fd/"
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(dir + fd.Name())
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			ino := strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")
			if inodes[ino] && !slices.Contains(out[ino], uint32(pid)) {
				out[ino] = append(out[ino], uint32(pid))
			}
		}
	}
	return out
}

// boundAddr reads, live, the local address of the socket process pid holds
// at fd ("127.0.0.1:8080"): a copy of the descriptor (pidfd_getfd, which
// needs the right to ptrace pid) and getsockname on it. A socket bound but
// not listening is in no /proc/net table, so this is how its port is known.
func boundAddr(pid uint32, fd int) string {
	nfd, err := copyFD(pid, fd)
	if err != nil {
		return ""
	}
	defer unix.Close(nfd)
	sa, err := unix.Getsockname(nfd)
	if err != nil {
		return ""
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)).String()
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port)).String()
	}
	return ""
}

// copyFD copies the descriptor a live process pid holds at fd into this
// one (pidfd_getfd, which needs the right to ptrace pid): what the kernel
// keeps of a socket and tells only its holder (its local address, its
// options) can then be asked. The copy shares the socket; closing it
// leaves pid's as it was.
func copyFD(pid uint32, fd int) (int, error) {
	pfd, err := unix.PidfdOpen(int(pid), 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	return unix.PidfdGetfd(pfd, fd, 0)
}

// tcpHoldOff reads, live, whether the TCP socket process pid holds at fd
// has TCP_NODELAY or TCP_CORK set: the options that take small writes
// out of Nagle's hold ("" when neither is). known is false when it cannot
// be read (the process or descriptor gone, no right to ptrace it).
func tcpHoldOff(pid uint32, fd int) (opt string, known bool) {
	nfd, err := copyFD(pid, fd)
	if err != nil {
		return "", false
	}
	defer unix.Close(nfd)
	for _, o := range []struct {
		name string
		opt  int
	}{{"TCP_NODELAY", unix.TCP_NODELAY}, {"TCP_CORK", unix.TCP_CORK}} {
		v, err := unix.GetsockoptInt(nfd, unix.IPPROTO_TCP, o.opt)
		if err != nil {
			return "", false
		}
		if v != 0 {
			return o.name, true
		}
	}
	return "", true
}

// commOf reads a live process's name; "" when it is gone.
func commOf(pid uint32) string {
	b, _ := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/comm")
	return strings.TrimSpace(string(b))
}
