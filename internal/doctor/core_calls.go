package doctor

// What a call is for, where its name is not enough (event.Is has the
// classes by name): a vfork's wait, a call a signal interrupted, a
// non-blocking flag, a descriptor made by fcntl, newer calls and their
// fallbacks.

import (
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/event"
)

// vforkCall reports a vfork, or a clone with CLONE_VFORK: the parent
// waits for its child to exec or exit, by design (vforkWait, without a
// stack to show it).
func vforkCall(name string, sc *event.Syscall) bool {
	const cloneVfork = 0x4000
	return name == "vfork" || name == "clone" && sc.Args[0]&cloneVfork != 0
}

// interrupted: the call returned for a signal (EINTR, or a restart the
// kernel turns into one).
func interrupted(ret int64) bool { return ret == -4 || ret <= -512 && ret >= -516 }

// nonBlocking reports a call made on a non-blocking socket or with a
// non-blocking flag: it should never sleep.
func nonBlocking(arch event.Arch, sc *event.Syscall) bool {
	spec := event.Lookup(arch, sc.Nr)
	if spec == nil {
		return false
	}
	for i, a := range spec.Args {
		if i < 6 && (a.Kind == event.ArgAccept4Flags || a.Kind == event.ArgSockType || a.Kind == event.ArgOpenFlags) &&
			strings.Contains(event.FormatArg(a, sc.Args[i], nil, false), "NONBLOCK") {
			return true
		}
	}
	return false
}

// sleepsTracked reports that a slow call (Host.slowBar) without sleep
// records never switched out, so ran on the CPU: live, in a capture with
// any sleep record (stacked), or in one whose header says every call that
// slow carries its sleeps (stacks_slow).
func sleepsTracked(env *Env, stacked bool) bool {
	if env.Host.Live || stacked {
		return true
	}
	v, err := strconv.ParseUint(env.Host.Meta["stacks_slow"], 10, 64)
	return err == nil && v <= env.Host.slowBar()
}

// queued is the time the call spent runnable without a CPU: the CPUs'
// queue, which grows with the host's load, not with the process. The
// kernel's count covers every call where switches are followed, and every
// switch of the call; the preempted sleeps (and yields at a rescheduling
// point) only the slow calls that carry them, and only the places their
// slots kept, but they are all a capture older than the count has. Without
// the count for the fast calls, a busy neighbour's preemptions stayed in
// the calls under the slow threshold and were taken out of those above it:
// map32's forks then looked flat (busy-neighbour's misses).
func queued(s *event.Syscall) uint64 {
	var pre uint64
	for i := range s.Sleeps {
		if preempted(&s.Sleeps[i]) {
			pre += s.Sleeps[i].Duration
		}
	}
	return max(pre, s.Queued)
}

// fallbacks are the older calls a libc or runtime uses when a newer one is
// refused, and what the newer one is for.
var fallbacks = map[string]struct {
	older []string
	use   string
}{
	"clone3":                  {[]string{"clone", "fork", "vfork"}, "creating threads and processes (glibc ≥ 2.34's pthread_create, fork and posix_spawn)"},
	"faccessat2":              {[]string{"faccessat", "access", "newfstatat", "fstatat64"}, "access checks with the effective ids (glibc ≥ 2.33's faccessat with AT_EACCESS, bash's [ -x FILE ])"},
	"openat2":                 {[]string{"openat", "open"}, "opening files with resolve restrictions"},
	"close_range":             {[]string{"close"}, "closing every descriptor before exec (glibc ≥ 2.34's closefrom, Python's subprocess)"},
	"statx":                   {[]string{"newfstatat", "fstat", "lstat", "stat", "fstatat64"}, "stat (coreutils, glibc on some ABIs, Rust's std)"},
	"epoll_pwait2":            {[]string{"epoll_pwait", "epoll_wait"}, "waiting for events with a nanosecond timeout"},
	"pidfd_open":              {nil, "waiting for or signalling a process without pid reuse races"},
	"pidfd_send_signal":       {[]string{"kill", "tgkill"}, "signalling a process by pidfd"},
	"rseq":                    {nil, "restartable sequences (glibc ≥ 2.35 registers one per thread; without it sched_getcpu is slower)"},
	"getrandom":               {[]string{"openat", "open", "read"}, "random numbers without /dev/urandom"},
	"copy_file_range":         {[]string{"read", "write", "sendfile", "splice"}, "copying files in the kernel"},
	"fchmodat2":               {[]string{"fchmodat"}, "chmod with flags (glibc ≥ 2.39's fchmodat with AT_SYMLINK_NOFOLLOW)"},
	"futex_waitv":             {[]string{"futex"}, "waiting on several futexes"},
	"preadv2":                 {[]string{"preadv", "pread64"}, "reads with per-call flags"},
	"pwritev2":                {[]string{"pwritev", "pwrite64"}, "writes with per-call flags"},
	"mount_setattr":           {[]string{"mount"}, "changing mount attributes"},
	"membarrier":              {nil, "process-wide memory barriers (language runtimes)"},
	"memfd_secret":            {nil, "secret memory"},
	"landlock_create_ruleset": {nil, "sandboxing itself (the program goes on without it)"},
}

const (
	emfile = 24
	enfile = 23
	enospc = 28
	edquot = 122
)

// createsFD says whether s is a call that allocates a descriptor.
func createsFD(a event.Arch, s *event.Syscall) bool {
	name := event.SyscallName(a, s.Nr)
	if name == "fcntl" {
		return s.Args[1] == 0 || s.Args[1] == 1030 // F_DUPFD, F_DUPFD_CLOEXEC
	}
	return event.Is(name, event.MakesFD)
}

// fdExhausted says whether s failed for want of a descriptor: the calls
// fd-exhaustion reports, which error-storm leaves to it. inotify_init's
// EMFILE is not one: the per-user instance limit answers with the same
// errno, and inotifyRefused's detectors tell the two apart.
func fdExhausted(a event.Arch, s *event.Syscall) bool {
	if s.Ret != -emfile && s.Ret != -enfile {
		return false
	}
	name := event.SyscallName(a, s.Nr)
	return createsFD(a, s) && !inotifyRefused(name, int(-s.Ret))
}

// inotifyRefused says whether a call failing with errno is one a per-user
// inotify limit refuses: inotify_add_watch's ENOSPC, which the kernel
// returns for nothing but fs.inotify.max_user_watches (or a user
// namespace's max_inotify_watches) reached, and inotify_init's EMFILE,
// max_user_instances reached or the descriptor table full. These are
// inotify-watch-limit's and inotify-instance-limit's; fd-exhaustion and
// error-storm leave them alone.
func inotifyRefused(name string, errno int) bool {
	switch name {
	case "inotify_add_watch":
		return errno == enospc
	case "inotify_init", "inotify_init1":
		return errno == emfile
	}
	return false
}
