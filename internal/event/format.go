package event

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/dns"
)

const atFDCWD = -100

// FormatArg renders one argument the way strace does. Flags decode with their
// x86_64 values, since nothing here says which arch the value came from;
// FormatSyscall and ArgValue know the arch and decode arm64 values too.
func FormatArg(spec ArgSpec, v uint64, data []byte, trunc bool) string {
	return formatArg(ArchAMD64, spec, v, data, trunc)
}

func formatArg(a Arch, spec ArgSpec, v uint64, data []byte, trunc bool) string {
	switch spec.Kind {
	case ArgInt, ArgFd:
		// C int: the upper half of the register is not part of the value.
		return strconv.Itoa(int(int32(v)))
	case ArgUint:
		return strconv.FormatUint(v, 10)
	case argLong:
		return strconv.FormatInt(int64(v), 10)
	case ArgHex:
		return hexString(v)
	case ArgPtr:
		return formatPtr(v)
	case ArgDirFd:
		if int32(v) == atFDCWD {
			return "AT_FDCWD"
		}
		return strconv.Itoa(int(int32(v)))
	case ArgPath, ArgString:
		if data == nil {
			return formatPtr(v)
		}
		if trunc {
			return strconv.Quote(string(data)) + "..."
		}
		return strconv.Quote(string(data))
	case ArgSockaddr, ArgSockaddrOut:
		if len(data) == 0 {
			return formatPtr(v)
		}
		return FormatSockaddr(data)
	case ArgDNSQuery, ArgDNSMmsg, ArgDNSMmsgLen, ArgDNSIov, ArgDNSIovLen:
		text := formatPtr(v)
		if spec.Kind == ArgDNSMmsgLen || spec.Kind == ArgDNSIovLen {
			text = strconv.FormatUint(v, 10)
		}
		if q, ok := dns.Parse(data); ok {
			text += " [dns " + q.String() + "]"
		}
		return text
	case ArgDNSAnswer:
		if a, ok := dns.ParseAnswer(data); ok {
			return formatPtr(v) + " [dns " + a.String() + "]"
		}
		return formatPtr(v)
	case ArgOpenFlags:
		return formatOpenFlags(a, v)
	case argFdFlags:
		return formatFdFlags(a, v)
	case ArgMode:
		return formatMode(v)
	case ArgProt:
		return formatProt(a, v)
	case ArgMapFlags:
		return formatMapFlags(a, v)
	case ArgCloneFlags:
		return formatCloneFlags(v)
	case ArgFadvise:
		return formatEnum(v, fadvice)
	case ArgSignal:
		if n := SignalName(int(int32(v))); n != "" {
			return n
		}
		return strconv.Itoa(int(int32(v)))
	case ArgSockFamily:
		return formatEnum(v, sockFamilies)
	case ArgSockType:
		return formatSockType(v)
	case ArgAtFlags:
		return formatFlags(v, atFlags, "0")
	case ArgAccept4Flags:
		return formatFlags(v, sockFlags, "0")
	case argWhence:
		return formatEnum(v, whence)
	case argFcntlCmd:
		return formatEnum(v, fcntlCmds)
	case argFutexOp:
		return formatFutexOp(v)
	case argSigHow:
		return formatEnum(v, sigHows)
	case argAccessMode:
		return formatFlags(v, accessFlags, "F_OK")
	case argAccessFlags:
		return formatFlags(v, accessAtFlags, "0")
	case argMadvise:
		return formatEnum(v, madvice)
	case argEpollOp:
		return formatEnum(v, epollOps)
	case argShutdownHow:
		return formatEnum(v, shutdownHows)
	case argClockID:
		return formatEnum(v, clockIDs)
	case argArchPrctl:
		return formatEnum(v, archPrctlCodes)
	case argPrctlOp:
		return formatEnum(v, prctlOps)
	case argWaitOptions:
		return formatFlags(v, waitOptions, "0")
	}
	return hexString(v)
}

func formatPtr(v uint64) string {
	if v == 0 {
		return "NULL"
	}
	return hexString(v)
}

