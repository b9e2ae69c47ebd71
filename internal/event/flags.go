package event

import (
	"fmt"
	"strconv"
	"strings"
)

// Kinds for arguments that api.go has no name for. They stay unexported
// because only the formatter needs to tell them apart: every other reader may
// treat them as plain integers.
const (
	argLong        ArgKind = 128 + iota // off_t and friends: signed 64-bit, where ArgInt would cut at 32
	argWhence                           // SEEK_SET
	argFcntlCmd                         // F_SETFD
	argFutexOp                          // FUTEX_WAIT_PRIVATE
	argSigHow                           // SIG_BLOCK
	argAccessMode                       // R_OK|W_OK
	argMadvise                          // MADV_DONTNEED
	argEpollOp                          // EPOLL_CTL_ADD
	argShutdownHow                      // SHUT_WR
	argClockID                          // CLOCK_MONOTONIC
	argArchPrctl                        // ARCH_SET_FS
	argPrctlOp                          // PR_SET_NAME
	argWaitOptions                      // WNOHANG|__WALL
	argFdFlags                          // O_CLOEXEC|O_NONBLOCK without an access mode (pipe2, dup3)
	argAccessFlags                      // AT_EACCESS|AT_SYMLINK_NOFOLLOW (faccessat2)
)

// flag names one bit pattern. Tables list flags in the order strace prints
// them, which is not always numeric: a name that covers several bits
// (O_SYNC, O_TMPFILE) comes before the names of its parts so that it wins.
type flag struct {
	bits uint64
	name string
}

// hexString prints v the way C's %#x does, so zero is "0" and not "0x0".
func hexString(v uint64) string {
	if v == 0 {
		return "0"
	}
	return "0x" + strconv.FormatUint(v, 16)
}

// appendFlags writes the names of the flags set in v to b and returns the
// bits that no name covered.
func appendFlags(b *strings.Builder, v uint64, table []flag) uint64 {
	for _, f := range table {
		if f.bits != 0 && v&f.bits == f.bits {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(f.name)
			v &^= f.bits
		}
	}
	return v
}

// appendRest writes bits no table knows as one hex number.
func appendRest(b *strings.Builder, rest uint64) {
	if rest == 0 {
		return
	}
	if b.Len() > 0 {
		b.WriteByte('|')
	}
	b.WriteString(hexString(rest))
}

// formatFlags renders a bit set; zero is what the empty set prints as.
func formatFlags(v uint64, table []flag, zero string) string {
	if v == 0 {
		return zero
	}
	var b strings.Builder
	appendRest(&b, appendFlags(&b, v, table))
	return b.String()
}

// formatEnum renders a value that is one of a set of names, and falls back
// to hex for values the table does not know.
func formatEnum(v uint64, names map[uint64]string) string {
	if n, ok := names[v]; ok {
		return n
	}
	return hexString(v)
}

// Open flags. x86_64 uses the asm-generic values; arm64 moves four of them.
var (
	openFlagsAMD64 = openFlags(0x10000, 0x20000, 0x4000, 0x8000)
	openFlagsARM64 = openFlags(0x4000, 0x8000, 0x10000, 0x20000)
)

func openFlags(directory, nofollow, direct, largefile uint64) []flag {
	const tmpfile = 0x400000
	return []flag{
		{0x40, "O_CREAT"},
		{0x80, "O_EXCL"},
		{0x100, "O_NOCTTY"},
		{0x200, "O_TRUNC"},
		{0x400, "O_APPEND"},
		{0x800, "O_NONBLOCK"},
		{0x101000, "O_SYNC"}, // __O_SYNC|O_DSYNC
		{0x100000, "__O_SYNC"},
		{0x1000, "O_DSYNC"},
		{direct, "O_DIRECT"},
		{largefile, "O_LARGEFILE"},
		{nofollow, "O_NOFOLLOW"},
		{0x40000, "O_NOATIME"},
		{0x80000, "O_CLOEXEC"},
		{0x200000, "O_PATH"},
		{tmpfile | directory, "O_TMPFILE"},
		{tmpfile, "__O_TMPFILE"},
		{directory, "O_DIRECTORY"},
		{0x2000, "O_ASYNC"},
	}
}

