// retrier: a fallback taken on every call. Each iteration makes a syscall
// with a flag that cannot work here, gets an error, and at once makes the
// same call without it, as glibc's MAP_32BIT thread stacks did once the low
// 2 GiB were full. The doctor's failed-syscall-retry finding must name the
// call, the errno and the flag whichever syscall, flag and errno, and
// however many processes, threads and retries.
//
// usage: retrier [-k KIND] [-n RETRIES | -d SECONDS] [-p PROCS] [-t THREADS] [-i US] [-w SECONDS]
//   KIND: odirect (openat O_DIRECT of a file on a filesystem without direct
//   I/O, a ramfs mounted in a private mount namespace: EINVAL, then without
//   O_DIRECT), excl (openat O_CREAT|O_EXCL of a file that exists: EEXIST,
//   then without O_CREAT|O_EXCL), hugetlb (mmap MAP_HUGETLB with no huge
//   pages reserved: ENOMEM, then without MAP_HUGETLB), noreplace (mmap
//   MAP_FIXED_NOREPLACE at an address in use: EEXIST, then without it).
//   Each worker (-p processes, each with -t threads) makes -n retries
//   (default 100) or retries for -d seconds, -i microseconds apart.
//   -w waits this long before starting.
// The odirect mount lives in the process's own mount namespace, gone with
// it; its directory and excl's file are removed on exit and on
// SIGINT/SIGTERM/SIGHUP.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *kind = "odirect";
static long retries = 100, interval_us;
static double secs;
static char dir[] = "/tmp/retrier.XXXXXX";
static char file[300];
static int mounted;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void cleanup(void)
{
	unlink(file);
	if (mounted)
		umount2(dir, MNT_DETACH);
	rmdir(dir);
}

static void on_signal(int sig)
{
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void setup(void)
{
	if (strcmp(kind, "odirect") && strcmp(kind, "excl"))
		return;
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(file, sizeof(file), "%s/data", dir);
	atexit(cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	if (!strcmp(kind, "odirect")) {
		// A filesystem without direct I/O, seen by this process alone.
		if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount("ramfs", dir, "ramfs", 0, NULL) < 0) {
			perror("mounting a private ramfs");
			exit(1);
		}
		mounted = 1;
	}
	int fd = open(file, O_RDWR | O_CREAT, 0644);
	if (fd < 0) {
		perror(file);
		exit(1);
	}
	close(fd);
}

// once makes one failing call and its retry; it returns the errno of the
// first, 0 if it did not fail.
static int once(void)
{
	int e = 0;
	if (!strcmp(kind, "odirect") || !strcmp(kind, "excl")) {
		int flags = !strcmp(kind, "odirect") ? O_RDWR | O_DIRECT | O_CLOEXEC : O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC;
		int fd = openat(AT_FDCWD, file, flags, 0644);
		if (fd < 0) {
			e = errno;
			fd = openat(AT_FDCWD, file, flags & ~(O_DIRECT | O_CREAT | O_EXCL), 0644);
		}
		if (fd < 0) {
			perror(file);
			exit(1);
		}
		close(fd);
		return e;
	}
	size_t len = 2 << 20;
	int flags = MAP_PRIVATE | MAP_ANONYMOUS;
	void *hint = NULL;
	static __thread void *taken;
	if (!strcmp(kind, "hugetlb")) {
		flags |= MAP_HUGETLB;
	} else {
		// An allocator asking for the address right after its last
		// region, which something else holds.
		if (!taken)
			taken = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		hint = taken;
		flags |= MAP_FIXED_NOREPLACE;
	}
	void *p = mmap(hint, len, PROT_READ | PROT_WRITE, flags, -1, 0);
	if (p == MAP_FAILED) {
		e = errno;
		p = mmap(hint, len, PROT_READ | PROT_WRITE, flags & ~(MAP_HUGETLB | MAP_FIXED_NOREPLACE), -1, 0);
	}
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	munmap(p, len);
	return e;
}

static void *worker(void *arg)
{
	(void)arg;
	long n = 0, failed = 0;
	struct timespec gap = {interval_us / 1000000, (interval_us % 1000000) * 1000};
	double end = now() + secs;
	for (; secs > 0 ? now() < end : n < retries; n++) {
		failed += once() != 0;
		if (interval_us)
			nanosleep(&gap, NULL);
	}
	fprintf(stderr, "retrier[%d]: %ld of %ld %s calls failed and were retried\n", getpid(), failed, n, kind);
	return NULL;
}

static void work(int threads)
{
	pthread_t t[64];
	for (int i = 1; i < threads; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	worker(NULL);
	for (int i = 1; i < threads; i++)
		pthread_join(t[i], NULL);
}

int main(int argc, char **argv)
{
	int procs = 1, threads = 1, opt;
	double wait = 0;
	while ((opt = getopt(argc, argv, "k:n:d:p:t:i:w:")) != -1) {
		switch (opt) {
		case 'k': kind = optarg; break;
		case 'n': retries = atol(optarg); break;
		case 'd': secs = atof(optarg); break;
		case 'p': procs = atoi(optarg); break;
		case 't': threads = atoi(optarg); break;
		case 'i': interval_us = atol(optarg); break;
		case 'w': wait = atof(optarg); break;
		default:
			fprintf(stderr, "usage: retrier [-k odirect|excl|hugetlb|noreplace] [-n N | -d S] [-p N] [-t N] [-i US] [-w S]\n");
			return 2;
		}
	}
	if ((strcmp(kind, "odirect") && strcmp(kind, "excl") && strcmp(kind, "hugetlb") && strcmp(kind, "noreplace")) ||
	    procs < 1 || procs > 64 || threads < 1 || threads > 64 || retries < 1 || secs < 0 || interval_us < 0) {
		fprintf(stderr, "retrier: bad arguments\n");
		return 2;
	}
	setup();
	if (wait > 0) {
		struct timespec w = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
		nanosleep(&w, NULL);
	}
	for (int i = 1; i < procs; i++)
		if (fork() == 0) {
			// The parent cleans up; the children go with it.
			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			signal(SIGHUP, SIG_DFL);
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			work(threads);
			_exit(0);
		}
	work(threads);
	while (wait4(-1, NULL, 0, NULL) > 0)
		;
	return 0;
}
