/*
 * cpuwait: a latency-sensitive loop that cannot get a CPU when it wakes.
 * Each victim sleeps briefly and measures how late it wakes; CPU hogs of
 * higher priority (lower nice) share its CPU, so the scheduler leaves it
 * runnable but waiting, milliseconds at a time.
 *
 *   cpuwait [-H HOGS] [-N NICE] [-p VICTIMS] [-c CPU] [-s SLEEP_US]
 *           [-d SECONDS] [-u] [-m] [-T] [-B JOBS] [-I THREADS]
 *
 *   -H   CPU hogs (3)
 *   -N   the hogs' nice value (-10); the victims keep nice 0
 *   -p   victim processes (1)
 *   -c   the CPU the victims and hogs are pinned to (the last one)
 *   -s   each victim sleeps this many µs a turn (1000)
 *   -d   run this many seconds (5); 0: until killed
 *   -u   pin nothing: hogs enough to outnumber the CPUs (2 per CPU, or -H)
 *   -m   the victims compute instead of sleeping: a fixed amount of work
 *        per turn, timed (they are preempted, not woken late)
 *   -T   the hogs are threads of one process, not processes
 *   -B   benign: a parallel build, JOBS compile-like jobs at a time (short
 *        CPU-bound child processes, equal priority), nobody waiting on a
 *        deadline; no victims or hogs
 *   -I   benign: an idle thread pool, THREADS workers parked on a
 *        condition variable, woken one at a time every few ms for a few
 *        µs of work; no hogs
 *
 * Prints each victim's wake-ups and median and maximum lateness, and
 * RESULT victims=... turns=... late_median_us=... late_max_us=... late_total_us=...
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int nhogs = -1, hognice = -10, nvictims = 1, cpu = -1, sleep_us = 1000, unpinned, compute, threads;
static int buildjobs, poolthreads;
static double dur = 5;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void pin(int c)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(c, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0) {
		perror("sched_setaffinity");
		exit(1);
	}
}

static volatile unsigned long sink;

static void spin_for(double secs)
{
	double end = now() + secs;
	while (now() < end)
		for (int i = 0; i < 1000; i++)
			sink += i;
}

/* Hogs end on their own a second after the victims, not by a signal. */
static void *hog_thread(void *arg)
{
	(void)arg;
	if (setpriority(PRIO_PROCESS, 0, hognice) < 0) /* per thread on Linux */
		perror("setpriority");
	double end = dur > 0 ? now() + dur + 1 : 1e18;
	while (now() < end)
		for (int i = 0; i < 100000; i++)
			sink += i;
	exit(0);
	return NULL;
}

static void hog(void)
{
	if (!unpinned)
		pin(cpu);
	hog_thread(NULL);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/*
 * How long ago, in seconds, this process started (/proc/self/stat's
 * starttime, in clock ticks since boot, against CLOCK_BOOTTIME): its waits
 * for a CPU before the timed loop fit in that time, however loaded the
 * host. -1 when unknown.
 */
static double since_start(void)
{
	char buf[1024];
	FILE *f = fopen("/proc/self/stat", "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')'); /* comm may hold spaces */
	if (!p)
		return -1;
	unsigned long long start = 0;
	/* after ") ": state is field 3, starttime field 22 */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &start) != 1)
		return -1;
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9 - (double)start / sysconf(_SC_CLK_TCK);
}

static void victim(int id)
{
	if (!unpinned)
		pin(cpu);
	double before = since_start();
	int cap = 1 << 20, n = 0;
	double *late = malloc(cap * sizeof(double));
	double end = dur > 0 ? now() + dur : 1e18;
	/* -m: the work a turn takes on an idle CPU, measured once */
	long work = 200000;
	double alone = 0;
	if (compute) {
		double t = now();
		for (long i = 0; i < work; i++)
			sink += i;
		alone = now() - t;
	}
	double total = 0;
	while (now() < end) {
		double t = now(), d;
		if (compute) {
			for (long i = 0; i < work; i++)
				sink += i;
			d = now() - t - alone;
		} else {
			struct timespec ts = {0, sleep_us * 1000L};
			nanosleep(&ts, NULL);
			d = now() - t - sleep_us / 1e6;
		}
		total += d < 0 ? 0 : d;
		if (n < cap)
			late[n++] = d < 0 ? 0 : d;
	}
	qsort(late, n, sizeof(double), cmp);
	printf("victim %d pid %d: %d turns, late median %.0f us, max %.0f us\n", id, getpid(), n,
	       n ? late[n / 2] * 1e6 : 0, n ? late[n - 1] * 1e6 : 0);
	printf("RESULT victims=1 turns=%d late_median_us=%.0f late_max_us=%.0f late_total_us=%.0f before_loop_us=%.0f\n", n,
	       n ? late[n / 2] * 1e6 : 0, n ? late[n - 1] * 1e6 : 0, total * 1e6, before * 1e6);
	fflush(stdout);
	free(late);
}

