/*
 * argv[1] children, each making once every syscall of the list below (all
 * fail or only read; none changes anything outside the child), then
 * exiting. The kernel keeps a count cell per process and syscall: this
 * makes argv[1] x NCALLS of them, each holding one call.
 *
 * argv[2] says when they live: "together" keeps every child alive until
 * the last has made its calls (so none of their cells can be let go
 * early): a child's write, its last call but one, tells the parent it is
 * done, and its read, its last, waits for the parent's word that all are.
 * The parent makes its own calls once before the first fork, so that its
 * cells exist before the children's. A number of microseconds runs them
 * one after the other, that far apart; none runs them one after the other
 * at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: cells CHILDREN [together|GAP_US]\n");
		return 2;
	}
	long n = atol(argv[1]);
	int together = argc == 3 && strcmp(argv[2], "together") == 0;
	long gap = argc == 3 && !together ? atol(argv[2]) : 0;
	/* Said first: stdio's first write asks about stdout (a cell of its own). */
	printf("%zu\n", NCALLS);
	fflush(stdout);
	int hold[2], ready[2];
	static char bytes[4096];
	if (together) {
		if (pipe(hold) < 0 || pipe(ready) < 0) {
			perror("pipe");
			return 1;
		}
		/* The parent's cells for what it does after the last fork. */
		waitpid(-1, NULL, WNOHANG);
		if (write(-1, "", 0) == 0 || read(-1, bytes, 1) == 0)
			return 1;
	}
	for (long i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			/* fd -1: the descriptor calls fail with EBADF, the rest only read. */
			for (unsigned j = 0; j < NCALLS; j++) {
				if (!together || (calls[j] != SYS_read && calls[j] != SYS_write))
					syscall(calls[j], -1L, 0L, 0L, 0L, 0L, 0L);
			}
			char c = 0;
			if (together && (write(ready[1], &c, 1) != 1 || read(hold[0], &c, 1) != 1))
				_exit(1);
			_exit(0);
		}
		if (!together && waitpid(pid, NULL, 0) != pid) {
			perror("waitpid");
			return 1;
		}
		if (gap > 0)
			usleep(gap);
	}
	if (together) {
		/* Every child has made its calls: one byte for each child's read. */
		for (long left = n; left > 0;) {
			long r = read(ready[0], bytes, left < (long)sizeof(bytes) ? left : (long)sizeof(bytes));
			if (r <= 0) {
				perror("read");
				return 1;
			}
			left -= r;
		}
		for (long left = n; left > 0;) {
			long w = write(hold[1], bytes, left < (long)sizeof(bytes) ? left : (long)sizeof(bytes));
			if (w <= 0) {
				perror("write");
				return 1;
			}
			left -= w;
		}
		for (long i = 0; i < n; i++) {
			int status;
			if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
				fprintf(stderr, "a child failed\n");
				return 1;
			}
		}
	}
	return 0;
}
