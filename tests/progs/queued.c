// Makes N getrandom calls of K KiB each (kernel CPU work, no sleeping) while
// a spinning thread shares its one CPU, so the kernel preempts the calls at
// their cond_resched points. Prints, per call, the wall time, the thread's
// CPU time and the kernel's own count of the time the thread waited on the
// run queue (/proc/thread-self/schedstat's run_delay), in ns, and how many
// times it was switched in meanwhile: the wait is what sysray must report as
// the call's queued time. Wall less CPU time is
// not quite it: CPU time leaves out the time the hypervisor took the vCPU
// away (steal, with CONFIG_PARAVIRT_TIME_ACCOUNTING), which is no wait on
// the run queue.
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
#include <fcntl.h>
#include <unistd.h>

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

// run_delay reads the thread's run-queue wait so far from schedstat
// ("on-CPU ns, run_delay ns, timeslices"), and its timeslices into *slices.
static long long run_delay(int fd, long long *slices)
{
	char b[128];
	ssize_t n = pread(fd, b, sizeof(b) - 1, 0);
	if (n <= 0)
		return -1;
	b[n] = 0;
	long long on, delay;
	if (sscanf(b, "%lld %lld %lld", &on, &delay, slices) != 3)
		return -1;
	return delay;
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
	long long *wall = calloc(n, sizeof(*wall)), *cpu = calloc(n, sizeof(*cpu)), *rq = calloc(n, sizeof(*rq)), *sw = calloc(n, sizeof(*sw));
	int sfd = open("/proc/thread-self/schedstat", O_RDONLY);
	if (!buf || !wall || !cpu || !rq || !sw || sfd < 0)
		return 1;
	// Faulted in first, so every call does the same work.
	memset(buf, 1, size);
	for (int i = 0; i < n; i++) {
		long long s0, s1;
		long long d = run_delay(sfd, &s0), w = ns(CLOCK_MONOTONIC), c = ns(CLOCK_THREAD_CPUTIME_ID);
		// One call: a short read is fine, it is the call that is timed.
		if (getrandom(buf, size, 0) < 0)
			return 1;
		cpu[i] = ns(CLOCK_THREAD_CPUTIME_ID) - c;
		wall[i] = ns(CLOCK_MONOTONIC) - w;
		rq[i] = run_delay(sfd, &s1) - d;
		sw[i] = s1 - s0;
	}
	for (int i = 0; i < n; i++)
		printf("%lld %lld %lld %lld\n", wall[i], cpu[i], rq[i], sw[i]);
	return 0;
}