func openFlagTable(a Arch) []flag {
	if a == ArchARM64 {
		return openFlagsARM64
	}
	return openFlagsAMD64
}

var accessModes = [4]string{"O_RDONLY", "O_WRONLY", "O_RDWR", "O_ACCMODE"}

// formatOpenFlags always starts with the access mode, because O_RDONLY is
// zero and would otherwise never show.
func formatOpenFlags(a Arch, v uint64) string {
	var b strings.Builder
	b.WriteString(accessModes[v&3])
	appendRest(&b, appendFlags(&b, v&^3, openFlagTable(a)))
	return b.String()
}

// formatFdFlags is for calls that take only O_CLOEXEC and O_NONBLOCK.
func formatFdFlags(a Arch, v uint64) string {
	return formatFlags(v, openFlagTable(a), "0")
}

var fileTypes = map[uint64]string{
	0140000: "S_IFSOCK",
	0120000: "S_IFLNK",
	0100000: "S_IFREG",
	0060000: "S_IFBLK",
	0040000: "S_IFDIR",
	0020000: "S_IFCHR",
	0010000: "S_IFIFO",
}

// formatMode prints permission bits in octal with a leading zero, as chmod
// users write them, and names a file type when one is present (mknod).
func formatMode(v uint64) string {
	var b strings.Builder
	if t := v & 0170000; t != 0 {
		if n, ok := fileTypes[t]; ok {
			b.WriteString(n)
		} else {
			fmt.Fprintf(&b, "%#o", t)
		}
		b.WriteByte('|')
	}
	fmt.Fprintf(&b, "%#03o", v&07777)
	if rest := v &^ 0177777; rest != 0 {
		b.WriteByte('|')
		b.WriteString(hexString(rest))
	}
	return b.String()
}

var (
	protFlagsAMD64 = []flag{
		{0x1, "PROT_READ"},
		{0x2, "PROT_WRITE"},
		{0x4, "PROT_EXEC"},
		{0x8, "PROT_SEM"},
		{0x1000000, "PROT_GROWSDOWN"},
		{0x2000000, "PROT_GROWSUP"},
	}
	protFlagsARM64 = append(protFlagsAMD64[:4:4],
		flag{0x10, "PROT_BTI"},
		flag{0x20, "PROT_MTE"},
		flag{0x1000000, "PROT_GROWSDOWN"},
		flag{0x2000000, "PROT_GROWSUP"},
	)
)

func formatProt(a Arch, v uint64) string {
	if a == ArchARM64 {
		return formatFlags(v, protFlagsARM64, "PROT_NONE")
	}
	return formatFlags(v, protFlagsAMD64, "PROT_NONE")
}

// mapTypes are the values of the MAP_TYPE field (the low four bits): exactly
// one of them applies, so they are an enum rather than flags.
var mapTypes = map[uint64]string{
	0x1: "MAP_SHARED",
	0x2: "MAP_PRIVATE",
	0x3: "MAP_SHARED_VALIDATE",
	0x8: "MAP_DROPPABLE",
}

const (
	mapType      = 0xf
	mapHugeTLB   = 0x40000
	mapHugeShift = 26
)

var (
	mapFlagsAMD64 = []flag{
		{0x10, "MAP_FIXED"},
		{0x20, "MAP_ANONYMOUS"},
		{0x40, "MAP_32BIT"},
		{0x80, "MAP_ABOVE4G"},
		{0x4000, "MAP_NORESERVE"},
		{0x8000, "MAP_POPULATE"},
		{0x10000, "MAP_NONBLOCK"},
		{0x100, "MAP_GROWSDOWN"},
		{0x800, "MAP_DENYWRITE"},
		{0x1000, "MAP_EXECUTABLE"},
		{0x2000, "MAP_LOCKED"},
		{0x20000, "MAP_STACK"},
		{mapHugeTLB, "MAP_HUGETLB"},
		{0x80000, "MAP_SYNC"},
		{0x100000, "MAP_FIXED_NOREPLACE"},
		{0x4000000, "MAP_UNINITIALIZED"},
	}
	// arm64 has no MAP_32BIT or MAP_ABOVE4G; those bits are undefined there.
	mapFlagsARM64 = append(mapFlagsAMD64[:2:2], mapFlagsAMD64[4:]...)
)