// FormatSyscall renders a call as strace would print it:
//
//	openat(AT_FDCWD, "/etc/ld.so.cache", O_RDONLY|O_CLOEXEC) = 3
//	connect(3, {sa_family=AF_INET, ...}, 16) = -1 ECONNREFUSED (Connection refused)
//
// A number the arch does not define prints as syscall_<nr> with six hex
// arguments, and a call that never returned ends in "= ?".
func FormatSyscall(a Arch, s *Syscall) string {
	var b strings.Builder
	spec := Lookup(a, s.Nr)
	if spec == nil {
		b.WriteString(SyscallName(a, s.Nr))
		b.WriteByte('(')
		for i, v := range s.Args {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(hexString(v))
		}
	} else {
		b.WriteString(spec.Name)
		b.WriteByte('(')
		for i := range shownArgs(spec, s) {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(formatArg(a, spec.Args[i], s.Args[i], s.Data[i], s.Truncated[i]))
		}
	}
	b.WriteString(") = ")
	b.WriteString(formatRet(spec, s))
	return b.String()
}

// shownArgs is how many arguments to print. It is every argument of the
// spec except open's and openat's mode, which the kernel reads only with
// O_CREAT or O_TMPFILE and strace leaves out otherwise, so that the common
// open reads the same in both tools.
func shownArgs(spec *Spec, s *Syscall) int {
	n := min(len(spec.Args), len(s.Args))
	flags := -1
	switch spec.Name {
	case "open":
		flags = 1
	case "openat":
		flags = 2
	}
	const creat, tmpfile = 0x40, 0x400000
	if flags >= 0 && n == flags+2 && s.Args[flags]&(creat|tmpfile) == 0 {
		n--
	}
	return n
}

// FormatReturn is a syscall's return value as FormatSyscall writes it.
func FormatReturn(a Arch, s *Syscall) string { return formatRet(Lookup(a, s.Nr), s) }

func formatRet(spec *Spec, s *Syscall) string {
	switch {
	case s.Unfinished:
		return "?"
	case s.Failed():
		n := int(-s.Ret)
		name := ErrnoName(n)
		if name == "" {
			name = "ERRNO_" + strconv.Itoa(n)
		}
		return "-1 " + name + " (" + ErrnoDesc(n) + ")"
	case spec == nil:
		return strconv.FormatInt(s.Ret, 10)
	case spec.RetKind == ArgHex:
		return hexString(uint64(s.Ret))
	case spec.RetKind == ArgPtr:
		return formatPtr(uint64(s.Ret))
	}
	return strconv.FormatInt(s.Ret, 10)
}

// argAliases lets a filter use the kernel's argument names, or a shorter
// one, for the man-page names the table uses.
var argAliases = [][]string{
	{"pathname", "filename", "path"},
	{"dirfd", "dfd"},
	{"oldpath", "oldname"},
	{"newpath", "newname"},
	{"olddirfd", "olddfd"},
	{"newdirfd", "newdfd"},
}

// argIndex finds the argument called name: by name first, then by any alias
// of it, then as "argN", the Nth register counting from 0.
func argIndex(spec *Spec, name string) int {
	if spec != nil {
		for i, as := range spec.Args {
			if as.Name == name {
				return i
			}
		}
		for _, group := range argAliases {
			for _, alias := range group {
				if alias != name {
					continue
				}
				for i, as := range spec.Args {
					for _, other := range group {
						if as.Name == other {
							return i
						}
					}
				}
			}
		}
	}
	if rest, ok := strings.CutPrefix(name, "arg"); ok && len(rest) == 1 && rest[0] >= '0' && rest[0] <= '5' {
		return int(rest[0] - '0')
	}
	return -1
}

// ArgValue returns the raw value and the rendered text of the argument called
// name, for the filter language. A captured path or string comes back as is,
// not quoted, so "evt.arg.pathname = /etc/passwd" compares plain strings.
// Besides the names in the Spec it accepts the kernel's spelling of the usual
// ones (filename, dfd, oldname ...) and "arg0" to "arg5" by position.
func ArgValue(a Arch, s *Syscall, name string) (num uint64, text string, ok bool) {
	spec := Lookup(a, s.Nr)
	i := argIndex(spec, name)
	if i < 0 || i >= len(s.Args) {
		return 0, "", false
	}
	v := s.Args[i]
	if spec == nil || i >= len(spec.Args) {
		return v, hexString(v), true
	}
	as := spec.Args[i]
	if (as.Kind == ArgPath || as.Kind == ArgString) && s.Data[i] != nil {
		return v, string(s.Data[i]), true
	}
	return v, formatArg(a, as, v, s.Data[i], s.Truncated[i]), true
}

