package event

import (
	"strconv"
	"sync"
)

// Helpers that keep the table below one line per syscall.
func arg(name string, k ArgKind) ArgSpec { return ArgSpec{Name: name, Kind: k, LenArg: -1} }
func fd(name string) ArgSpec             { return arg(name, ArgFd) }
func dirfd(name string) ArgSpec          { return arg(name, ArgDirFd) }
func path(name string) ArgSpec           { return arg(name, ArgPath) }
func str(name string) ArgSpec            { return arg(name, ArgString) }
func ptr(name string) ArgSpec            { return arg(name, ArgPtr) }
func num(name string) ArgSpec            { return arg(name, ArgInt) }
func size(name string) ArgSpec           { return arg(name, ArgUint) }
func off(name string) ArgSpec            { return arg(name, argLong) }
func hx(name string) ArgSpec             { return arg(name, ArgHex) }

// addr is a socket address whose length is (or is pointed to by) argument lenArg.
func addr(name string, k ArgKind, lenArg int8) ArgSpec {
	return ArgSpec{Name: name, Kind: k, LenArg: lenArg}
}

func sc(name string, ret ArgKind, args ...ArgSpec) Spec {
	return Spec{Name: name, Args: args, RetKind: ret}
}

// specTable describes syscalls by name, so x86_64 and arm64 share it; a
// syscall that exists on only one of them simply never matches on the other.
// Argument names are the man pages' (openat's dirfd and pathname rather than
// the kernel's dfd and filename) because that is what users type in filters;
// ArgValue also accepts the kernel's spelling. Argument order and count are
// the kernel's, which is what the registers hold: faccessat and fchmodat have
// no flags argument, and the 64-bit preadv2 has an unused high half of the
// offset before its flags. The man pages number prctl's and keyctl's untyped
// arguments from arg2; here they are named by position (arg1 is the second
// register) so that a name and the positional "argN" of ArgValue agree.
var specTable = []Spec{
	// Files and descriptors.
	sc("read", ArgInt, fd("fd"), arg("buf", ArgDNSAnswer), size("count")),
	// A write on a socket connected to port 53 is a DNS query (Go's
	// resolver writes its queries): its first bytes are copied then only.
	sc("write", ArgInt, fd("fd"), addr("buf", ArgDNSQuery, 2), size("count")),
	sc("open", ArgFd, path("pathname"), arg("flags", ArgOpenFlags), arg("mode", ArgMode)),
	sc("openat", ArgFd, dirfd("dirfd"), path("pathname"), arg("flags", ArgOpenFlags), arg("mode", ArgMode)),
	sc("openat2", ArgFd, dirfd("dirfd"), path("pathname"), ptr("how"), size("size")),
	sc("creat", ArgFd, path("pathname"), arg("mode", ArgMode)),
	sc("close", ArgInt, fd("fd")),
	sc("close_range", ArgInt, size("first"), size("last"), hx("flags")),
	sc("stat", ArgInt, path("pathname"), ptr("statbuf")),
	sc("fstat", ArgInt, fd("fd"), ptr("statbuf")),
	sc("lstat", ArgInt, path("pathname"), ptr("statbuf")),
	sc("newfstatat", ArgInt, dirfd("dirfd"), path("pathname"), ptr("statbuf"), arg("flags", ArgAtFlags)),
	sc("statx", ArgInt, dirfd("dirfd"), path("pathname"), arg("flags", ArgAtFlags), hx("mask"), ptr("statxbuf")),
	sc("lseek", ArgInt, fd("fd"), off("offset"), arg("whence", argWhence)),
	sc("pread64", ArgInt, fd("fd"), ptr("buf"), size("count"), off("offset")),
	sc("pwrite64", ArgInt, fd("fd"), ptr("buf"), size("count"), off("offset")),
	sc("readv", ArgInt, fd("fd"), ptr("iov"), size("iovcnt")),
	// glibc over TCP (options use-vc) writes its queries with writev.
	sc("writev", ArgInt, fd("fd"), arg("iov", ArgDNSIov), arg("iovcnt", ArgDNSIovLen)),
	sc("preadv", ArgInt, fd("fd"), ptr("iov"), size("iovcnt"), off("offset")),
	sc("pwritev", ArgInt, fd("fd"), ptr("iov"), size("iovcnt"), off("offset")),
	sc("preadv2", ArgInt, fd("fd"), ptr("iov"), size("iovcnt"), off("offset"), hx("offset_high"), hx("flags")),
	sc("pwritev2", ArgInt, fd("fd"), ptr("iov"), size("iovcnt"), off("offset"), hx("offset_high"), hx("flags")),
	sc("access", ArgInt, path("pathname"), arg("mode", argAccessMode)),
	sc("faccessat", ArgInt, dirfd("dirfd"), path("pathname"), arg("mode", argAccessMode)),
	sc("faccessat2", ArgInt, dirfd("dirfd"), path("pathname"), arg("mode", argAccessMode), arg("flags", argAccessFlags)),
	sc("pipe", ArgInt, ptr("pipefd")),
	sc("pipe2", ArgInt, ptr("pipefd"), arg("flags", argFdFlags)),
	sc("dup", ArgFd, fd("oldfd")),
	sc("dup2", ArgFd, fd("oldfd"), fd("newfd")),
	sc("dup3", ArgFd, fd("oldfd"), fd("newfd"), arg("flags", argFdFlags)),
	sc("ioctl", ArgInt, fd("fd"), hx("request"), hx("arg")),
	sc("fcntl", ArgInt, fd("fd"), arg("cmd", argFcntlCmd), hx("arg")),
	sc("flock", ArgInt, fd("fd"), num("operation")),
	sc("fsync", ArgInt, fd("fd")),
	sc("fdatasync", ArgInt, fd("fd")),
	sc("syncfs", ArgInt, fd("fd")),
	sc("sync", ArgInt),
	sc("sync_file_range", ArgInt, fd("fd"), off("offset"), off("nbytes"), hx("flags")),
	sc("truncate", ArgInt, path("path"), off("length")),
	sc("ftruncate", ArgInt, fd("fd"), off("length")),
	sc("fallocate", ArgInt, fd("fd"), hx("mode"), off("offset"), off("len")),
	sc("fadvise64", ArgInt, fd("fd"), off("offset"), off("len"), arg("advice", ArgFadvise)),
	sc("readahead", ArgInt, fd("fd"), off("offset"), size("count")),
	sc("getdents", ArgInt, fd("fd"), ptr("dirp"), size("count")),
	sc("getdents64", ArgInt, fd("fd"), ptr("dirp"), size("count")),
	sc("getcwd", ArgInt, ptr("buf"), size("size")),
	sc("chdir", ArgInt, path("path")),
	sc("fchdir", ArgInt, fd("fd")),
	sc("chroot", ArgInt, path("path")),
	sc("pivot_root", ArgInt, path("new_root"), path("put_old")),
	sc("rename", ArgInt, path("oldpath"), path("newpath")),
	sc("renameat", ArgInt, dirfd("olddirfd"), path("oldpath"), dirfd("newdirfd"), path("newpath")),
	sc("renameat2", ArgInt, dirfd("olddirfd"), path("oldpath"), dirfd("newdirfd"), path("newpath"), hx("flags")),
	sc("mkdir", ArgInt, path("pathname"), arg("mode", ArgMode)),
	sc("mkdirat", ArgInt, dirfd("dirfd"), path("pathname"), arg("mode", ArgMode)),
	sc("rmdir", ArgInt, path("pathname")),
	sc("mknod", ArgInt, path("pathname"), arg("mode", ArgMode), hx("dev")),
	sc("mknodat", ArgInt, dirfd("dirfd"), path("pathname"), arg("mode", ArgMode), hx("dev")),
	sc("link", ArgInt, path("oldpath"), path("newpath")),
	sc("linkat", ArgInt, dirfd("olddirfd"), path("oldpath"), dirfd("newdirfd"), path("newpath"), arg("flags", ArgAtFlags)),
	sc("unlink", ArgInt, path("pathname")),
	sc("unlinkat", ArgInt, dirfd("dirfd"), path("pathname"), arg("flags", ArgAtFlags)),
	sc("symlink", ArgInt, path("target"), path("linkpath")),
	sc("symlinkat", ArgInt, path("target"), dirfd("newdirfd"), path("linkpath")),
	sc("readlink", ArgInt, path("pathname"), ptr("buf"), size("bufsiz")),
	sc("readlinkat", ArgInt, dirfd("dirfd"), path("pathname"), ptr("buf"), size("bufsiz")),
	sc("chmod", ArgInt, path("pathname"), arg("mode", ArgMode)),
	sc("fchmod", ArgInt, fd("fd"), arg("mode", ArgMode)),
	sc("fchmodat", ArgInt, dirfd("dirfd"), path("pathname"), arg("mode", ArgMode)),
	sc("fchmodat2", ArgInt, dirfd("dirfd"), path("pathname"), arg("mode", ArgMode), arg("flags", ArgAtFlags)),
	sc("chown", ArgInt, path("pathname"), num("owner"), num("group")),
	sc("fchown", ArgInt, fd("fd"), num("owner"), num("group")),
	sc("lchown", ArgInt, path("pathname"), num("owner"), num("group")),
	sc("fchownat", ArgInt, dirfd("dirfd"), path("pathname"), num("owner"), num("group"), arg("flags", ArgAtFlags)),
	sc("umask", ArgInt, arg("mask", ArgMode)),
	sc("utime", ArgInt, path("filename"), ptr("times")),
	sc("utimes", ArgInt, path("filename"), ptr("times")),
	sc("futimesat", ArgInt, dirfd("dirfd"), path("pathname"), ptr("times")),
	sc("utimensat", ArgInt, dirfd("dirfd"), path("pathname"), ptr("times"), arg("flags", ArgAtFlags)),
	sc("statfs", ArgInt, path("path"), ptr("buf")),
	sc("fstatfs", ArgInt, fd("fd"), ptr("buf")),
	sc("ustat", ArgInt, hx("dev"), ptr("ubuf")),
	sc("sendfile", ArgInt, fd("out_fd"), fd("in_fd"), ptr("offset"), size("count")),
	sc("splice", ArgInt, fd("fd_in"), ptr("off_in"), fd("fd_out"), ptr("off_out"), size("len"), hx("flags")),
	sc("tee", ArgInt, fd("fd_in"), fd("fd_out"), size("len"), hx("flags")),
	sc("vmsplice", ArgInt, fd("fd"), ptr("iov"), size("nr_segs"), hx("flags")),
	sc("copy_file_range", ArgInt, fd("fd_in"), ptr("off_in"), fd("fd_out"), ptr("off_out"), size("len"), hx("flags")),
	sc("name_to_handle_at", ArgInt, dirfd("dirfd"), path("pathname"), ptr("handle"), ptr("mount_id"), hx("flags")),
	sc("open_by_handle_at", ArgFd, fd("mount_fd"), ptr("handle"), arg("flags", ArgOpenFlags)),
	sc("memfd_create", ArgFd, str("name"), hx("flags")),
	sc("memfd_secret", ArgFd, hx("flags")),
	sc("cachestat", ArgInt, fd("fd"), ptr("cstat_range"), ptr("cstat"), hx("flags")),
	sc("file_getattr", ArgInt, dirfd("dirfd"), path("pathname"), ptr("ufattr"), size("usize"), arg("at_flags", ArgAtFlags)),
	sc("file_setattr", ArgInt, dirfd("dirfd"), path("pathname"), ptr("ufattr"), size("usize"), arg("at_flags", ArgAtFlags)),

	// Extended attributes.
	sc("setxattr", ArgInt, path("path"), str("name"), ptr("value"), size("size"), hx("flags")),
	sc("lsetxattr", ArgInt, path("path"), str("name"), ptr("value"), size("size"), hx("flags")),
	sc("fsetxattr", ArgInt, fd("fd"), str("name"), ptr("value"), size("size"), hx("flags")),
	sc("getxattr", ArgInt, path("path"), str("name"), ptr("value"), size("size")),
	sc("lgetxattr", ArgInt, path("path"), str("name"), ptr("value"), size("size")),
	sc("fgetxattr", ArgInt, fd("fd"), str("name"), ptr("value"), size("size")),
	sc("listxattr", ArgInt, path("path"), ptr("list"), size("size")),
	sc("llistxattr", ArgInt, path("path"), ptr("list"), size("size")),
	sc("flistxattr", ArgInt, fd("fd"), ptr("list"), size("size")),
	sc("removexattr", ArgInt, path("path"), str("name")),
	sc("lremovexattr", ArgInt, path("path"), str("name")),
	sc("fremovexattr", ArgInt, fd("fd"), str("name")),
	sc("setxattrat", ArgInt, dirfd("dirfd"), path("pathname"), arg("at_flags", ArgAtFlags), str("name"), ptr("uargs"), size("usize")),
	sc("getxattrat", ArgInt, dirfd("dirfd"), path("pathname"), arg("at_flags", ArgAtFlags), str("name"), ptr("uargs"), size("usize")),
	sc("listxattrat", ArgInt, dirfd("dirfd"), path("pathname"), arg("at_flags", ArgAtFlags), ptr("list"), size("size")),
	sc("removexattrat", ArgInt, dirfd("dirfd"), path("pathname"), arg("at_flags", ArgAtFlags), str("name")),

	// Multiplexing and event descriptors.
	sc("select", ArgInt, num("nfds"), ptr("readfds"), ptr("writefds"), ptr("exceptfds"), ptr("timeout")),
	sc("pselect6", ArgInt, num("nfds"), ptr("readfds"), ptr("writefds"), ptr("exceptfds"), ptr("timeout"), ptr("sigmask")),
	sc("poll", ArgInt, ptr("fds"), size("nfds"), num("timeout")),
	sc("ppoll", ArgInt, ptr("fds"), size("nfds"), ptr("tmo_p"), ptr("sigmask"), size("sigsetsize")),
	sc("epoll_create", ArgFd, num("size")),
	sc("epoll_create1", ArgFd, arg("flags", argFdFlags)),
	sc("epoll_ctl", ArgInt, fd("epfd"), arg("op", argEpollOp), fd("fd"), ptr("event")),
	sc("epoll_wait", ArgInt, fd("epfd"), ptr("events"), num("maxevents"), num("timeout")),
	sc("epoll_pwait", ArgInt, fd("epfd"), ptr("events"), num("maxevents"), num("timeout"), ptr("sigmask"), size("sigsetsize")),
	sc("epoll_pwait2", ArgInt, fd("epfd"), ptr("events"), num("maxevents"), ptr("timeout"), ptr("sigmask"), size("sigsetsize")),
	sc("eventfd", ArgFd, size("initval")),
	sc("eventfd2", ArgFd, size("initval"), arg("flags", argFdFlags)),
	sc("signalfd", ArgFd, fd("fd"), ptr("mask"), size("sizemask")),
	sc("signalfd4", ArgFd, fd("fd"), ptr("mask"), size("sizemask"), arg("flags", argFdFlags)),
	sc("timerfd_create", ArgFd, arg("clockid", argClockID), arg("flags", argFdFlags)),
	sc("timerfd_settime", ArgInt, fd("fd"), hx("flags"), ptr("new_value"), ptr("old_value")),
	sc("timerfd_gettime", ArgInt, fd("fd"), ptr("curr_value")),
	sc("inotify_init", ArgFd),
	sc("inotify_init1", ArgFd, arg("flags", argFdFlags)),
	sc("inotify_add_watch", ArgInt, fd("fd"), path("pathname"), hx("mask")),
	sc("inotify_rm_watch", ArgInt, fd("fd"), num("wd")),
	sc("fanotify_init", ArgFd, hx("flags"), arg("event_f_flags", ArgOpenFlags)),
	sc("fanotify_mark", ArgInt, fd("fanotify_fd"), hx("flags"), hx("mask"), dirfd("dirfd"), path("pathname")),
	sc("userfaultfd", ArgFd, arg("flags", argFdFlags)),
	sc("io_uring_setup", ArgFd, size("entries"), ptr("params")),
	sc("io_uring_enter", ArgInt, fd("fd"), size("to_submit"), size("min_complete"), hx("flags"), ptr("sig"), size("sigsz")),
	sc("io_uring_register", ArgInt, fd("fd"), size("opcode"), ptr("arg"), size("nr_args")),
	sc("io_setup", ArgInt, size("nr_events"), ptr("ctx_idp")),
	sc("io_destroy", ArgInt, hx("ctx_id")),
	sc("io_getevents", ArgInt, hx("ctx_id"), num("min_nr"), num("nr"), ptr("events"), ptr("timeout")),
	sc("io_pgetevents", ArgInt, hx("ctx_id"), num("min_nr"), num("nr"), ptr("events"), ptr("timeout"), ptr("usig")),
	sc("io_submit", ArgInt, hx("ctx_id"), num("nr"), ptr("iocbpp")),
	sc("io_cancel", ArgInt, hx("ctx_id"), ptr("iocb"), ptr("result")),

	// Memory.
	sc("mmap", ArgHex, ptr("addr"), size("length"), arg("prot", ArgProt), arg("flags", ArgMapFlags), fd("fd"), hx("offset")),
	sc("mprotect", ArgInt, ptr("addr"), size("len"), arg("prot", ArgProt)),
	sc("pkey_mprotect", ArgInt, ptr("addr"), size("len"), arg("prot", ArgProt), num("pkey")),
	sc("munmap", ArgInt, ptr("addr"), size("length")),
	sc("brk", ArgHex, ptr("addr")),
	sc("mremap", ArgHex, ptr("old_address"), size("old_size"), size("new_size"), hx("flags"), ptr("new_address")),
	sc("msync", ArgInt, ptr("addr"), size("length"), hx("flags")),
	sc("mincore", ArgInt, ptr("addr"), size("length"), ptr("vec")),
	sc("madvise", ArgInt, ptr("addr"), size("length"), arg("advice", argMadvise)),
	sc("process_madvise", ArgInt, fd("pidfd"), ptr("iovec"), size("vlen"), arg("advice", argMadvise), hx("flags")),
	sc("mlock", ArgInt, ptr("addr"), size("len")),
	sc("mlock2", ArgInt, ptr("addr"), size("len"), hx("flags")),
	sc("munlock", ArgInt, ptr("addr"), size("len")),
	sc("mlockall", ArgInt, hx("flags")),
	sc("munlockall", ArgInt),
	sc("mseal", ArgInt, ptr("addr"), size("len"), hx("flags")),
	sc("remap_file_pages", ArgInt, ptr("addr"), size("size"), arg("prot", ArgProt), size("pgoff"), hx("flags")),
	sc("map_shadow_stack", ArgHex, ptr("addr"), size("size"), hx("flags")),
	sc("pkey_alloc", ArgInt, hx("flags"), hx("access_rights")),
	sc("pkey_free", ArgInt, num("pkey")),
	sc("mbind", ArgInt, ptr("addr"), size("len"), num("mode"), ptr("nodemask"), size("maxnode"), hx("flags")),
	sc("set_mempolicy", ArgInt, num("mode"), ptr("nodemask"), size("maxnode")),
	sc("get_mempolicy", ArgInt, ptr("mode"), ptr("nodemask"), size("maxnode"), ptr("addr"), hx("flags")),
	sc("set_mempolicy_home_node", ArgInt, ptr("start"), size("len"), size("home_node"), hx("flags")),
	sc("migrate_pages", ArgInt, num("pid"), size("maxnode"), ptr("old_nodes"), ptr("new_nodes")),
	sc("move_pages", ArgInt, num("pid"), size("count"), ptr("pages"), ptr("nodes"), ptr("status"), hx("flags")),
	sc("process_vm_readv", ArgInt, num("pid"), ptr("local_iov"), size("liovcnt"), ptr("remote_iov"), size("riovcnt"), hx("flags")),
	sc("process_vm_writev", ArgInt, num("pid"), ptr("local_iov"), size("liovcnt"), ptr("remote_iov"), size("riovcnt"), hx("flags")),
	sc("membarrier", ArgInt, num("cmd"), hx("flags"), num("cpu_id")),

	// Signals.
	sc("rt_sigaction", ArgInt, arg("signum", ArgSignal), ptr("act"), ptr("oldact"), size("sigsetsize")),
	sc("rt_sigprocmask", ArgInt, arg("how", argSigHow), ptr("set"), ptr("oldset"), size("sigsetsize")),
	sc("rt_sigreturn", ArgInt),
	sc("rt_sigpending", ArgInt, ptr("set"), size("sigsetsize")),
	sc("rt_sigtimedwait", ArgInt, ptr("set"), ptr("info"), ptr("timeout"), size("sigsetsize")),
	sc("rt_sigqueueinfo", ArgInt, num("tgid"), arg("sig", ArgSignal), ptr("info")),
	sc("rt_tgsigqueueinfo", ArgInt, num("tgid"), num("tid"), arg("sig", ArgSignal), ptr("info")),
	sc("rt_sigsuspend", ArgInt, ptr("mask"), size("sigsetsize")),
	sc("sigaltstack", ArgInt, ptr("ss"), ptr("old_ss")),
	sc("kill", ArgInt, num("pid"), arg("sig", ArgSignal)),
	sc("tkill", ArgInt, num("tid"), arg("sig", ArgSignal)),
	sc("tgkill", ArgInt, num("tgid"), num("tid"), arg("sig", ArgSignal)),
	sc("pidfd_send_signal", ArgInt, fd("pidfd"), arg("sig", ArgSignal), ptr("info"), hx("flags")),
	sc("pause", ArgInt),
	sc("alarm", ArgInt, size("seconds")),
	sc("restart_syscall", ArgInt),

	// Processes and threads.
	sc("clone", ArgInt, arg("flags", ArgCloneFlags), ptr("stack"), ptr("parent_tid"), ptr("child_tid"), hx("tls")),
	sc("clone3", ArgInt, ptr("cl_args"), size("size")),
	sc("fork", ArgInt),
	sc("vfork", ArgInt),
	sc("execve", ArgInt, path("pathname"), ptr("argv"), ptr("envp")),
	sc("execveat", ArgInt, dirfd("dirfd"), path("pathname"), ptr("argv"), ptr("envp"), arg("flags", ArgAtFlags)),
	sc("exit", ArgInt, num("status")),
	sc("exit_group", ArgInt, num("status")),
	sc("wait4", ArgInt, num("pid"), ptr("wstatus"), arg("options", argWaitOptions), ptr("rusage")),
	sc("waitid", ArgInt, num("idtype"), num("id"), ptr("infop"), arg("options", argWaitOptions), ptr("rusage")),
	sc("getpid", ArgInt),
	sc("getppid", ArgInt),
	sc("gettid", ArgInt),
	sc("getpgrp", ArgInt),
	sc("getpgid", ArgInt, num("pid")),
	sc("setpgid", ArgInt, num("pid"), num("pgid")),
	sc("getsid", ArgInt, num("pid")),
	sc("setsid", ArgInt),
	sc("set_tid_address", ArgInt, ptr("tidptr")),
	sc("set_robust_list", ArgInt, ptr("head"), size("len")),
	sc("get_robust_list", ArgInt, num("pid"), ptr("head_ptr"), ptr("len_ptr")),
	sc("rseq", ArgInt, ptr("rseq"), size("rseq_len"), hx("flags"), hx("sig")),
	sc("futex", ArgInt, ptr("uaddr"), arg("futex_op", argFutexOp), num("val"), ptr("timeout"), ptr("uaddr2"), num("val3")),
	sc("futex_waitv", ArgInt, ptr("waiters"), size("nr_futexes"), hx("flags"), ptr("timeout"), arg("clockid", argClockID)),
	sc("futex_wake", ArgInt, ptr("uaddr"), hx("mask"), num("nr"), hx("flags")),
	sc("futex_wait", ArgInt, ptr("uaddr"), hx("val"), hx("mask"), hx("flags"), ptr("timeout"), arg("clockid", argClockID)),
	sc("futex_requeue", ArgInt, ptr("waiters"), hx("flags"), num("nr_wake"), num("nr_requeue")),
	sc("unshare", ArgInt, arg("flags", ArgCloneFlags)),
	sc("setns", ArgInt, fd("fd"), arg("nstype", ArgCloneFlags)),
	sc("pidfd_open", ArgFd, num("pid"), hx("flags")),
	sc("pidfd_getfd", ArgFd, fd("pidfd"), fd("targetfd"), hx("flags")),
	sc("process_mrelease", ArgInt, fd("pidfd"), hx("flags")),
	sc("kcmp", ArgInt, num("pid1"), num("pid2"), num("type"), hx("idx1"), hx("idx2")),
	sc("ptrace", ArgInt, num("request"), num("pid"), ptr("addr"), ptr("data")),
	sc("prctl", ArgInt, arg("option", argPrctlOp), hx("arg1"), hx("arg2"), hx("arg3"), hx("arg4")),
	sc("arch_prctl", ArgInt, arg("code", argArchPrctl), hx("addr")),
	sc("personality", ArgInt, hx("persona")),
	sc("seccomp", ArgInt, num("operation"), hx("flags"), ptr("args")),
	sc("sched_yield", ArgInt),
	sc("sched_setaffinity", ArgInt, num("pid"), size("cpusetsize"), ptr("mask")),
	sc("sched_getaffinity", ArgInt, num("pid"), size("cpusetsize"), ptr("mask")),
	sc("sched_setparam", ArgInt, num("pid"), ptr("param")),
	sc("sched_getparam", ArgInt, num("pid"), ptr("param")),
	sc("sched_setscheduler", ArgInt, num("pid"), num("policy"), ptr("param")),
	sc("sched_getscheduler", ArgInt, num("pid")),
	sc("sched_get_priority_max", ArgInt, num("policy")),
	sc("sched_get_priority_min", ArgInt, num("policy")),
	sc("sched_rr_get_interval", ArgInt, num("pid"), ptr("tp")),
	sc("sched_setattr", ArgInt, num("pid"), ptr("attr"), hx("flags")),
	sc("sched_getattr", ArgInt, num("pid"), ptr("attr"), size("size"), hx("flags")),
	sc("getpriority", ArgInt, num("which"), num("who")),
	sc("setpriority", ArgInt, num("which"), num("who"), num("prio")),
	sc("ioprio_set", ArgInt, num("which"), num("who"), num("ioprio")),
	sc("ioprio_get", ArgInt, num("which"), num("who")),
	sc("getcpu", ArgInt, ptr("cpu"), ptr("node"), ptr("tcache")),

	// Credentials and limits.
	sc("getuid", ArgInt),
	sc("geteuid", ArgInt),
	sc("getgid", ArgInt),
	sc("getegid", ArgInt),
	sc("setuid", ArgInt, num("uid")),
	sc("setgid", ArgInt, num("gid")),
	sc("setreuid", ArgInt, num("ruid"), num("euid")),
	sc("setregid", ArgInt, num("rgid"), num("egid")),
	sc("setresuid", ArgInt, num("ruid"), num("euid"), num("suid")),
	sc("setresgid", ArgInt, num("rgid"), num("egid"), num("sgid")),
	sc("getresuid", ArgInt, ptr("ruid"), ptr("euid"), ptr("suid")),
	sc("getresgid", ArgInt, ptr("rgid"), ptr("egid"), ptr("sgid")),
	sc("setfsuid", ArgInt, num("fsuid")),
	sc("setfsgid", ArgInt, num("fsgid")),
	sc("getgroups", ArgInt, num("size"), ptr("list")),
	sc("setgroups", ArgInt, size("size"), ptr("list")),
	sc("capget", ArgInt, ptr("hdrp"), ptr("datap")),
	sc("capset", ArgInt, ptr("hdrp"), ptr("datap")),
	sc("getrlimit", ArgInt, num("resource"), ptr("rlim")),
	sc("setrlimit", ArgInt, num("resource"), ptr("rlim")),
	sc("prlimit64", ArgInt, num("pid"), num("resource"), ptr("new_limit"), ptr("old_limit")),
	sc("getrusage", ArgInt, num("who"), ptr("usage")),

	// Time.
	sc("nanosleep", ArgInt, ptr("req"), ptr("rem")),
	sc("clock_nanosleep", ArgInt, arg("clockid", argClockID), hx("flags"), ptr("request"), ptr("remain")),
	sc("clock_gettime", ArgInt, arg("clockid", argClockID), ptr("tp")),
	sc("clock_settime", ArgInt, arg("clockid", argClockID), ptr("tp")),
	sc("clock_getres", ArgInt, arg("clockid", argClockID), ptr("res")),
	sc("clock_adjtime", ArgInt, arg("clockid", argClockID), ptr("tx")),
	sc("gettimeofday", ArgInt, ptr("tv"), ptr("tz")),
	sc("settimeofday", ArgInt, ptr("tv"), ptr("tz")),
	sc("time", ArgInt, ptr("tloc")),
	sc("times", ArgInt, ptr("buf")),
	sc("adjtimex", ArgInt, ptr("buf")),
	sc("getitimer", ArgInt, num("which"), ptr("curr_value")),
	sc("setitimer", ArgInt, num("which"), ptr("new_value"), ptr("old_value")),
	sc("timer_create", ArgInt, arg("clockid", argClockID), ptr("sevp"), ptr("timerid")),
	sc("timer_settime", ArgInt, num("timerid"), hx("flags"), ptr("new_value"), ptr("old_value")),
	sc("timer_gettime", ArgInt, num("timerid"), ptr("curr_value")),
	sc("timer_getoverrun", ArgInt, num("timerid")),
	sc("timer_delete", ArgInt, num("timerid")),

	// Sockets.
	sc("socket", ArgFd, arg("domain", ArgSockFamily), arg("type", ArgSockType), num("protocol")),
	sc("socketpair", ArgInt, arg("domain", ArgSockFamily), arg("type", ArgSockType), num("protocol"), ptr("sv")),
	sc("connect", ArgInt, fd("sockfd"), addr("addr", ArgSockaddr, 2), size("addrlen")),
	sc("bind", ArgInt, fd("sockfd"), addr("addr", ArgSockaddr, 2), size("addrlen")),
	sc("listen", ArgInt, fd("sockfd"), num("backlog")),
	sc("accept", ArgFd, fd("sockfd"), addr("addr", ArgSockaddrOut, 2), ptr("addrlen")),
	sc("accept4", ArgFd, fd("sockfd"), addr("addr", ArgSockaddrOut, 2), ptr("addrlen"), arg("flags", ArgAccept4Flags)),
	sc("getsockname", ArgInt, fd("sockfd"), addr("addr", ArgSockaddrOut, 2), ptr("addrlen")),
	sc("getpeername", ArgInt, fd("sockfd"), addr("addr", ArgSockaddrOut, 2), ptr("addrlen")),
	sc("sendto", ArgInt, fd("sockfd"), addr("buf", ArgDNSQuery, 2), size("len"), hx("flags"), addr("dest_addr", ArgSockaddr, 5), size("addrlen")),
	sc("recvfrom", ArgInt, fd("sockfd"), arg("buf", ArgDNSAnswer), size("len"), hx("flags"), addr("src_addr", ArgSockaddrOut, 5), ptr("addrlen")),
	sc("sendmsg", ArgInt, fd("sockfd"), ptr("msg"), hx("flags")),
	sc("recvmsg", ArgInt, fd("sockfd"), ptr("msg"), hx("flags")),
	sc("sendmmsg", ArgInt, fd("sockfd"), arg("msgvec", ArgDNSMmsg), arg("vlen", ArgDNSMmsgLen), hx("flags")),
	sc("recvmmsg", ArgInt, fd("sockfd"), ptr("msgvec"), size("vlen"), hx("flags"), ptr("timeout")),
	sc("shutdown", ArgInt, fd("sockfd"), arg("how", argShutdownHow)),
	sc("setsockopt", ArgInt, fd("sockfd"), num("level"), num("optname"), ptr("optval"), size("optlen")),
	sc("getsockopt", ArgInt, fd("sockfd"), num("level"), num("optname"), ptr("optval"), ptr("optlen")),

	// System V IPC and POSIX message queues.
	sc("shmget", ArgInt, num("key"), size("size"), hx("shmflg")),
	sc("shmat", ArgHex, num("shmid"), ptr("shmaddr"), hx("shmflg")),
	sc("shmdt", ArgInt, ptr("shmaddr")),
	sc("shmctl", ArgInt, num("shmid"), num("cmd"), ptr("buf")),
	sc("semget", ArgInt, num("key"), num("nsems"), hx("semflg")),
	sc("semop", ArgInt, num("semid"), ptr("sops"), size("nsops")),
	sc("semtimedop", ArgInt, num("semid"), ptr("sops"), size("nsops"), ptr("timeout")),
	sc("semctl", ArgInt, num("semid"), num("semnum"), num("cmd"), hx("arg")),
	sc("msgget", ArgInt, num("key"), hx("msgflg")),
	sc("msgsnd", ArgInt, num("msqid"), ptr("msgp"), size("msgsz"), hx("msgflg")),
	sc("msgrcv", ArgInt, num("msqid"), ptr("msgp"), size("msgsz"), off("msgtyp"), hx("msgflg")),
	sc("msgctl", ArgInt, num("msqid"), num("cmd"), ptr("buf")),
	sc("mq_open", ArgFd, str("name"), arg("oflag", ArgOpenFlags), arg("mode", ArgMode), ptr("attr")),
	sc("mq_unlink", ArgInt, str("name")),
	sc("mq_timedsend", ArgInt, fd("mqdes"), ptr("msg_ptr"), size("msg_len"), size("msg_prio"), ptr("abs_timeout")),
	sc("mq_timedreceive", ArgInt, fd("mqdes"), ptr("msg_ptr"), size("msg_len"), ptr("msg_prio"), ptr("abs_timeout")),
	sc("mq_notify", ArgInt, fd("mqdes"), ptr("sevp")),
	sc("mq_getsetattr", ArgInt, fd("mqdes"), ptr("newattr"), ptr("oldattr")),

	// Mounts, namespaces and the system.
	sc("mount", ArgInt, str("source"), path("target"), str("filesystemtype"), hx("mountflags"), ptr("data")),
	sc("umount2", ArgInt, path("target"), hx("flags")),
	sc("open_tree", ArgFd, dirfd("dirfd"), path("pathname"), hx("flags")),
	sc("open_tree_attr", ArgFd, dirfd("dirfd"), path("pathname"), hx("flags"), ptr("uattr"), size("usize")),
	sc("move_mount", ArgInt, dirfd("from_dirfd"), path("from_pathname"), dirfd("to_dirfd"), path("to_pathname"), hx("flags")),
	sc("fsopen", ArgFd, str("fsname"), hx("flags")),
	sc("fsconfig", ArgInt, fd("fd"), num("cmd"), str("key"), ptr("value"), num("aux")),
	sc("fsmount", ArgFd, fd("fs_fd"), hx("flags"), hx("attr_flags")),
	sc("fspick", ArgFd, dirfd("dirfd"), path("pathname"), hx("flags")),
	sc("mount_setattr", ArgInt, dirfd("dirfd"), path("pathname"), hx("flags"), ptr("attr"), size("size")),
	sc("statmount", ArgInt, ptr("req"), ptr("buf"), size("bufsize"), hx("flags")),
	sc("listmount", ArgInt, ptr("req"), ptr("mnt_ids"), size("nr_mnt_ids"), hx("flags")),
	sc("listns", ArgInt, ptr("req"), ptr("ns_ids"), size("nr_ns_ids"), hx("flags")),
	sc("swapon", ArgInt, path("path"), hx("swapflags")),
	sc("swapoff", ArgInt, path("path")),
	sc("quotactl", ArgInt, hx("cmd"), path("special"), num("id"), ptr("addr")),
	sc("quotactl_fd", ArgInt, fd("fd"), hx("cmd"), num("id"), ptr("addr")),
	sc("acct", ArgInt, path("filename")),
	sc("uname", ArgInt, ptr("buf")),
	sc("sysinfo", ArgInt, ptr("info")),
	sc("syslog", ArgInt, num("type"), ptr("bufp"), num("len")),
	sc("sethostname", ArgInt, ptr("name"), size("len")),
	sc("setdomainname", ArgInt, ptr("name"), size("len")),
	sc("reboot", ArgInt, hx("magic"), hx("magic2"), hx("cmd"), ptr("arg")),
	sc("vhangup", ArgInt),
	sc("sysfs", ArgInt, num("option"), hx("arg1"), hx("arg2")),
	sc("_sysctl", ArgInt, ptr("args")),
	sc("getrandom", ArgInt, ptr("buf"), size("buflen"), hx("flags")),
	sc("bpf", ArgInt, num("cmd"), ptr("attr"), size("size")),
	sc("perf_event_open", ArgFd, ptr("attr"), num("pid"), num("cpu"), fd("group_fd"), hx("flags")),
	sc("init_module", ArgInt, ptr("module_image"), size("len"), str("param_values")),
	sc("finit_module", ArgInt, fd("fd"), str("param_values"), hx("flags")),
	sc("delete_module", ArgInt, str("name"), hx("flags")),
	sc("kexec_load", ArgInt, hx("entry"), size("nr_segments"), ptr("segments"), hx("flags")),
	sc("kexec_file_load", ArgInt, fd("kernel_fd"), fd("initrd_fd"), size("cmdline_len"), str("cmdline"), hx("flags")),
	sc("add_key", ArgInt, str("type"), str("description"), ptr("payload"), size("plen"), num("keyring")),
	sc("request_key", ArgInt, str("type"), str("description"), str("callout_info"), num("dest_keyring")),
	sc("keyctl", ArgInt, num("operation"), hx("arg1"), hx("arg2"), hx("arg3"), hx("arg4")),
	sc("landlock_create_ruleset", ArgFd, ptr("attr"), size("size"), hx("flags")),
	sc("landlock_add_rule", ArgInt, fd("ruleset_fd"), num("rule_type"), ptr("rule_attr"), hx("flags")),
	sc("landlock_restrict_self", ArgInt, fd("ruleset_fd"), hx("flags")),
	sc("lsm_get_self_attr", ArgInt, num("attr"), ptr("ctx"), ptr("size"), hx("flags")),
	sc("lsm_set_self_attr", ArgInt, num("attr"), ptr("ctx"), size("size"), hx("flags")),
	sc("lsm_list_modules", ArgInt, ptr("ids"), ptr("size"), hx("flags")),
	sc("lookup_dcookie", ArgInt, hx("cookie"), ptr("buffer"), size("len")),
	sc("uselib", ArgInt, path("library")),
	sc("iopl", ArgInt, num("level")),
	sc("ioperm", ArgInt, hx("from"), size("num"), num("turn_on")),
	sc("modify_ldt", ArgInt, num("func"), ptr("ptr"), size("bytecount")),
	sc("set_thread_area", ArgInt, ptr("u_info")),
	sc("get_thread_area", ArgInt, ptr("u_info")),
	sc("uretprobe", ArgInt),
	sc("uprobe", ArgInt),
}

