// membusy: a neighbour that keeps the host's CPUs and memory bus busy, as
// another tenant's batch job would: one thread per online CPU copying a
// buffer larger than the caches back and forth, until killed. It makes no
// syscalls in its loop, so a trace of the host sees almost nothing of it;
// what it changes is how long everyone else's kernel work takes: a call
// that runs a few milliseconds on the CPU is preempted for a tick at its
// cond_resched points (map32's forks waited 0.3-16 ms each for the CPU), and
// what is left runs with the caches and the memory bus shared.
//
// usage: membusy [-j THREADS] [-s MIB_PER_THREAD]
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t size = 128 << 20;

static void *stream(void *arg)
{
	(void)arg;
	char *a = malloc(size), *b = malloc(size);
	if (!a || !b) {
		perror("membusy: malloc");
		exit(1);
	}
	memset(a, 1, size);
	memset(b, 2, size);
	for (;;) {
		memcpy(b, a, size);
		memcpy(a, b, size);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long threads = sysconf(_SC_NPROCESSORS_ONLN);
	int opt;
	while ((opt = getopt(argc, argv, "j:s:")) != -1) {
		switch (opt) {
		case 'j':
			threads = atol(optarg);
			break;
		case 's':
			size = (size_t)atol(optarg) << 20;
			break;
		default:
			fprintf(stderr, "usage: membusy [-j THREADS] [-s MIB_PER_THREAD]\n");
			return 2;
		}
	}
	if (threads < 1 || size < (1 << 20)) {
		fprintf(stderr, "membusy: need at least one thread and 1 MiB\n");
		return 2;
	}
	for (long i = 1; i < threads; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, stream, NULL)) {
			perror("membusy: pthread_create");
			return 1;
		}
	}
	stream(NULL);
}