// formatMapFlags prints the mapping type first, as strace does. With
// MAP_HUGETLB the top six bits are a page size (log2) rather than flags, and
// they print as strace prints them: "21<<MAP_HUGE_SHIFT" for 2 MiB pages.
func formatMapFlags(a Arch, v uint64) string {
	if v == 0 {
		return "0"
	}
	var b strings.Builder
	if t := v & mapType; t != 0 {
		if n, ok := mapTypes[t]; ok {
			b.WriteString(n)
		} else {
			b.WriteString(hexString(t))
		}
	}
	rest := v &^ mapType
	var huge uint64
	if rest&mapHugeTLB != 0 {
		huge = rest >> mapHugeShift & 0x3f
		rest &^= 0x3f << mapHugeShift
	}
	table := mapFlagsAMD64
	if a == ArchARM64 {
		table = mapFlagsARM64
	}
	rest = appendFlags(&b, rest, table)
	if huge != 0 {
		b.WriteString("|" + strconv.FormatUint(huge, 10) + "<<MAP_HUGE_SHIFT")
	}
	appendRest(&b, rest)
	return b.String()
}

var cloneFlags = []flag{
	{0x100, "CLONE_VM"},
	{0x200, "CLONE_FS"},
	{0x400, "CLONE_FILES"},
	{0x800, "CLONE_SIGHAND"},
	{0x1000, "CLONE_PIDFD"},
	{0x2000, "CLONE_PTRACE"},
	{0x4000, "CLONE_VFORK"},
	{0x8000, "CLONE_PARENT"},
	{0x10000, "CLONE_THREAD"},
	{0x20000, "CLONE_NEWNS"},
	{0x40000, "CLONE_SYSVSEM"},
	{0x80000, "CLONE_SETTLS"},
	{0x100000, "CLONE_PARENT_SETTID"},
	{0x200000, "CLONE_CHILD_CLEARTID"},
	{0x400000, "CLONE_DETACHED"},
	{0x800000, "CLONE_UNTRACED"},
	{0x1000000, "CLONE_CHILD_SETTID"},
	{0x2000000, "CLONE_NEWCGROUP"},
	{0x4000000, "CLONE_NEWUTS"},
	{0x8000000, "CLONE_NEWIPC"},
	{0x10000000, "CLONE_NEWUSER"},
	{0x20000000, "CLONE_NEWPID"},
	{0x40000000, "CLONE_NEWNET"},
	{0x80000000, "CLONE_IO"},
}

// formatCloneFlags prints the flag bits and then the low byte, which is
// not a flag but the signal the parent gets when the child exits (CSIGNAL).
func formatCloneFlags(v uint64) string {
	if v == 0 {
		return "0"
	}
	var b strings.Builder
	appendRest(&b, appendFlags(&b, v&^0xff, cloneFlags))
	if sig := v & 0xff; sig != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		if n := SignalName(int(sig)); n != "" {
			b.WriteString(n)
		} else {
			b.WriteString(hexString(sig))
		}
	}
	return b.String()
}

var fadvice = map[uint64]string{
	0: "POSIX_FADV_NORMAL",
	1: "POSIX_FADV_RANDOM",
	2: "POSIX_FADV_SEQUENTIAL",
	3: "POSIX_FADV_WILLNEED",
	4: "POSIX_FADV_DONTNEED",
	5: "POSIX_FADV_NOREUSE",
}