/* -B: jobs of 20-80 ms of CPU each, JOBS at a time, as make -jJOBS runs cc1. */
static void build(void)
{
	double end = dur > 0 ? now() + dur : 1e18;
	int running = 0, done = 0;
	unsigned seed = getpid();
	while (now() < end) {
		while (running < buildjobs) {
			double cost = 0.02 + (rand_r(&seed) % 60) / 1000.0;
			pid_t p = fork();
			if (p == 0) {
				spin_for(cost);
				_exit(0);
			}
			running++;
		}
		if (wait(NULL) > 0) {
			running--;
			done++;
		}
	}
	while (running-- > 0)
		wait(NULL);
	printf("RESULT build jobs=%d\n", done);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int tasks;

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&mu);
		while (!tasks)
			pthread_cond_wait(&cv, &mu);
		tasks--;
		pthread_mutex_unlock(&mu);
		for (int i = 0; i < 20000; i++)
			sink += i;
	}
	return NULL;
}

/* -I: a pool parked on a condition variable, a task every 5 ms. */
static void pool(void)
{
	pthread_t t;
	for (int i = 0; i < poolthreads; i++)
		pthread_create(&t, NULL, worker, NULL);
	double end = dur > 0 ? now() + dur : 1e18;
	int n = 0;
	while (now() < end) {
		struct timespec ts = {0, 5000000};
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&mu);
		tasks++;
		pthread_cond_signal(&cv);
		pthread_mutex_unlock(&mu);
		n++;
	}
	printf("RESULT pool tasks=%d\n", n);
	exit(0);
}

int main(int argc, char **argv)
{
	int o;
	while ((o = getopt(argc, argv, "H:N:p:c:s:d:umTB:I:")) != -1) {
		switch (o) {
		case 'H': nhogs = atoi(optarg); break;
		case 'N': hognice = atoi(optarg); break;
		case 'p': nvictims = atoi(optarg); break;
		case 'c': cpu = atoi(optarg); break;
		case 's': sleep_us = atoi(optarg); break;
		case 'd': dur = atof(optarg); break;
		case 'u': unpinned = 1; break;
		case 'm': compute = 1; break;
		case 'T': threads = 1; break;
		case 'B': buildjobs = atoi(optarg); break;
		case 'I': poolthreads = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: cpuwait [-H HOGS] [-N NICE] [-p VICTIMS] [-c CPU] [-s US] [-d S] [-u] [-m] [-T] [-B JOBS] [-I THREADS]\n");
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	/*
	 * A session of its own, as a service has: with autogroups on, nice
	 * weighs tasks against others of the session only, and hogs at nice
	 * -10 in the caller's session starve it too (sysray among them).
	 */
	setsid();
	if (buildjobs) {
		build();
		return 0;
	}
	if (poolthreads)
		pool();
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (cpu < 0)
		cpu = ncpu - 1;
	if (nhogs < 0)
		nhogs = unpinned ? 2 * ncpu : 3;
	pid_t hogs[256];
	int nh = 0;
	if (threads && nhogs > 0) {
		pid_t p = fork();
		if (p == 0) {
			if (!unpinned)
				pin(cpu);
			pthread_t t;
			for (int i = 1; i < nhogs; i++)
				pthread_create(&t, NULL, hog_thread, NULL);
			hog_thread(NULL);
		}
		hogs[nh++] = p;
	} else {
		for (int i = 0; i < nhogs && nh < 256; i++) {
			pid_t p = fork();
			if (p == 0)
				hog();
			hogs[nh++] = p;
		}
	}
	/* The first victim is this process: -p PID names it. */
	pid_t vs[256];
	int nv = 0;
	for (int i = 1; i < nvictims && nv < 256; i++) {
		pid_t p = fork();
		if (p == 0) {
			victim(i);
			exit(0);
		}
		vs[nv++] = p;
	}
	victim(0);
	for (int i = 0; i < nv; i++)
		waitpid(vs[i], NULL, 0);
	for (int i = 0; i < nh; i++)
		waitpid(hogs[i], NULL, 0);
	return 0;
}
