// Calls getppid N1 times, moves itself into the cgroup DIR, then calls it N2
// times: stat must count each batch in the cgroup it ran in.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: cgmove DIR N1 N2\n");
		return 2;
	}
	long n1 = atol(argv[2]), n2 = atol(argv[3]);
	for (long i = 0; i < n1; i++)
		syscall(SYS_getppid);
	char path[4096];
	snprintf(path, sizeof(path), "%s/cgroup.procs", argv[1]);
	int fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, "0", 1) != 1) {
		perror(path);
		return 1;
	}
	close(fd);
	for (long i = 0; i < n2; i++)
		syscall(SYS_getppid);
	return 0;
}
