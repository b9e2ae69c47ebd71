/*
 * argv[1] processes, one after another: each is a fork that execs this
 * program again ("child"), which makes about forty different syscalls,
 * some failing, and exits. An exec storm whose processes each leave the
 * doctor as much to remember as a small real program does.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void child(void)
{
	char buf[256];
	long nrs[] = {SYS_getppid, SYS_getuid, SYS_getgid, SYS_geteuid, SYS_getegid, SYS_gettid, SYS_getpid,
		      SYS_getpgrp, SYS_sched_yield};
	for (unsigned i = 0; i < sizeof nrs / sizeof nrs[0]; i++)
		syscall(nrs[i]);
	syscall(SYS_getsid, 0);
	syscall(SYS_umask, 022);
	syscall(SYS_getcwd, buf, sizeof buf);
	syscall(SYS_uname, buf);
	syscall(SYS_getrlimit, 7, buf);
	syscall(SYS_getpriority, 0, 0);
	syscall(SYS_sysinfo, buf);
	syscall(SYS_times, buf);
	syscall(SYS_getrusage, 0, buf);
	syscall(SYS_getitimer, 0, buf);
	syscall(SYS_sched_getaffinity, 0, 128, buf);
	syscall(SYS_prctl, 16 /* PR_GET_NAME */, buf);
	syscall(SYS_getgroups, 0, NULL);
	syscall(SYS_clock_getres, 1, buf);
	syscall(SYS_clock_gettime, 1, buf);
	syscall(SYS_getrandom, buf, 16, 0);
	syscall(SYS_kill, syscall(SYS_getpid), 0);
	/* Failing ones: a path search, bad descriptors. */
	syscall(SYS_openat, AT_FDCWD, "/nonexistent/execstorm", O_RDONLY);
	syscall(SYS_access, "/nonexistent/execstorm", F_OK);
	syscall(SYS_stat, "/nonexistent/execstorm", buf);
	syscall(SYS_readlink, "/nonexistent/execstorm", buf, sizeof buf);
	syscall(SYS_close, -1);
	syscall(SYS_dup, -1);
	syscall(SYS_fcntl, -1, F_GETFD);
	syscall(SYS_lseek, -1, 0, SEEK_SET);
	syscall(SYS_read, -1, buf, 1);
	syscall(SYS_write, -1, buf, 1);
	syscall(SYS_ioctl, -1, 0);
	syscall(SYS_fstat, -1, buf);
	syscall(SYS_fsync, -1);
	syscall(SYS_fchdir, -1);
	syscall(SYS_mkdir, "/nonexistent/execstorm", 0755);
	syscall(SYS_unlink, "/nonexistent/execstorm");
	syscall(SYS_exit_group, 0);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "child") == 0)
		child();
	long n = argc > 1 ? atol(argv[1]) : 1000;
	for (long i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			execl("/proc/self/exe", argv[0], "child", (char *)NULL);
			_exit(127);
		}
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}
	return 0;
}
