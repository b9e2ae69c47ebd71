// Makes N getrandom calls of K KiB each (kernel CPU work, no sleeping) while
// a spinning thread shares its one CPU, so the kernel preempts the calls at
// their cond_resched points. Prints, per call, the wall time and the
// thread's CPU time it took, in ns: their difference is the time the call
// waited for the CPU, which sysray must report as the call's queued time.
//
// usage: queued [N [K]]
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static long long ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *spin(void *arg)
{
	(void)arg;
	for (volatile unsigned long i = 0;; i++)
		;
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 40;
	size_t size = (size_t)(argc > 2 ? atoi(argv[2]) : 1024) << 10;
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	// The spinner inherits the affinity: both on CPU 0.
	if (sched_setaffinity(0, sizeof(one), &one))
		return 1;
	pthread_t t;
	if (pthread_create(&t, NULL, spin, NULL))
		return 1;
	char *buf = malloc(size);
	long long *wall = calloc(n, sizeof(*wall)), *cpu = calloc(n, sizeof(*cpu));
	if (!buf || !wall || !cpu)
		return 1;
	// Faulted in first, so every call does the same work.
	memset(buf, 1, size);
	for (int i = 0; i < n; i++) {
		long long w = ns(CLOCK_MONOTONIC), c = ns(CLOCK_THREAD_CPUTIME_ID);
		// One call: a short read is fine, it is the call that is timed.
		if (getrandom(buf, size, 0) < 0)
			return 1;
		cpu[i] = ns(CLOCK_THREAD_CPUTIME_ID) - c;
		wall[i] = ns(CLOCK_MONOTONIC) - w;
	}
	for (int i = 0; i < n; i++)
		printf("%lld %lld\n", wall[i], cpu[i]);
	return 0;
}
