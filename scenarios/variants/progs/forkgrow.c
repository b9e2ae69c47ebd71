// forkgrow: a process that maps more regions before each fork, so every
// fork copies more mappings (dup_mmap walks them all) and takes longer. The
// doctor's latency-grows-with-count finding must see the growth however few
// the forks, however long each, and whichever syscall forks.
//
// usage: forkgrow [-n FORKS] [-m MAPS_PER_FORK] [-s clone|fork] [-w SECONDS] [-i MS]
//   clone: glibc's fork() (the clone syscall); fork: the fork syscall itself.
//   -w waits this long before starting, so sysray can attach first.
//   -i pauses this many ms between forks, as a server forking now and then.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int forks = 30, per = 1600, opt;
	const char *how = "clone";
	double wait = 0;
	int interval = 0;
	while ((opt = getopt(argc, argv, "n:m:s:w:i:")) != -1) {
		switch (opt) {
		case 'n': forks = atoi(optarg); break;
		case 'm': per = atoi(optarg); break;
		case 's': how = optarg; break;
		case 'w': wait = atof(optarg); break;
		case 'i': interval = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: forkgrow [-n FORKS] [-m MAPS] [-s clone|fork] [-w S] [-i MS]\n");
			return 2;
		}
	}
	if (forks < 1 || per < 1 || (strcmp(how, "clone") && strcmp(how, "fork"))) {
		fprintf(stderr, "forkgrow: bad arguments\n");
		return 2;
	}
	if (wait > 0)
		usleep((useconds_t)(wait * 1e6));
	long maps = 0;
	for (int i = 0; i < forks; i++) {
		// Alternate protections so that neighbouring mappings never merge
		// into one area: each is a VMA the fork must copy.
		for (int j = 0; j < per; j++, maps++) {
			int prot = (maps & 1) ? PROT_READ : PROT_READ | PROT_WRITE;
			if (mmap(NULL, 4096, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED) {
				perror("mmap");
				return 1;
			}
		}
		double t0 = now();
		pid_t pid = !strcmp(how, "fork") ? (pid_t)syscall(SYS_fork) : fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0)
			_exit(0);
		double dt = now() - t0;
		waitpid(pid, NULL, 0);
		if (interval > 0)
			usleep((useconds_t)interval * 1000);
		if (i == 0 || i == forks - 1)
			fprintf(stderr, "forkgrow: fork %d with %ld mappings: %.1f ms\n", i + 1, maps, dt * 1e3);
	}
	return 0;
}
