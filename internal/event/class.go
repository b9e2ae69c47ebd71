package event

// Classes of syscalls by what they are for, which several consumers (the
// doctor's detectors, the probe's configuration) must agree on: each is
// defined here once. Names are the kernel's, the same on every arch; a
// name an arch lacks is never seen there.

// Class is a set of classes a syscall belongs to.
type Class uint16

const (
	// Waits: the call's whole purpose is to wait (for time, an event, a
	// child, a signal, a message): its time is never a stall, whatever
	// its stack.
	Waits Class = 1 << iota
	// MayWait: the call waits by design when what it asks for is not
	// there yet (a read of a pipe or a socket, an accept, a lock), and
	// every call of Waits: a slow one without a stack may have waited as
	// asked.
	MayWait
	// Polls: the poll family, where an event loop waits.
	Polls
	// MakesFD: the call allocates a descriptor (two for pipe and
	// socketpair; fcntl only as F_DUPFD): EMFILE or ENFILE from it means
	// none was left.
	MakesFD
	// SyncsDevice: the call waits for the storage device by design (fsync
	// and kin).
	SyncsDevice
	// AsksIO: I/O by design: its waits for the device are what it is for,
	// or it manages the page cache on purpose; every call of SyncsDevice.
	AsksIO
	// NeverWaits: the call waits for nothing: a slow one was kept off the
	// CPU or held at its exit, not asked to wait.
	NeverWaits
	// MovesBytes: the call copies as many bytes as it returns (the read
	// and write families, copy_file_range, sendfile, splice, getrandom):
	// its time grows with its return value.
	MovesBytes
)

var classNames = map[Class][]string{
	Waits: {
		"poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2", "nanosleep",
		"clock_nanosleep", "wait4", "waitid", "pause", "rt_sigsuspend", "rt_sigtimedwait", "futex_waitv",
		"io_getevents", "msgrcv", "semtimedop", "mq_timedreceive",
	},
	// and Waits
	MayWait: {
		"read", "readv", "pread64", "recvfrom", "recvmsg", "recvmmsg", "futex", "accept", "io_uring_enter",
		"semop", "flock", "write", "sendto", "sendmsg",
	},
	Polls: {
		"epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "pselect6",
	},
	MakesFD: {
		"open", "openat", "openat2", "creat", "open_by_handle_at", "open_tree", "socket", "socketpair", "accept",
		"accept4", "pipe", "pipe2", "dup", "dup2", "dup3", "fcntl", "epoll_create", "epoll_create1", "eventfd",
		"eventfd2", "signalfd", "signalfd4", "timerfd_create", "inotify_init", "inotify_init1", "fanotify_init",
		"memfd_create", "memfd_secret", "userfaultfd", "perf_event_open", "bpf", "pidfd_open", "pidfd_getfd",
		"io_uring_setup", "mq_open", "fsopen", "fsmount", "fspick", "landlock_create_ruleset",
	},
	SyncsDevice: {
		"fsync", "fdatasync", "sync", "syncfs", "sync_file_range", "msync",
	},
	// and SyncsDevice
	AsksIO: {
		"read", "pread64", "readv", "preadv", "preadv2", "sendfile", "splice", "copy_file_range", "io_uring_enter",
		"io_getevents", "io_submit", "io_pgetevents", "getdents64", "getdents", "readahead", "fadvise64", "execve",
		"execveat",
	},
	MovesBytes: {
		"read", "readv", "pread64", "preadv", "preadv2", "write", "writev", "pwrite64", "pwritev", "pwritev2",
		"copy_file_range", "sendfile", "splice", "tee", "vmsplice", "getrandom", "recvfrom", "recvmsg", "sendto",
		"sendmsg", "process_vm_readv", "process_vm_writev",
	},
	NeverWaits: {
		"getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid", "uname", "umask", "getcwd",
		"getrlimit", "prlimit64", "sched_getaffinity", "rt_sigaction", "rt_sigprocmask", "sigaltstack",
		"getsockname", "getpeername", "getsockopt", "setsockopt", "socket", "bind", "listen", "dup", "dup2",
		"dup3", "pipe2", "eventfd2", "epoll_create1", "epoll_ctl", "kill", "tgkill", "tkill", "set_tid_address",
		"set_robust_list", "arch_prctl",
	},
}

var classes = func() map[string]Class {
	m := map[string]Class{}
	for c, names := range classNames {
		for _, n := range names {
			m[n] |= c
		}
	}
	for n, c := range m {
		if c&Waits != 0 {
			m[n] |= MayWait
		}
		if c&SyncsDevice != 0 {
			m[n] |= AsksIO
		}
	}
	return m
}()

// Is reports whether the syscall named name belongs to any of c.
func Is(name string, c Class) bool { return classes[name]&c != 0 }

// Names lists the syscalls of any of c.
func Names(c Class) []string {
	var out []string
	for n, k := range classes {
		if k&c != 0 {
			out = append(out, n)
		}
	}
	return out
}

// DefaultSlow is the bar, in ns, from which a syscall is slow unless the
// user says otherwise (--slow): the probe carries a slow call's sleeps from
// it, and the doctor calls nothing under it slow. 10 ms is a frame at
// 100 Hz, the smallest stall a person or a request's latency budget
// notices.
const DefaultSlow = 10_000_000