// archSpecs holds the few calls whose arguments differ by architecture.
// arm64 builds clone with CONFIG_CLONE_BACKWARDS, which swaps tls and
// child_tid relative to x86_64.
var archSpecs = map[Arch][]Spec{
	ArchARM64: {
		sc("clone", ArgInt, arg("flags", ArgCloneFlags), ptr("stack"), ptr("parent_tid"), hx("tls"), ptr("child_tid")),
	},
}

// specs resolves every numbered syscall of each arch to a Spec once, so that
// Lookup is an index and callers may compare the pointers it returns.
var specs = sync.OnceValue(func() map[Arch][]*Spec {
	byName := make(map[string]*Spec, len(specTable))
	for i := range specTable {
		byName[specTable[i].Name] = &specTable[i]
	}
	out := make(map[Arch][]*Spec, 2)
	for _, a := range []Arch{ArchAMD64, ArchARM64} {
		names := syscallTable(a)
		override := make(map[string]*Spec)
		for i, s := range archSpecs[a] {
			override[s.Name] = &archSpecs[a][i]
		}
		list := make([]*Spec, len(names))
		for nr, name := range names {
			switch {
			case name == "":
			case override[name] != nil:
				list[nr] = override[name]
			case byName[name] != nil:
				list[nr] = byName[name]
			default:
				list[nr] = genericSpec(name)
			}
		}
		out[a] = list
	}
	return out
})

