/*
 * A small program that misbehaves the ways sysray is built to explain:
 * a missing config file, a legacy vsyscall time() call (as old glibc made),
 * a child that reads the vsyscall page and dies of SIGSEGV, log writes
 * followed by posix_fadvise(DONTNEED), and a MAP_32BIT mapping.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef time_t (*time_fn)(time_t *);

int main(void)
{
	/* 1. a config file that is not there */
	int fd = open("/etc/demo-app/config.yaml", O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		close(fd);

	/* 2. time() through the legacy vsyscall page: the kernel emulates it */
	time_fn vtime = (time_fn)0xffffffffff600400UL;
	printf("vsyscall time() = %ld\n", (long)vtime(NULL));

	/* 3. a child that reads the vsyscall page: refused unless vsyscall=emulate */
	pid_t pid = fork();
	if (pid == 0) {
		volatile unsigned char *page = (unsigned char *)0xffffffffff600000UL;
		printf("first byte of the vsyscall page: %d\n", page[0]);
		_exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	if (WIFSIGNALED(status))
		printf("child %d killed by signal %d\n", pid, WTERMSIG(status));

	/* 4. glog-style logging: write, then drop the page cache */
	char path[] = "/tmp/sysray-demo-XXXXXX";
	int log = mkstemp(path);
	const char line[] = "I1122 12:00:00.000000 demo.c:42] request served\n";
	for (int i = 0; i < 5; i++) {
		write(log, line, sizeof(line) - 1);
		posix_fadvise(log, 0, 0, POSIX_FADV_DONTNEED);
	}
	close(log);
	unlink(path);

	/* 5. a thread-stack-style mapping in the low 2 GiB */
	void *stack = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
	printf("MAP_32BIT mapping at %p\n", stack);
	return 0;
}
