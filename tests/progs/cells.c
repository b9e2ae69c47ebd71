/*
 * argv[1] children, one after the other, each making once every syscall of
 * the list below (all fail or only read; none changes anything outside the
 * child), then exiting. The kernel keeps a count cell per process and
 * syscall: this makes argv[1] x NCALLS of them, each holding one call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const long calls[] = {
	SYS_getpid, SYS_getppid, SYS_getuid, SYS_getgid, SYS_geteuid, SYS_getegid,
	SYS_gettid, SYS_getpgrp, SYS_sched_yield, SYS_fstat, SYS_close, SYS_read,
	SYS_write, SYS_lseek, SYS_dup, SYS_fcntl, SYS_fsync, SYS_fdatasync,
	SYS_ftruncate, SYS_fchmod, SYS_fchown, SYS_flock, SYS_getdents64, SYS_fstatfs,
	SYS_ioctl, SYS_pread64, SYS_pwrite64, SYS_readv, SYS_writev, SYS_shutdown,
	SYS_listen, SYS_getsockname,
};
#define NCALLS (sizeof(calls) / sizeof(calls[0]))

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: cells CHILDREN\n");
		return 2;
	}
	long n = atol(argv[1]);
	for (long i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			/* fd -1: the descriptor calls fail with EBADF, the rest only read. */
			for (unsigned j = 0; j < NCALLS; j++)
				syscall(calls[j], -1L, 0L, 0L, 0L, 0L, 0L);
			_exit(0);
		}
		if (waitpid(pid, NULL, 0) != pid) {
			perror("waitpid");
			return 1;
		}
	}
	printf("%zu\n", NCALLS);
	return 0;
}