// Address families whose layout FormatSockaddr knows.
const (
	afUnix    = 1
	afInet    = 2
	afInet6   = 10
	afNetlink = 16
	afPacket  = 17
)

// FormatSockaddr renders a struct sockaddr as strace does, for example
// {sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("127.0.0.1")}.
// sa_family is in host order, which is little-endian on every arch sysray
// supports; ports and IPv4 flow labels are in network order. An empty b
// gives "".
func FormatSockaddr(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) < 2 {
		return "{sa_family=???, sa_data=" + strconv.Quote(string(b)) + "}"
	}
	fam := binary.LittleEndian.Uint16(b)
	head := "{sa_family=" + formatEnum(uint64(fam), sockFamilies)
	switch {
	case fam == afUnix:
		p := b[2:]
		switch {
		case len(p) == 0:
			return head + "}"
		case p[0] == 0:
			// Abstract names are not NUL-terminated: every byte up to the
			// address length is part of the name.
			return head + ", sun_path=@" + strconv.Quote(string(p[1:])) + "}"
		}
		if i := strings.IndexByte(string(p), 0); i >= 0 {
			p = p[:i]
		}
		return head + ", sun_path=" + strconv.Quote(string(p)) + "}"
	case fam == afInet && len(b) >= 8:
		ip := netip.AddrFrom4([4]byte(b[4:8]))
		return head + ", sin_port=htons(" + strconv.Itoa(int(binary.BigEndian.Uint16(b[2:]))) +
			"), sin_addr=inet_addr(\"" + ip.String() + "\")}"
	case fam == afInet6 && len(b) >= 24:
		ip := netip.AddrFrom16([16]byte(b[8:24]))
		s := head + ", sin6_port=htons(" + strconv.Itoa(int(binary.BigEndian.Uint16(b[2:]))) +
			"), sin6_flowinfo=htonl(" + strconv.FormatUint(uint64(binary.BigEndian.Uint32(b[4:])), 10) +
			"), inet_pton(AF_INET6, \"" + ip.String() + "\", &sin6_addr)"
		if len(b) >= 28 {
			s += ", sin6_scope_id=" + strconv.FormatUint(uint64(binary.LittleEndian.Uint32(b[24:])), 10)
		}
		return s + "}"
	case fam == afNetlink && len(b) >= 12:
		return head + ", nl_pid=" + strconv.FormatUint(uint64(binary.LittleEndian.Uint32(b[4:])), 10) +
			", nl_groups=" + hexString(uint64(binary.LittleEndian.Uint32(b[8:]))) + "}"
	case fam == afPacket && len(b) >= 12:
		var sb strings.Builder
		sb.WriteString(head)
		sb.WriteString(", sll_protocol=htons(" + hexString(uint64(binary.BigEndian.Uint16(b[2:]))) + ")")
		sb.WriteString(", sll_ifindex=" + strconv.Itoa(int(int32(binary.LittleEndian.Uint32(b[4:])))))
		sb.WriteString(", sll_hatype=" + strconv.Itoa(int(binary.LittleEndian.Uint16(b[8:]))))
		sb.WriteString(", sll_pkttype=" + strconv.Itoa(int(b[10])))
		halen := int(b[11])
		sb.WriteString(", sll_halen=" + strconv.Itoa(halen))
		hw := b[12:]
		hw = hw[:min(halen, len(hw), 8)]
		sb.WriteString(", sll_addr=[")
		for i, c := range hw {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(hexString(uint64(c)))
		}
		sb.WriteString("]}")
		return sb.String()
	}
	return head + ", sa_data=" + strconv.Quote(string(b[2:])) + "}"
}
