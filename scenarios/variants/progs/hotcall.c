// hotcall: processes (or threads) that each call one cheap syscall in a
// tight loop, so the call's fixed cost (entry, exit, mitigations) is most of
// their time. The doctor's hot-syscall finding must name the call and the
// cheaper path, whatever the process count or the call.
//
// usage: hotcall [-s CALL] [-d SECONDS] [-p PROCS] [-t THREADS] [-w SECONDS]
//   CALL: getppid (default), clock_gettime (the raw syscall, bypassing the
//   vDSO), sched_yield, read1 (1-byte reads of /dev/zero), poll0 (poll with a
//   zero timeout on an empty pipe)
//   -w waits this long before starting, so sysray can attach first or late.
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *call = "getppid";
static double secs = 2;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *loop(void *arg)
{
	(void)arg;
	int fd = -1, pfd[2] = {-1, -1};
	if (!strcmp(call, "read1") && (fd = open("/dev/zero", O_RDONLY)) < 0) {
		perror("/dev/zero");
		exit(1);
	}
	if (!strcmp(call, "poll0") && pipe(pfd) < 0) {
		perror("pipe");
		exit(1);
	}
	unsigned long n = 0;
	double end = now() + secs;
	char c;
	struct timespec ts;
	do {
		// Check the clock every 1024 calls so that it costs nothing next to them.
		for (int i = 0; i < 1024; i++, n++) {
			switch (call[0]) {
			case 'g':
				syscall(SYS_getppid);
				break;
			case 'c':
				syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
				break;
			case 's':
				sched_yield();
				break;
			case 'r':
				if (read(fd, &c, 1) != 1)
					exit(1);
				break;
			case 'p': {
				struct pollfd p = {.fd = pfd[0], .events = POLLIN};
				poll(&p, 1, 0);
				break;
			}
			}
		}
	} while (now() < end);
	fprintf(stderr, "hotcall[%d]: %lu %s calls in %.1fs\n", getpid(), n, call, secs);
	return NULL;
}

static void work(int threads)
{
	pthread_t t[64];
	for (int i = 1; i < threads; i++)
		pthread_create(&t[i], NULL, loop, NULL);
	loop(NULL);
	for (int i = 1; i < threads; i++)
		pthread_join(t[i], NULL);
}

int main(int argc, char **argv)
{
	int procs = 1, threads = 1, opt;
	double wait = 0;
	while ((opt = getopt(argc, argv, "s:d:p:t:w:")) != -1) {
		switch (opt) {
		case 's': call = optarg; break;
		case 'd': secs = atof(optarg); break;
		case 'p': procs = atoi(optarg); break;
		case 't': threads = atoi(optarg); break;
		case 'w': wait = atof(optarg); break;
		default:
			fprintf(stderr, "usage: hotcall [-s getppid|clock_gettime|sched_yield|read1|poll0] [-d S] [-p N] [-t N] [-w S]\n");
			return 2;
		}
	}
	if (!strchr("gcsrp", call[0]) || procs < 1 || procs > 64 || threads < 1 || threads > 64 || secs <= 0) {
		fprintf(stderr, "hotcall: bad arguments\n");
		return 2;
	}
	if (wait > 0) {
		struct timespec w = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
		nanosleep(&w, NULL);
	}
	for (int i = 1; i < procs; i++)
		if (fork() == 0) {
			work(threads);
			return 0;
		}
	work(threads);
	while (wait4(-1, NULL, 0, NULL) > 0)
		;
	return 0;
}
