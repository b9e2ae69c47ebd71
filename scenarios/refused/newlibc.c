// newlibc: what a program built with a current glibc does, through glibc's
// own wrappers: create threads (glibc 2.34+ tries clone3 first) and check
// that a file may be executed with the effective ids (glibc 2.33+ tries
// faccessat2 first, as bash's `[ -x FILE ]` does). Each wrapper falls back
// to the older syscall only if the new one fails with ENOSYS.
//
//   newlibc [-t THREADS] [-a ACCESS_CHECKS] [-p PATH] [-n PROCS]
//           [-d SECONDS -i MS]
//
// -n runs the work in PROCS child processes at once; -d repeats it every
// -i milliseconds for SECONDS (a service that keeps starting workers).
// Prints what failed; exits 1 if anything did.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int threads = 4, checks = 30;
static const char *path = "/bin/sh";

static void *work(void *arg)
{
	return arg;
}

// once does the work one time and returns how many calls failed.
static int once(int quiet)
{
	int failed = 0;
	for (int i = 0; i < threads; i++) {
		pthread_t t;
		int err = pthread_create(&t, NULL, work, NULL);
		if (err) {
			if (!failed++ && !quiet)
				fprintf(stderr, "newlibc[%d]: pthread_create: %s\n", getpid(), strerror(err));
			continue;
		}
		pthread_join(t, NULL);
	}
	int denied = 0;
	for (int i = 0; i < checks; i++) {
		if (faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) && !denied++ && !quiet)
			fprintf(stderr, "newlibc[%d]: %s: %s\n", getpid(), path, strerror(errno));
	}
	return failed + denied;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

// run does the work once, or every interval until the deadline.
static int run(double seconds, int interval_ms)
{
	int failed = once(0);
	if (seconds <= 0)
		return failed;
	double end = now() + seconds;
	while (now() < end) {
		struct timespec ts = {interval_ms / 1000, (interval_ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
		failed += once(1);
	}
	return failed;
}

int main(int argc, char **argv)
{
	int procs = 0, interval = 100, opt;
	double seconds = 0;
	while ((opt = getopt(argc, argv, "t:a:p:n:d:i:")) != -1) {
		switch (opt) {
		case 't':
			threads = atoi(optarg);
			break;
		case 'a':
			checks = atoi(optarg);
			break;
		case 'p':
			path = optarg;
			break;
		case 'n':
			procs = atoi(optarg);
			break;
		case 'd':
			seconds = atof(optarg);
			break;
		case 'i':
			interval = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: newlibc [-t THREADS] [-a ACCESS_CHECKS] [-p PATH] [-n PROCS] [-d SECONDS -i MS]\n");
			return 2;
		}
	}
	int failed = 0;
	if (procs > 0) {
		for (int i = 0; i < procs; i++) {
			pid_t pid = fork();
			if (pid < 0) {
				perror("newlibc: fork");
				return 1;
			}
			if (pid == 0)
				_exit(run(seconds, interval) ? 1 : 0);
		}
		int status;
		while (wait(&status) > 0)
			if (!WIFEXITED(status) || WEXITSTATUS(status))
				failed++;
		printf("newlibc: %d processes, %d failed\n", procs, failed);
		return failed ? 1 : 0;
	}
	failed = run(seconds, interval);
	printf("newlibc: %d threads, %d access checks, %d failed\n", threads, checks, failed);
	return failed ? 1 : 0;
}
