/*
 * fsyncer FILE WRITES FSYNC MISSING: opens FILE, writes WRITES blocks of 4 KiB
 * to it, calling fsync after each when FSYNC is 1, then tries to open a path
 * that does not exist MISSING times (each fails with ENOENT). Two runs that
 * differ only in FSYNC and MISSING make the same other syscalls, so a diff of
 * their captures knows exactly what changed. Exits 3 on an unexpected failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	static char buf[4096];
	if (argc < 5)
		return 2;
	int writes = atoi(argv[2]), sync = atoi(argv[3]), missing = atoi(argv[4]);
	memset(buf, 'x', sizeof buf);
	int fd = openat(AT_FDCWD, argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return 3;
	for (int i = 0; i < writes; i++) {
		if (write(fd, buf, sizeof buf) != sizeof buf)
			return 3;
		if (sync && fsync(fd) != 0)
			return 3;
	}
	close(fd);
	for (int i = 0; i < missing; i++)
		if (openat(AT_FDCWD, "/nonexistent/sysray-fsyncer", O_RDONLY) >= 0 || errno != ENOENT)
			return 3;
	return 0;
}
