// Moves itself into the cgroup DIR1 and calls getppid N1 times, then into
// DIR2 and calls it N2 times: stat must count each batch in the cgroup it
// ran in.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static int move(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	int fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, "0", 1) != 1) {
		perror(path);
		return -1;
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: cgmove DIR1 DIR2 N1 N2\n");
		return 2;
	}
	long n1 = atol(argv[3]), n2 = atol(argv[4]);
	if (move(argv[1]))
		return 1;
	for (long i = 0; i < n1; i++)
		syscall(SYS_getppid);
	if (move(argv[2]))
		return 1;
	for (long i = 0; i < n2; i++)
		syscall(SYS_getppid);
	return 0;
}