// atFlags leaves out AT_EACCESS (0x200, faccessat only), which shares its
// bit with AT_REMOVEDIR; unlinkat is by far the more common reader.
var atFlags = []flag{
	{0x100, "AT_SYMLINK_NOFOLLOW"},
	{0x200, "AT_REMOVEDIR"},
	{0x400, "AT_SYMLINK_FOLLOW"},
	{0x800, "AT_NO_AUTOMOUNT"},
	{0x1000, "AT_EMPTY_PATH"},
	{0x2000, "AT_STATX_FORCE_SYNC"},
	{0x4000, "AT_STATX_DONT_SYNC"},
	{0x8000, "AT_RECURSIVE"},
}

// accessAtFlags are faccessat2's: there 0x200 is AT_EACCESS.
var accessAtFlags = []flag{
	{0x100, "AT_SYMLINK_NOFOLLOW"},
	{0x200, "AT_EACCESS"},
	{0x1000, "AT_EMPTY_PATH"},
}

var sockFamilies = map[uint64]string{
	0:  "AF_UNSPEC",
	1:  "AF_UNIX",
	2:  "AF_INET",
	3:  "AF_AX25",
	4:  "AF_IPX",
	5:  "AF_APPLETALK",
	6:  "AF_NETROM",
	7:  "AF_BRIDGE",
	8:  "AF_ATMPVC",
	9:  "AF_X25",
	10: "AF_INET6",
	11: "AF_ROSE",
	12: "AF_DECnet",
	13: "AF_NETBEUI",
	14: "AF_SECURITY",
	15: "AF_KEY",
	16: "AF_NETLINK",
	17: "AF_PACKET",
	18: "AF_ASH",
	19: "AF_ECONET",
	20: "AF_ATMSVC",
	21: "AF_RDS",
	22: "AF_SNA",
	23: "AF_IRDA",
	24: "AF_PPPOX",
	25: "AF_WANPIPE",
	26: "AF_LLC",
	27: "AF_IB",
	28: "AF_MPLS",
	29: "AF_CAN",
	30: "AF_TIPC",
	31: "AF_BLUETOOTH",
	32: "AF_IUCV",
	33: "AF_RXRPC",
	34: "AF_ISDN",
	35: "AF_PHONET",
	36: "AF_IEEE802154",
	37: "AF_CAIF",
	38: "AF_ALG",
	39: "AF_NFC",
	40: "AF_VSOCK",
	41: "AF_KCM",
	42: "AF_QIPCRTR",
	43: "AF_SMC",
	44: "AF_XDP",
	45: "AF_MCTP",
}

var sockTypes = map[uint64]string{
	1:  "SOCK_STREAM",
	2:  "SOCK_DGRAM",
	3:  "SOCK_RAW",
	4:  "SOCK_RDM",
	5:  "SOCK_SEQPACKET",
	6:  "SOCK_DCCP",
	10: "SOCK_PACKET",
}

// sockFlags share their values with O_CLOEXEC and O_NONBLOCK on x86_64 and
// arm64 alike.
var sockFlags = []flag{
	{0x80000, "SOCK_CLOEXEC"},
	{0x800, "SOCK_NONBLOCK"},
}

// formatSockType prints the type (low four bits) and then the flags that
// socket(2) and socketpair(2) accept in the same argument.
func formatSockType(v uint64) string {
	var b strings.Builder
	b.WriteString(formatEnum(v&0xf, sockTypes))
	appendRest(&b, appendFlags(&b, v&^0xf, sockFlags))
	return b.String()
}

var whence = map[uint64]string{
	0: "SEEK_SET",
	1: "SEEK_CUR",
	2: "SEEK_END",
	3: "SEEK_DATA",
	4: "SEEK_HOLE",
}

