package doctor

import (
	"net"
	"os"
	"syscall"
	"testing"
)

// tcpPeer on this process's own loopback connection: the client's end
// names the listener's address, the server's end (from accept) names the
// client's and says it was accepted.
func TestTCPPeer(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skip(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fdOf := func(conn net.Conn) int {
		var fd int
		raw, err := conn.(syscall.Conn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		if err := raw.Control(func(f uintptr) { fd = int(f) }); err != nil {
			t.Fatal(err)
		}
		return fd
	}
	pid := uint32(os.Getpid())
	if peer, accepted := tcpPeer(pid, fdOf(c)); peer != l.Addr().String() || accepted {
		t.Errorf("client's end: %q accepted=%v, want %q, false", peer, accepted, l.Addr())
	}
	if peer, accepted := tcpPeer(pid, fdOf(s)); peer != c.LocalAddr().String() || !accepted {
		t.Errorf("server's end: %q accepted=%v, want %q, true", peer, accepted, c.LocalAddr())
	}
	if peer, _ := tcpPeer(pid, 0); peer != "" {
		t.Errorf("standard input: %q, want none", peer)
	}
}
