package event

// This file holds the decoding API's types; the tables behind it are in
// syscalls_*.go, errno.go, flags.go, spec.go and format.go.

import "runtime"

// Arch identifies a syscall table.
type Arch uint8

const (
	ArchAMD64 Arch = 1
	ArchARM64 Arch = 2
)

func (a Arch) String() string {
	switch a {
	case ArchAMD64:
		return "x86_64"
	case ArchARM64:
		return "arm64"
	}
	return "unknown"
}

// HostArch is the syscall table of the running kernel.
func HostArch() Arch {
	if runtime.GOARCH == "arm64" {
		return ArchARM64
	}
	return ArchAMD64
}

// ArgKind says how to show (and, for some kinds, how the kernel should copy) an argument.
type ArgKind uint8

const (
	ArgInt          ArgKind = iota // signed decimal
	ArgUint                        // unsigned decimal
	ArgHex                         // 0x...
	ArgPtr                         // pointer: NULL or 0x...
	ArgFd                          // file descriptor (int)
	ArgDirFd                       // AT_FDCWD or fd
	ArgPath                        // user string, copied at entry
	ArgString                      // other user string, copied at entry (e.g. a name)
	ArgSockaddr                    // struct sockaddr in, copied at entry; LenArg is its length
	ArgSockaddrOut                 // struct sockaddr out, copied at exit; LenArg points to its socklen_t
	ArgOpenFlags                   // O_RDONLY|O_CLOEXEC
	ArgMode                        // 0644
	ArgProt                        // PROT_READ|PROT_EXEC
	ArgMapFlags                    // MAP_PRIVATE|MAP_32BIT
	ArgCloneFlags                  // CLONE_VM|... plus exit signal
	ArgFadvise                     // POSIX_FADV_DONTNEED
	ArgSignal                      // SIGSEGV
	ArgSockFamily                  // AF_INET
	ArgSockType                    // SOCK_STREAM|SOCK_CLOEXEC
	ArgAtFlags                     // AT_SYMLINK_NOFOLLOW|...
	ArgAccept4Flags                // SOCK_CLOEXEC|SOCK_NONBLOCK
	// ArgDNSQuery is a send buffer whose first bytes (LenArg is its length,
	// by value) the kernel copies only when the call goes to port 53: the
	// DNS query. Any other destination's bytes are never copied.
	ArgDNSQuery
	// ArgDNSMmsg is sendmmsg's message vector: the kernel copies the first
	// bytes of the first message's first iovec, only for port 53.
	ArgDNSMmsg
	// ArgDNSMmsgLen is sendmmsg's vlen, shown as a number; the kernel
	// copies, under it, the second message's query (glibc sends A and
	// AAAA together), only for port 53 and only when both were sent.
	ArgDNSMmsgLen
	// ArgDNSIov is writev's iovec array: on a TCP socket connected to
	// port 53 the kernel copies the first query after its two-byte length
	// (glibc's send_vc writes length and query in iovecs of their own).
	ArgDNSIov
	// ArgDNSIovLen is writev's iovcnt, shown as a number; the kernel
	// copies, under it, the second query of the same writev (A and AAAA).
	ArgDNSIovLen
	// ArgDNSAnswer is a read buffer: the kernel copies the first of the
	// bytes read only from a socket the doctor follows as a resolver's
	// (bpf/dnswatch.h), never in trace or record: the answer's header
	// and question.
	ArgDNSAnswer
)

// ArgSpec describes one argument of a syscall.
type ArgSpec struct {
	Name   string
	Kind   ArgKind
	LenArg int8 // for ArgSockaddr/ArgSockaddrOut/ArgDNSQuery: index of the length argument; -1 otherwise
}

// Spec describes a syscall.
type Spec struct {
	Name string
	Args []ArgSpec
	// RetKind says how to show the return value: ArgInt, ArgFd, ArgHex (mmap) or ArgPtr.
	RetKind ArgKind
}

// CaptureKind tells the kernel what to copy for an argument.
type CaptureKind uint8

const (
	CapPath        CaptureKind = 1 // NUL-terminated user string at entry
	CapSockaddr    CaptureKind = 2 // LenArg bytes at entry
	CapSockaddrOut CaptureKind = 3 // *(socklen_t*)args[LenArg] bytes at exit, only if ret >= 0
	CapDNS         CaptureKind = 4 // up to 128 of args[LenArg] bytes at exit, only if ret >= 0 and the call went to port 53
	CapDNSMmsg     CaptureKind = 5 // as CapDNS, from msgvec[Arg-1]'s first iovec (Arg 1 or 2)
	CapDNSIov      CaptureKind = 6 // as CapDNS, the query after a length in writev's iovecs (Arg 1: the first, 2: the second), without the length
	CapDNSAns      CaptureKind = 7 // up to 128 of the ret bytes read, only from a resolver's socket (bpf/dnswatch.h)
)

// Capture is one argument the kernel should copy.
type Capture struct {
	Arg    int
	Kind   CaptureKind
	LenArg int
}