var fcntlCmds = map[uint64]string{
	0:    "F_DUPFD",
	1:    "F_GETFD",
	2:    "F_SETFD",
	3:    "F_GETFL",
	4:    "F_SETFL",
	5:    "F_GETLK",
	6:    "F_SETLK",
	7:    "F_SETLKW",
	8:    "F_SETOWN",
	9:    "F_GETOWN",
	10:   "F_SETSIG",
	11:   "F_GETSIG",
	15:   "F_SETOWN_EX",
	16:   "F_GETOWN_EX",
	17:   "F_GETOWNER_UIDS",
	36:   "F_OFD_GETLK",
	37:   "F_OFD_SETLK",
	38:   "F_OFD_SETLKW",
	1024: "F_SETLEASE",
	1025: "F_GETLEASE",
	1026: "F_NOTIFY",
	1027: "F_DUPFD_QUERY",
	1028: "F_CREATED_QUERY",
	1029: "F_CANCELLK",
	1030: "F_DUPFD_CLOEXEC",
	1031: "F_SETPIPE_SZ",
	1032: "F_GETPIPE_SZ",
	1033: "F_ADD_SEALS",
	1034: "F_GET_SEALS",
	1035: "F_GET_RW_HINT",
	1036: "F_SET_RW_HINT",
	1037: "F_GET_FILE_RW_HINT",
	1038: "F_SET_FILE_RW_HINT",
}

var futexCmds = map[uint64]string{
	0:  "FUTEX_WAIT",
	1:  "FUTEX_WAKE",
	2:  "FUTEX_FD",
	3:  "FUTEX_REQUEUE",
	4:  "FUTEX_CMP_REQUEUE",
	5:  "FUTEX_WAKE_OP",
	6:  "FUTEX_LOCK_PI",
	7:  "FUTEX_UNLOCK_PI",
	8:  "FUTEX_TRYLOCK_PI",
	9:  "FUTEX_WAIT_BITSET",
	10: "FUTEX_WAKE_BITSET",
	11: "FUTEX_WAIT_REQUEUE_PI",
	12: "FUTEX_CMP_REQUEUE_PI",
	13: "FUTEX_LOCK_PI2",
}

// formatFutexOp folds FUTEX_PRIVATE_FLAG into the command name
// (FUTEX_WAIT_PRIVATE) the way glibc's headers and strace spell it.
func formatFutexOp(v uint64) string {
	const private, realtime = 128, 256
	cmd, ok := futexCmds[v&^(private|realtime)]
	if !ok {
		return hexString(v)
	}
	if v&private != 0 {
		cmd += "_PRIVATE"
	}
	if v&realtime != 0 {
		cmd += "|FUTEX_CLOCK_REALTIME"
	}
	return cmd
}

var sigHows = map[uint64]string{0: "SIG_BLOCK", 1: "SIG_UNBLOCK", 2: "SIG_SETMASK"}

var accessFlags = []flag{{4, "R_OK"}, {2, "W_OK"}, {1, "X_OK"}}

var madvice = map[uint64]string{
	0:   "MADV_NORMAL",
	1:   "MADV_RANDOM",
	2:   "MADV_SEQUENTIAL",
	3:   "MADV_WILLNEED",
	4:   "MADV_DONTNEED",
	8:   "MADV_FREE",
	9:   "MADV_REMOVE",
	10:  "MADV_DONTFORK",
	11:  "MADV_DOFORK",
	12:  "MADV_MERGEABLE",
	13:  "MADV_UNMERGEABLE",
	14:  "MADV_HUGEPAGE",
	15:  "MADV_NOHUGEPAGE",
	16:  "MADV_DONTDUMP",
	17:  "MADV_DODUMP",
	18:  "MADV_WIPEONFORK",
	19:  "MADV_KEEPONFORK",
	20:  "MADV_COLD",
	21:  "MADV_PAGEOUT",
	22:  "MADV_POPULATE_READ",
	23:  "MADV_POPULATE_WRITE",
	24:  "MADV_DONTNEED_LOCKED",
	25:  "MADV_COLLAPSE",
	100: "MADV_HWPOISON",
	101: "MADV_SOFT_OFFLINE",
	102: "MADV_GUARD_INSTALL",
	103: "MADV_GUARD_REMOVE",
}

var epollOps = map[uint64]string{1: "EPOLL_CTL_ADD", 2: "EPOLL_CTL_DEL", 3: "EPOLL_CTL_MOD"}

var shutdownHows = map[uint64]string{0: "SHUT_RD", 1: "SHUT_WR", 2: "SHUT_RDWR"}