// genericSpec stands in for the syscalls the table does not describe
// (mostly unimplemented ones such as afs_syscall): six hex arguments,
// because without a prototype any of the registers might matter.
func genericSpec(name string) *Spec {
	s := &Spec{Name: name, RetKind: ArgInt}
	for i := range 6 {
		s.Args = append(s.Args, hx("arg"+strconv.Itoa(i)))
	}
	return s
}

// Lookup returns the description of syscall nr on a, or nil for a number
// that arch does not define. The Spec is shared and must not be modified.
func Lookup(a Arch, nr uint32) *Spec {
	list := specs()[a]
	if uint64(nr) < uint64(len(list)) {
		return list[nr]
	}
	return nil
}

// Captures says which arguments of syscall nr the kernel must copy for the
// formatter to show their contents rather than their addresses.
func Captures(a Arch, nr uint32) []Capture {
	s := Lookup(a, nr)
	if s == nil {
		return nil
	}
	var out []Capture
	for i, as := range s.Args {
		switch as.Kind {
		case ArgPath, ArgString:
			out = append(out, Capture{Arg: i, Kind: CapPath, LenArg: -1})
		case ArgSockaddr:
			out = append(out, Capture{Arg: i, Kind: CapSockaddr, LenArg: int(as.LenArg)})
		case ArgSockaddrOut:
			out = append(out, Capture{Arg: i, Kind: CapSockaddrOut, LenArg: int(as.LenArg)})
		case ArgDNSQuery:
			out = append(out, Capture{Arg: i, Kind: CapDNS, LenArg: int(as.LenArg)})
		case ArgDNSMmsg, ArgDNSMmsgLen:
			out = append(out, Capture{Arg: i, Kind: CapDNSMmsg, LenArg: -1})
		case ArgDNSIov, ArgDNSIovLen:
			out = append(out, Capture{Arg: i, Kind: CapDNSIov, LenArg: -1})
		case ArgDNSAnswer:
			out = append(out, Capture{Arg: i, Kind: CapDNSAns, LenArg: -1})
		}
	}
	return out
}
