package event

import (
	"encoding/binary"
	"strings"
	"testing"
)

const atFDCWDArg = 0xffffffffffffff9c // AT_FDCWD as a sign-extended register

func sockaddrIn(ip [4]byte, port uint16) []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint16(b, 2)
	binary.BigEndian.PutUint16(b[2:], port)
	copy(b[4:], ip[:])
	return b
}

func sockaddrIn6(ip [16]byte, port uint16, scope uint32) []byte {
	b := make([]byte, 28)
	binary.LittleEndian.PutUint16(b, 10)
	binary.BigEndian.PutUint16(b[2:], port)
	copy(b[8:], ip[:])
	binary.LittleEndian.PutUint32(b[24:], scope)
	return b
}

func sockaddrUn(path string) []byte {
	b := []byte{1, 0}
	return append(b, path...)
}

func TestFormatSockaddr(t *testing.T) {
	netlink := make([]byte, 12)
	binary.LittleEndian.PutUint16(netlink, 16)
	binary.LittleEndian.PutUint32(netlink[4:], 1234)
	binary.LittleEndian.PutUint32(netlink[8:], 1)
	packet := make([]byte, 20)
	binary.LittleEndian.PutUint16(packet, 17)
	binary.BigEndian.PutUint16(packet[2:], 0x0003)
	binary.LittleEndian.PutUint32(packet[4:], 2)
	binary.LittleEndian.PutUint16(packet[8:], 1)
	packet[11] = 6
	copy(packet[12:], []byte{0x52, 0x54, 0, 0x12, 0x34, 0x56})
	var v6loop, v4mapped [16]byte
	v6loop[15] = 1
	copy(v4mapped[10:], []byte{0xff, 0xff, 10, 0, 0, 1})

	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, ""},
		{"inet", sockaddrIn([4]byte{127, 0, 0, 1}, 80), `{sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("127.0.0.1")}`},
		{"inet any", sockaddrIn([4]byte{}, 0), `{sa_family=AF_INET, sin_port=htons(0), sin_addr=inet_addr("0.0.0.0")}`},
		{"inet6", sockaddrIn6(v6loop, 443, 0), `{sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}`},
		{"inet6 mapped", sockaddrIn6(v4mapped, 53, 2), `{sa_family=AF_INET6, sin6_port=htons(53), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::ffff:10.0.0.1", &sin6_addr), sin6_scope_id=2}`},
		{"inet6 short", sockaddrIn6(v6loop, 443, 0)[:24], `{sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::1", &sin6_addr)}`},
		{"unix", sockaddrUn("/run/x.sock\x00\x00\x00"), `{sa_family=AF_UNIX, sun_path="/run/x.sock"}`},
		{"unix abstract", sockaddrUn("\x00name"), `{sa_family=AF_UNIX, sun_path=@"name"}`},
		{"unix unnamed", sockaddrUn(""), `{sa_family=AF_UNIX}`},
		{"netlink", netlink, `{sa_family=AF_NETLINK, nl_pid=1234, nl_groups=0x1}`},
		{"netlink zero", append([]byte{16, 0}, make([]byte, 10)...), `{sa_family=AF_NETLINK, nl_pid=0, nl_groups=0}`},
		{"packet", packet, `{sa_family=AF_PACKET, sll_protocol=htons(0x3), sll_ifindex=2, sll_hatype=1, sll_pkttype=0, sll_halen=6, sll_addr=[0x52, 0x54, 0, 0x12, 0x34, 0x56]}`},
		{"unspec", []byte{0, 0, 'a', 1}, `{sa_family=AF_UNSPEC, sa_data="a\x01"}`},
		{"unknown family", []byte{99, 0, 1, 2}, `{sa_family=0x63, sa_data="\x01\x02"}`},
		{"truncated inet", sockaddrIn([4]byte{1, 2, 3, 4}, 1)[:6], `{sa_family=AF_INET, sa_data="\x00\x01\x01\x02"}`},
		{"one byte", []byte{2}, `{sa_family=???, sa_data="\x02"}`},
	}
	for _, tt := range tests {
		if got := FormatSockaddr(tt.b); got != tt.want {
			t.Errorf("%s: FormatSockaddr = %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

func TestFormatArg(t *testing.T) {
	k := func(kind ArgKind) ArgSpec { return ArgSpec{Name: "x", Kind: kind, LenArg: -1} }
	tests := []struct {
		spec  ArgSpec
		v     uint64
		data  []byte
		trunc bool
		want  string
	}{
		{k(ArgInt), 3, nil, false, "3"},
		{k(ArgInt), 0xffffffff, nil, false, "-1"},
		{k(ArgInt), 0xffffffffffffffff, nil, false, "-1"},
		{k(ArgInt), 0x1_00000005, nil, false, "5"}, // junk in the upper half of a C int
		{k(ArgFd), 0xffffffffffffffff, nil, false, "-1"},
		{k(ArgUint), 0xffffffffffffffff, nil, false, "18446744073709551615"},
		{k(argLong), 0xfffffffffffffff6, nil, false, "-10"},
		{k(argLong), 0x1_00000000, nil, false, "4294967296"},
		{k(ArgHex), 0, nil, false, "0"},
		{k(ArgHex), 0x1000, nil, false, "0x1000"},
		{k(ArgPtr), 0, nil, false, "NULL"},
		{k(ArgPtr), 0x7ffd1000, nil, false, "0x7ffd1000"},
		// a DNS query the kernel copied for port 53; nothing else is decoded
		{k(ArgDNSQuery), 0x7ffd1000, []byte("\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03api\x04corp\x00\x00\x1c\x00\x01"), false, "0x7ffd1000 [dns api.corp AAAA]"},
		{k(ArgDNSMmsg), 0x7ffd1000, []byte("\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03api\x00\x00\x01\x00\x01"), false, "0x7ffd1000 [dns api A]"},
		{k(ArgDNSMmsgLen), 2, []byte("\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03api\x00\x00\x1c\x00\x01"), false, "2 [dns api AAAA]"},
		{k(ArgDNSMmsgLen), 2, nil, false, "2"},
		{k(ArgDNSQuery), 0x7ffd1000, []byte("GET / HTTP/1.1"), false, "0x7ffd1000"},
		{k(ArgDNSQuery), 0x7ffd1000, nil, false, "0x7ffd1000"},
		// an answer read from a resolver's socket: its rcode, "no data" for no error and no record
		{k(ArgDNSAnswer), 0x7ffd1000, []byte("\x12\x34\x81\x83\x00\x01\x00\x00\x00\x00\x00\x00\x03api\x04corp\x00\x00\x01\x00\x01"), false, "0x7ffd1000 [dns api.corp A NXDOMAIN]"},
		{k(ArgDNSAnswer), 0x7ffd1000, []byte("\x12\x34\x81\x80\x00\x01\x00\x00\x00\x00\x00\x00\x03api\x00\x00\x1c\x00\x01"), false, "0x7ffd1000 [dns api AAAA NODATA]"},
		{k(ArgDNSAnswer), 0x7ffd1000, []byte("\x12\x34\x81\x80\x00\x01\x00\x01\x00\x00\x00\x00\x03api\x00\x00\x01\x00\x01"), false, "0x7ffd1000 [dns api A NOERROR]"},
		// a query read back (a server's own socket) is not an answer
		{k(ArgDNSAnswer), 0x7ffd1000, []byte("\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03api\x00\x00\x01\x00\x01"), false, "0x7ffd1000"},
		{k(ArgDirFd), atFDCWDArg, nil, false, "AT_FDCWD"},
		{k(ArgDirFd), 0xffffff9c, nil, false, "AT_FDCWD"},
		{k(ArgDirFd), 5, nil, false, "5"},
		{k(ArgPath), 0x7ffd1000, []byte("/etc/passwd"), false, `"/etc/passwd"`},
		{k(ArgPath), 0x7ffd1000, []byte("/very/long/pa"), true, `"/very/long/pa"...`},
		{k(ArgPath), 0x7ffd1000, []byte{}, false, `""`},
		{k(ArgPath), 0x7ffd1000, []byte("tab\there\n"), false, `"tab\there\n"`},
		{k(ArgPath), 0x7ffd1000, nil, false, "0x7ffd1000"},
		{k(ArgPath), 0, nil, false, "NULL"},
		{k(ArgString), 0x1000, []byte("memfd"), false, `"memfd"`},
		{ArgSpec{Name: "addr", Kind: ArgSockaddr, LenArg: 2}, 0x7ffd1000, sockaddrIn([4]byte{10, 0, 0, 1}, 22), false,
			`{sa_family=AF_INET, sin_port=htons(22), sin_addr=inet_addr("10.0.0.1")}`},
		{ArgSpec{Name: "addr", Kind: ArgSockaddrOut, LenArg: 2}, 0x7ffd1000, nil, false, "0x7ffd1000"},
		{k(ArgOpenFlags), 0, nil, false, "O_RDONLY"},
		{k(ArgOpenFlags), 0x80000, nil, false, "O_RDONLY|O_CLOEXEC"},
		{k(ArgOpenFlags), 0x241, nil, false, "O_WRONLY|O_CREAT|O_TRUNC"},
		{k(ArgOpenFlags), 0x90800, nil, false, "O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_DIRECTORY"},
		{k(ArgOpenFlags), 0xc2, nil, false, "O_RDWR|O_CREAT|O_EXCL"},
		{k(ArgOpenFlags), 0x441, nil, false, "O_WRONLY|O_CREAT|O_APPEND"},
		{k(ArgOpenFlags), 0x101002, nil, false, "O_RDWR|O_SYNC"},
		{k(ArgOpenFlags), 0x1001, nil, false, "O_WRONLY|O_DSYNC"},
		{k(ArgOpenFlags), 0x410002, nil, false, "O_RDWR|O_TMPFILE"},
		{k(ArgOpenFlags), 0x4000, nil, false, "O_RDONLY|O_DIRECT"},
		{k(ArgOpenFlags), 0x8000, nil, false, "O_RDONLY|O_LARGEFILE"},
		{k(ArgOpenFlags), 0x2a0000, nil, false, "O_RDONLY|O_NOFOLLOW|O_CLOEXEC|O_PATH"},
		{k(ArgOpenFlags), 0x40100, nil, false, "O_RDONLY|O_NOCTTY|O_NOATIME"},
		{k(ArgOpenFlags), 0x2000, nil, false, "O_RDONLY|O_ASYNC"},
		{k(ArgOpenFlags), 0x3, nil, false, "O_ACCMODE"},
		{k(ArgOpenFlags), 0x80000000, nil, false, "O_RDONLY|0x80000000"},
		{k(argFdFlags), 0x80800, nil, false, "O_NONBLOCK|O_CLOEXEC"},
		{k(argFdFlags), 0, nil, false, "0"},
		{k(ArgMode), 0644, nil, false, "0644"},
		{k(ArgMode), 0, nil, false, "000"},
		{k(ArgMode), 022, nil, false, "022"},
		{k(ArgMode), 0777, nil, false, "0777"},
		{k(ArgMode), 04755, nil, false, "04755"},
		{k(ArgMode), 0100644, nil, false, "S_IFREG|0644"},
		{k(ArgMode), 0020620, nil, false, "S_IFCHR|0620"},
		{k(ArgProt), 0, nil, false, "PROT_NONE"},
		{k(ArgProt), 1, nil, false, "PROT_READ"},
		{k(ArgProt), 3, nil, false, "PROT_READ|PROT_WRITE"},
		{k(ArgProt), 5, nil, false, "PROT_READ|PROT_EXEC"},
		{k(ArgProt), 0x1000001, nil, false, "PROT_READ|PROT_GROWSDOWN"},
		{k(ArgProt), 0x10, nil, false, "0x10"}, // PROT_BTI is arm64 only
		{k(ArgMapFlags), 0x22, nil, false, "MAP_PRIVATE|MAP_ANONYMOUS"},
		{k(ArgMapFlags), 0x62, nil, false, "MAP_PRIVATE|MAP_ANONYMOUS|MAP_32BIT"},
		{k(ArgMapFlags), 0x812, nil, false, "MAP_PRIVATE|MAP_FIXED|MAP_DENYWRITE"},
		{k(ArgMapFlags), 0x20022, nil, false, "MAP_PRIVATE|MAP_ANONYMOUS|MAP_STACK"},
		{k(ArgMapFlags), 0x4022, nil, false, "MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE"},
		{k(ArgMapFlags), 0x100022, nil, false, "MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED_NOREPLACE"},
		{k(ArgMapFlags), 0x1, nil, false, "MAP_SHARED"},
		{k(ArgMapFlags), 0x80003, nil, false, "MAP_SHARED_VALIDATE|MAP_SYNC"},
		{k(ArgMapFlags), 0x8022, nil, false, "MAP_PRIVATE|MAP_ANONYMOUS|MAP_POPULATE"},
		{k(ArgMapFlags), 0x4000022, nil, false, "MAP_PRIVATE|MAP_ANONYMOUS|MAP_UNINITIALIZED"},
		{k(ArgMapFlags), 0x40022 | 21<<26, nil, false, "MAP_PRIVATE|MAP_ANONYMOUS|MAP_HUGETLB|21<<MAP_HUGE_SHIFT"},
		{k(ArgMapFlags), 0x20, nil, false, "MAP_ANONYMOUS"},
		{k(ArgMapFlags), 0, nil, false, "0"},
		{k(ArgCloneFlags), 0x3d0f00, nil, false,
			"CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID"},
		{k(ArgCloneFlags), 0x1200011, nil, false, "CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD"},
		{k(ArgCloneFlags), 0x4111, nil, false, "CLONE_VM|CLONE_VFORK|SIGCHLD"},
		{k(ArgCloneFlags), 0x11, nil, false, "SIGCHLD"},
		{k(ArgCloneFlags), 0x70000000, nil, false, "CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNET"},
		{k(ArgCloneFlags), 0x1_00000000, nil, false, "0x100000000"},
		{k(ArgCloneFlags), 0, nil, false, "0"},
		{k(ArgFadvise), 4, nil, false, "POSIX_FADV_DONTNEED"},
		{k(ArgFadvise), 0, nil, false, "POSIX_FADV_NORMAL"},
		{k(ArgFadvise), 2, nil, false, "POSIX_FADV_SEQUENTIAL"},
		{k(ArgFadvise), 9, nil, false, "0x9"},
		{k(ArgSignal), 9, nil, false, "SIGKILL"},
		{k(ArgSignal), 0, nil, false, "0"},
		{k(ArgSignal), 36, nil, false, "SIGRTMIN+2"},
		{k(ArgSockFamily), 1, nil, false, "AF_UNIX"},
		{k(ArgSockFamily), 2, nil, false, "AF_INET"},
		{k(ArgSockFamily), 10, nil, false, "AF_INET6"},
		{k(ArgSockFamily), 16, nil, false, "AF_NETLINK"},
		{k(ArgSockFamily), 17, nil, false, "AF_PACKET"},
		{k(ArgSockFamily), 40, nil, false, "AF_VSOCK"},
		{k(ArgSockType), 1, nil, false, "SOCK_STREAM"},
		{k(ArgSockType), 0x80002, nil, false, "SOCK_DGRAM|SOCK_CLOEXEC"},
		{k(ArgSockType), 0x80801, nil, false, "SOCK_STREAM|SOCK_CLOEXEC|SOCK_NONBLOCK"},
		{k(ArgSockType), 0x803, nil, false, "SOCK_RAW|SOCK_NONBLOCK"},
		{k(ArgSockType), 5, nil, false, "SOCK_SEQPACKET"},
		{k(ArgAtFlags), 0, nil, false, "0"},
		{k(ArgAtFlags), 0x100, nil, false, "AT_SYMLINK_NOFOLLOW"},
		{k(ArgAtFlags), 0x200, nil, false, "AT_REMOVEDIR"},
		{k(ArgAtFlags), 0x1100, nil, false, "AT_SYMLINK_NOFOLLOW|AT_EMPTY_PATH"},
		{k(ArgAtFlags), 0x800, nil, false, "AT_NO_AUTOMOUNT"},
		{k(ArgAtFlags), 0x10000, nil, false, "0x10000"},
		{k(ArgAccept4Flags), 0x80800, nil, false, "SOCK_CLOEXEC|SOCK_NONBLOCK"},
		{k(ArgAccept4Flags), 0x80000, nil, false, "SOCK_CLOEXEC"},
		{k(ArgAccept4Flags), 0, nil, false, "0"},
		{k(argWhence), 1, nil, false, "SEEK_CUR"},
		{k(argFcntlCmd), 1030, nil, false, "F_DUPFD_CLOEXEC"},
		{k(argFutexOp), 128, nil, false, "FUTEX_WAIT_PRIVATE"},
		{k(argFutexOp), 129, nil, false, "FUTEX_WAKE_PRIVATE"},
		{k(argFutexOp), 9 | 128 | 256, nil, false, "FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME"},
		{k(argFutexOp), 99, nil, false, "0x63"},
		{k(argSigHow), 2, nil, false, "SIG_SETMASK"},
		{k(argAccessMode), 0, nil, false, "F_OK"},
		{k(argAccessMode), 5, nil, false, "R_OK|X_OK"},
		{k(argAccessFlags), 0x200, nil, false, "AT_EACCESS"},
		{k(argAccessFlags), 0x1300, nil, false, "AT_SYMLINK_NOFOLLOW|AT_EACCESS|AT_EMPTY_PATH"},
		{k(argMadvise), 4, nil, false, "MADV_DONTNEED"},
		{k(argEpollOp), 1, nil, false, "EPOLL_CTL_ADD"},
		{k(argShutdownHow), 2, nil, false, "SHUT_RDWR"},
		{k(argClockID), 1, nil, false, "CLOCK_MONOTONIC"},
		{k(argArchPrctl), 0x1002, nil, false, "ARCH_SET_FS"},
		{k(argArchPrctl), 0x3001, nil, false, "0x3001"},
		{k(argPrctlOp), 15, nil, false, "PR_SET_NAME"},
		{k(argWaitOptions), 0x40000001, nil, false, "WNOHANG|__WALL"},
	}
	for _, tt := range tests {
		if got := FormatArg(tt.spec, tt.v, tt.data, tt.trunc); got != tt.want {
			t.Errorf("FormatArg(kind %d, %#x, %q, %v) = %q, want %q", tt.spec.Kind, tt.v, tt.data, tt.trunc, got, tt.want)
		}
	}
}

// arm64 moves O_DIRECTORY, O_NOFOLLOW, O_DIRECT and O_LARGEFILE and has its
// own PROT and MAP bits; FormatSyscall must use the call's arch, not x86_64's.
func TestFormatArgARM64(t *testing.T) {
	k := func(kind ArgKind) ArgSpec { return ArgSpec{Name: "x", Kind: kind, LenArg: -1} }
	tests := []struct {
		spec ArgSpec
		v    uint64
		want string
	}{
		{k(ArgOpenFlags), 0x84000, "O_RDONLY|O_CLOEXEC|O_DIRECTORY"},
		{k(ArgOpenFlags), 0x88000, "O_RDONLY|O_NOFOLLOW|O_CLOEXEC"},
		{k(ArgOpenFlags), 0x10000, "O_RDONLY|O_DIRECT"},
		{k(ArgOpenFlags), 0x20000, "O_RDONLY|O_LARGEFILE"},
		{k(ArgOpenFlags), 0x404002, "O_RDWR|O_TMPFILE"},
		{k(ArgProt), 0x15, "PROT_READ|PROT_EXEC|PROT_BTI"},
		{k(ArgProt), 0x23, "PROT_READ|PROT_WRITE|PROT_MTE"},
		{k(ArgMapFlags), 0x22, "MAP_PRIVATE|MAP_ANONYMOUS"},
		{k(ArgMapFlags), 0x62, "MAP_PRIVATE|MAP_ANONYMOUS|0x40"},
	}
	for _, tt := range tests {
		if got := formatArg(ArchARM64, tt.spec, tt.v, nil, false); got != tt.want {
			t.Errorf("arm64 formatArg(kind %d, %#x) = %q, want %q", tt.spec.Kind, tt.v, got, tt.want)
		}
	}
}

func sys(a Arch, name string, ret int64, args ...uint64) *Syscall {
	nr, ok := SyscallByName(a, name)
	if !ok {
		panic("no syscall " + name)
	}
	s := &Syscall{Nr: nr, Ret: ret}
	copy(s.Args[:], args)
	return s
}

func withData(s *Syscall, i int, data string) *Syscall {
	s.Data[i] = []byte(data)
	return s
}

func TestFormatSyscall(t *testing.T) {
	const p = 0x7ffc0000a000 // some user pointer
	errno := func(n int) int64 { return int64(-n) }

	truncated := withData(sys(ArchAMD64, "execve", 0, p, p+0x100, p+0x200), 0, "/usr/bin/very-long-na")
	truncated.Truncated[0] = true
	unfinished := sys(ArchAMD64, "read", 0, 0, p, 4096)
	unfinished.Unfinished = true
	exited := sys(ArchAMD64, "exit_group", 0, 0)
	exited.Unfinished = true
	accepted := withData(sys(ArchAMD64, "accept4", 5, 3, p, p+0x80, 0x80000), 1, string(sockaddrIn([4]byte{192, 168, 1, 2}, 51000)))

	tests := []struct {
		name string
		arch Arch
		s    *Syscall
		want string
	}{
		{"openat", ArchAMD64,
			withData(sys(ArchAMD64, "openat", 3, atFDCWDArg, p, 0x80000, 0), 1, "/etc/ld.so.cache"),
			`openat(AT_FDCWD, "/etc/ld.so.cache", O_RDONLY|O_CLOEXEC) = 3`},
		{"openat ENOENT", ArchAMD64,
			withData(sys(ArchAMD64, "openat", errno(2), atFDCWDArg, p, 0x80000, 0), 1, "/etc/ld.so.preload"),
			`openat(AT_FDCWD, "/etc/ld.so.preload", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory)`},
		{"openat O_CREAT shows mode", ArchAMD64,
			withData(sys(ArchAMD64, "openat", 4, atFDCWDArg, p, 0x241, 0644), 1, "/tmp/out"),
			`openat(AT_FDCWD, "/tmp/out", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 4`},
		{"openat not captured", ArchAMD64,
			sys(ArchAMD64, "openat", 3, 7, p, 0, 0),
			`openat(7, 0x7ffc0000a000, O_RDONLY) = 3`},
		{"open", ArchAMD64,
			withData(sys(ArchAMD64, "open", 3, p, 0x90800), 0, "/proc"),
			`open("/proc", O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_DIRECTORY) = 3`},
		{"openat arm64", ArchARM64,
			withData(sys(ArchARM64, "openat", 3, atFDCWDArg, p, 0x84000, 0), 1, "/sys"),
			`openat(AT_FDCWD, "/sys", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = 3`},
		{"mmap ENOMEM", ArchAMD64,
			sys(ArchAMD64, "mmap", errno(12), 0, 4096, 3, 0x62, 0xffffffffffffffff, 0),
			`mmap(NULL, 4096, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_32BIT, -1, 0) = -1 ENOMEM (Cannot allocate memory)`},
		{"mmap file", ArchAMD64,
			sys(ArchAMD64, "mmap", 0x7f3a1c000000, 0x7f3a1c000000, 0x2000, 5, 0x812, 3, 0x26000),
			`mmap(0x7f3a1c000000, 8192, PROT_READ|PROT_EXEC, MAP_PRIVATE|MAP_FIXED|MAP_DENYWRITE, 3, 0x26000) = 0x7f3a1c000000`},
		{"brk", ArchAMD64, sys(ArchAMD64, "brk", 0x55d0c3a4b000, 0), `brk(NULL) = 0x55d0c3a4b000`},
		{"connect", ArchAMD64,
			withData(sys(ArchAMD64, "connect", 0, 3, p, 16), 1, string(sockaddrIn([4]byte{127, 0, 0, 1}, 8080))),
			`connect(3, {sa_family=AF_INET, sin_port=htons(8080), sin_addr=inet_addr("127.0.0.1")}, 16) = 0`},
		{"connect refused", ArchARM64,
			withData(sys(ArchARM64, "connect", errno(111), 3, p, 16), 1, string(sockaddrIn([4]byte{127, 0, 0, 1}, 8080))),
			`connect(3, {sa_family=AF_INET, sin_port=htons(8080), sin_addr=inet_addr("127.0.0.1")}, 16) = -1 ECONNREFUSED (Connection refused)`},
		{"connect unix", ArchAMD64,
			withData(sys(ArchAMD64, "connect", 0, 4, p, 110), 1, string(sockaddrUn("/run/dbus/system_bus_socket\x00"))),
			`connect(4, {sa_family=AF_UNIX, sun_path="/run/dbus/system_bus_socket"}, 110) = 0`},
		{"accept4 EAGAIN", ArchAMD64,
			sys(ArchAMD64, "accept4", errno(11), 3, p, p+0x80, 0x80800),
			`accept4(3, 0x7ffc0000a000, 0x7ffc0000a080, SOCK_CLOEXEC|SOCK_NONBLOCK) = -1 EAGAIN (Resource temporarily unavailable)`},
		{"accept4 with peer", ArchAMD64, accepted,
			`accept4(3, {sa_family=AF_INET, sin_port=htons(51000), sin_addr=inet_addr("192.168.1.2")}, 0x7ffc0000a080, SOCK_CLOEXEC) = 5`},
		{"socket", ArchAMD64,
			sys(ArchAMD64, "socket", 3, 10, 0x80801, 6),
			`socket(AF_INET6, SOCK_STREAM|SOCK_CLOEXEC|SOCK_NONBLOCK, 6) = 3`},
		{"fadvise64", ArchAMD64,
			sys(ArchAMD64, "fadvise64", 0, 3, 0, 0, 4),
			`fadvise64(3, 0, 0, POSIX_FADV_DONTNEED) = 0`},
		{"fadvise64 arm64", ArchARM64,
			sys(ArchARM64, "fadvise64", 0, 3, 4096, 1<<33, 2),
			`fadvise64(3, 4096, 8589934592, POSIX_FADV_SEQUENTIAL) = 0`},
		{"clone thread", ArchAMD64,
			sys(ArchAMD64, "clone", 4321, 0x3d0f00, 0x7f3a1b7fee70, 0x7f3a1b7ff990, 0x7f3a1b7ff990, 0x7f3a1b7ff6c0),
			"clone(CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID, " +
				"0x7f3a1b7fee70, 0x7f3a1b7ff990, 0x7f3a1b7ff990, 0x7f3a1b7ff6c0) = 4321"},
		{"clone fork", ArchAMD64,
			sys(ArchAMD64, "clone", 1234, 0x1200011, 0, 0, 0x7f3a1c5a4a10, 0),
			`clone(CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, NULL, NULL, 0x7f3a1c5a4a10, 0) = 1234`},
		{"clone arm64 order", ArchARM64,
			sys(ArchARM64, "clone", 1234, 0x1200011, 0, 0, 0, 0xffff8a5c40f0),
			`clone(CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, NULL, NULL, 0, 0xffff8a5c40f0) = 1234`},
		{"execve truncated", ArchAMD64, truncated,
			`execve("/usr/bin/very-long-na"..., 0x7ffc0000a100, 0x7ffc0000a200) = 0`},
		{"unlinkat", ArchAMD64,
			withData(sys(ArchAMD64, "unlinkat", 0, atFDCWDArg, p, 0x200), 1, "/tmp/d"),
			`unlinkat(AT_FDCWD, "/tmp/d", AT_REMOVEDIR) = 0`},
		{"renameat2", ArchAMD64,
			withData(withData(sys(ArchAMD64, "renameat2", 0, atFDCWDArg, p, atFDCWDArg, p+0x40, 1), 1, "a"), 3, "b"),
			`renameat2(AT_FDCWD, "a", AT_FDCWD, "b", 0x1) = 0`},
		{"newfstatat empty path", ArchAMD64,
			withData(sys(ArchAMD64, "newfstatat", 0, 3, p, p+0x100, 0x1000), 1, ""),
			`newfstatat(3, "", 0x7ffc0000a100, AT_EMPTY_PATH) = 0`},
		{"lseek back", ArchAMD64,
			sys(ArchAMD64, "lseek", 4086, 3, 0xfffffffffffffff6, 1),
			`lseek(3, -10, SEEK_CUR) = 4086`},
		{"read", ArchAMD64,
			sys(ArchAMD64, "read", 832, 3, p, 832),
			`read(3, 0x7ffc0000a000, 832) = 832`},
		{"futex", ArchAMD64,
			sys(ArchAMD64, "futex", 0, 0x55d0c3a4b2a0, 129, 1),
			`futex(0x55d0c3a4b2a0, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0) = 0`},
		{"rt_sigaction", ArchAMD64,
			sys(ArchAMD64, "rt_sigaction", 0, 2, p, 0, 8),
			`rt_sigaction(SIGINT, 0x7ffc0000a000, NULL, 8) = 0`},
		{"kill", ArchAMD64, sys(ArchAMD64, "kill", errno(3), 999, 15), `kill(999, SIGTERM) = -1 ESRCH (No such process)`},
		{"arch_prctl", ArchAMD64,
			sys(ArchAMD64, "arch_prctl", 0, 0x1002, 0x7f3a1c5a4740),
			`arch_prctl(ARCH_SET_FS, 0x7f3a1c5a4740) = 0`},
		{"getpid", ArchAMD64, sys(ArchAMD64, "getpid", 42), `getpid() = 42`},
		{"getppid arm64", ArchARM64, sys(ArchARM64, "getppid", 1), `getppid() = 1`},
		{"unfinished", ArchAMD64, unfinished, `read(0, 0x7ffc0000a000, 4096) = ?`},
		{"exit_group", ArchAMD64, exited, `exit_group(0) = ?`},
		{"interrupted", ArchAMD64,
			sys(ArchAMD64, "wait4", errno(512), 0xffffffffffffffff, p, 0, 0),
			`wait4(-1, 0x7ffc0000a000, 0, NULL) = -1 ERESTARTSYS (To be restarted if SA_RESTART is set)`},
		{"unknown errno", ArchAMD64, sys(ArchAMD64, "close", errno(600), 3), `close(3) = -1 ERRNO_600 (Unknown error 600)`},
		{"unimplemented", ArchAMD64,
			sys(ArchAMD64, "afs_syscall", errno(38), 1, 2),
			`afs_syscall(0x1, 0x2, 0, 0, 0, 0) = -1 ENOSYS (Function not implemented)`},
		{"unknown syscall", ArchAMD64,
			&Syscall{Nr: 500, Args: [6]uint64{1, 2, 3, 4, 5, 6}, Ret: errno(38)},
			`syscall_500(0x1, 0x2, 0x3, 0x4, 0x5, 0x6) = -1 ENOSYS (Function not implemented)`},
		{"unknown syscall ok", ArchARM64,
			&Syscall{Nr: 250, Args: [6]uint64{0xff}, Ret: 7},
			`syscall_250(0xff, 0, 0, 0, 0, 0) = 7`},
	}
	for _, tt := range tests {
		if got := FormatSyscall(tt.arch, tt.s); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

func TestArgValue(t *testing.T) {
	open := withData(sys(ArchAMD64, "openat", 3, atFDCWDArg, 0x7ffc0000a000, 0x80241, 0644), 1, "/etc/passwd")
	openARM := withData(sys(ArchARM64, "openat", 3, atFDCWDArg, 0x7ffc0000a000, 0x84000, 0), 1, "/sys")
	rename := withData(withData(sys(ArchAMD64, "renameat", 0, 5, 0x1000, atFDCWDArg, 0x2000), 1, "old"), 3, "new")
	read := sys(ArchAMD64, "read", 10, 3, 0x1000, 10)
	conn := withData(sys(ArchAMD64, "connect", 0, 3, 0x1000, 16), 1, string(sockaddrIn([4]byte{127, 0, 0, 1}, 80)))
	prctl := sys(ArchAMD64, "prctl", 0, 15, 0x1000, 7)
	unknown := &Syscall{Nr: 500, Args: [6]uint64{1, 2}}

	tests := []struct {
		arch Arch
		s    *Syscall
		name string
		num  uint64
		text string
		ok   bool
	}{
		{ArchAMD64, open, "pathname", 0x7ffc0000a000, "/etc/passwd", true},
		{ArchAMD64, open, "filename", 0x7ffc0000a000, "/etc/passwd", true},
		{ArchAMD64, open, "path", 0x7ffc0000a000, "/etc/passwd", true},
		{ArchAMD64, open, "flags", 0x80241, "O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC", true},
		{ArchAMD64, open, "mode", 0644, "0644", true},
		{ArchAMD64, open, "dirfd", atFDCWDArg, "AT_FDCWD", true},
		{ArchAMD64, open, "dfd", atFDCWDArg, "AT_FDCWD", true},
		{ArchAMD64, open, "arg2", 0x80241, "O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC", true},
		{ArchAMD64, open, "arg5", 0, "0", true},
		{ArchAMD64, open, "arg6", 0, "", false},
		{ArchAMD64, open, "fd", 0, "", false},
		{ArchAMD64, open, "", 0, "", false},
		{ArchARM64, openARM, "flags", 0x84000, "O_RDONLY|O_CLOEXEC|O_DIRECTORY", true},
		{ArchAMD64, rename, "oldpath", 0x1000, "old", true},
		{ArchAMD64, rename, "newname", 0x2000, "new", true},
		{ArchAMD64, rename, "olddirfd", 5, "5", true},
		{ArchAMD64, rename, "newdfd", atFDCWDArg, "AT_FDCWD", true},
		{ArchAMD64, read, "fd", 3, "3", true},
		{ArchAMD64, read, "count", 10, "10", true},
		{ArchAMD64, read, "buf", 0x1000, "0x1000", true},
		{ArchAMD64, conn, "addr", 0x1000, `{sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("127.0.0.1")}`, true},
		{ArchAMD64, prctl, "option", 15, "PR_SET_NAME", true},
		{ArchAMD64, prctl, "arg1", 0x1000, "0x1000", true},
		{ArchAMD64, prctl, "arg2", 7, "0x7", true},
		{ArchAMD64, unknown, "arg1", 2, "0x2", true},
		{ArchAMD64, unknown, "fd", 0, "", false},
	}
	for _, tt := range tests {
		num, text, ok := ArgValue(tt.arch, tt.s, tt.name)
		if num != tt.num || text != tt.text || ok != tt.ok {
			t.Errorf("ArgValue(%s, %q) = %#x, %q, %v; want %#x, %q, %v",
				SyscallName(tt.arch, tt.s.Nr), tt.name, num, text, ok, tt.num, tt.text, tt.ok)
		}
	}
}

// Every syscall must format without panicking, whatever its arguments.
func TestFormatSyscallAll(t *testing.T) {
	for _, a := range []Arch{ArchAMD64, ArchARM64} {
		for nr := uint32(0); nr <= MaxSyscall(a)+2; nr++ {
			s := &Syscall{Nr: nr, Args: [6]uint64{^uint64(0), 1, 2, 3, 4, 5}, Ret: -1}
			for i := range s.Data {
				s.Data[i] = []byte{2, 0, 0}
			}
			got := FormatSyscall(a, s)
			if !strings.HasPrefix(got, SyscallName(a, nr)+"(") || !strings.HasSuffix(got, "= -1 EPERM (Operation not permitted)") {
				t.Errorf("FormatSyscall(%v, %d) = %q", a, nr, got)
			}
		}
	}
}