var clockIDs = map[uint64]string{
	0:  "CLOCK_REALTIME",
	1:  "CLOCK_MONOTONIC",
	2:  "CLOCK_PROCESS_CPUTIME_ID",
	3:  "CLOCK_THREAD_CPUTIME_ID",
	4:  "CLOCK_MONOTONIC_RAW",
	5:  "CLOCK_REALTIME_COARSE",
	6:  "CLOCK_MONOTONIC_COARSE",
	7:  "CLOCK_BOOTTIME",
	8:  "CLOCK_REALTIME_ALARM",
	9:  "CLOCK_BOOTTIME_ALARM",
	11: "CLOCK_TAI",
}

var archPrctlCodes = map[uint64]string{
	0x1001: "ARCH_SET_GS",
	0x1002: "ARCH_SET_FS",
	0x1003: "ARCH_GET_FS",
	0x1004: "ARCH_GET_GS",
	0x1011: "ARCH_GET_CPUID",
	0x1012: "ARCH_SET_CPUID",
	0x1021: "ARCH_GET_XCOMP_SUPP",
	0x1022: "ARCH_GET_XCOMP_PERM",
	0x1023: "ARCH_REQ_XCOMP_PERM",
	0x1024: "ARCH_GET_XCOMP_GUEST_PERM",
	0x1025: "ARCH_REQ_XCOMP_GUEST_PERM",
	0x2001: "ARCH_MAP_VDSO_X32",
	0x2002: "ARCH_MAP_VDSO_32",
	0x2003: "ARCH_MAP_VDSO_64",
	0x4001: "ARCH_GET_UNTAG_MASK",
	0x4002: "ARCH_ENABLE_TAGGED_ADDR",
	0x4003: "ARCH_GET_MAX_TAG_BITS",
	0x4004: "ARCH_FORCE_TAGGED_SVA",
	0x5001: "ARCH_SHSTK_ENABLE",
	0x5002: "ARCH_SHSTK_DISABLE",
	0x5003: "ARCH_SHSTK_LOCK",
	0x5004: "ARCH_SHSTK_UNLOCK",
	0x5005: "ARCH_SHSTK_STATUS",
}

// prctlOps holds the options that show up in ordinary traces; the rest print
// in hex.
var prctlOps = map[uint64]string{
	1:          "PR_SET_PDEATHSIG",
	2:          "PR_GET_PDEATHSIG",
	3:          "PR_GET_DUMPABLE",
	4:          "PR_SET_DUMPABLE",
	7:          "PR_GET_KEEPCAPS",
	8:          "PR_SET_KEEPCAPS",
	15:         "PR_SET_NAME",
	16:         "PR_GET_NAME",
	21:         "PR_GET_SECCOMP",
	22:         "PR_SET_SECCOMP",
	23:         "PR_CAPBSET_READ",
	24:         "PR_CAPBSET_DROP",
	27:         "PR_GET_SECUREBITS",
	28:         "PR_SET_SECUREBITS",
	29:         "PR_SET_TIMERSLACK",
	30:         "PR_GET_TIMERSLACK",
	35:         "PR_SET_MM",
	36:         "PR_SET_CHILD_SUBREAPER",
	37:         "PR_GET_CHILD_SUBREAPER",
	38:         "PR_SET_NO_NEW_PRIVS",
	39:         "PR_GET_NO_NEW_PRIVS",
	41:         "PR_SET_THP_DISABLE",
	42:         "PR_GET_THP_DISABLE",
	47:         "PR_CAP_AMBIENT",
	52:         "PR_GET_SPECULATION_CTRL",
	53:         "PR_SET_SPECULATION_CTRL",
	0x53564d41: "PR_SET_VMA",
	0x59616d61: "PR_SET_PTRACER",
}

var waitOptions = []flag{
	{0x1, "WNOHANG"},
	{0x2, "WUNTRACED"},
	{0x4, "WEXITED"},
	{0x8, "WCONTINUED"},
	{0x1000000, "WNOWAIT"},
	{0x20000000, "__WNOTHREAD"},
	{0x40000000, "__WALL"},
	{0x80000000, "__WCLONE"},
}
