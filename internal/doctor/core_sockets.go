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
	"strconv"
	"strings"
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
