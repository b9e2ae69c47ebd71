// cgwork: workloads that run into their cgroup's limits when started under
// cgrun. The doctor's cgroup-limit finding must name the limit whatever the
// number of processes or threads.
//
// usage: cgwork KIND [-n PROCS] [-t] [-d SECONDS] [-s MIB] [-b KIB]
//   fork: each of PROCS workers keeps creating children that wait (or, with
//   -t, threads), retrying 5 ms after each failure: under pids.max, fork()
//   (clone) or pthread_create (clone3) fails with EAGAIN.
//   file: each worker writes MIB (default 256) to a file of its own in
//   /var/tmp, 1 MiB a call, reads it back, and again over it: the
//   page cache is charged to the memory cgroup inside write() and read(),
//   which reclaim when the cgroup is at its limit. -b sets the size of a
//   call (default 1024 KiB): small calls each reclaim a little, none slow.
//   mapread: each worker writes the file once, then maps it and reads every
//   page, unmaps it, and again: the page cache is charged in page faults,
//   outside any syscall.
//   spin: each worker (with -t, each of 2 threads) reads /dev/urandom,
//   1 MiB a call (about 3 ms on the CPU): CPU time spent inside syscalls, so a CPU quota's
//   throttling lands inside them.
//   loop: each worker computes in user space, no syscall at all (the clock
//   is the vDSO's): a process throttled without making one event.
// Workers run for -d SECONDS (default 2); the file is unlinked once open.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *kind;
static double secs = 2;
static long mib = 256;
static int threads;
static long kib = 1024;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void msleep(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

static void forker(void)
{
	// The children wait for the end of this pipe, then exit and are reaped
	// here: nothing is left to the host's init.
	int gate[2];
	if (pipe(gate) < 0) {
		perror("pipe");
		exit(1);
	}
	static pid_t kids[4096];
	int nkids = 0;
	double end = now() + secs;
	long made = 0, failed = 0;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 << 10);
	while (now() < end) {
		int err = 0;
		if (threads) {
			pthread_t t;
			err = pthread_create(&t, &attr, idle, NULL);
		} else {
			pid_t pid = fork();
			if (pid == 0) {
				char c;
				close(gate[1]);
				while (read(gate[0], &c, 1) < 0 && errno == EINTR)
					;
				_exit(0);
			}
			err = pid < 0 ? errno : 0;
			if (pid > 0 && nkids < 4096)
				kids[nkids++] = pid;
		}
		if (err) {
			failed++;
			if (err != EAGAIN)
				fprintf(stderr, "cgwork[%d]: %s\n", getpid(), strerror(err));
			msleep(5);
		} else {
			made++;
		}
	}
	close(gate[1]);
	for (int i = 0; i < nkids; i++)
		while (waitpid(kids[i], NULL, 0) < 0 && errno == EINTR)
			;
	fprintf(stderr, "cgwork[%d]: %ld %s made, %ld failed\n", getpid(), made, threads ? "threads" : "children", failed);
}

// scratch opens a file of the worker's own in /var/tmp, unlinked at once:
// its page cache is charged to the worker's cgroup and goes with it.
static int scratch(void)
{
	char path[64];
	snprintf(path, sizeof(path), "/var/tmp/cgwork.XXXXXX");
	int fd = mkstemp(path);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	unlink(path);
	return fd;
}

static void filer(void)
{
	int fd = scratch();
	static char buf[1 << 20];
	size_t len = kib << 10;
	memset(buf, 'x', sizeof(buf));
	double end = now() + secs;
	long passes = 0;
	while (now() < end) {
		for (long i = 0; i < (mib << 10) / kib && now() < end; i++)
			if (write(fd, buf, len) < 0) {
				perror("write");
				exit(1);
			}
		lseek(fd, 0, SEEK_SET);
		while (now() < end && read(fd, buf, len) > 0)
			;
		// Over the same blocks again, not truncated: freeing them makes
		// a filesystem mounted with -o discard (this machine's root)
		// wait in ftruncate for the device's discards, 280 ms a pass
		// here: a story of its own (blocked-in-kernel-io), not this one.
		// The pages are written anew all the same: at the memory limit,
		// those of the pass before were reclaimed long since.
		if (lseek(fd, 0, SEEK_SET) < 0) {
			perror("lseek");
			exit(1);
		}
		passes++;
	}
	fprintf(stderr, "cgwork[%d]: %ld passes of %ld MiB\n", getpid(), passes, mib);
}

static void mapreader(void)
{
	int fd = scratch();
	static char buf[1 << 20];
	memset(buf, 'x', sizeof(buf));
	for (long i = 0; i < mib; i++)
		if (write(fd, buf, sizeof(buf)) < 0) {
			perror("write");
			exit(1);
		}
	size_t size = (size_t)mib << 20;
	long page = sysconf(_SC_PAGESIZE), passes = 0;
	volatile char sum = 0;
	double end = now() + secs;
	while (now() < end) {
		char *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
		for (size_t off = 0; off < size && now() < end; off += page)
			sum += p[off];
		munmap(p, size);
		passes++;
	}
	fprintf(stderr, "cgwork[%d]: %ld mapped passes of %ld MiB\n", getpid(), passes, mib);
}

static void *spinner(void *arg)
{
	(void)arg;
	int fd = open("/dev/urandom", O_RDONLY);
	if (fd < 0) {
		perror("/dev/urandom");
		exit(1);
	}
	char *buf = malloc(1 << 20);
	if (!buf) {
		perror("malloc");
		exit(1);
	}
	double end = now() + secs;
	long calls = 0;
	while (now() < end) {
		if (read(fd, buf, 1 << 20) < 0) {
			perror("read");
			exit(1);
		}
		calls++;
	}
	close(fd);
	free(buf);
	return (void *)calls;
}

static void loop(void)
{
	double end = now() + secs;
	volatile unsigned long x = 1;
	long rounds = 0;
	while (now() < end) {
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005UL + 1442695040888963407UL;
		rounds++;
	}
	fprintf(stderr, "cgwork[%d]: %ld rounds\n", getpid(), rounds);
}

static void spin(void)
{
	pthread_t t;
	if (threads)
		pthread_create(&t, NULL, spinner, NULL);
	long calls = (long)spinner(NULL);
	if (threads) {
		void *more;
		pthread_join(t, &more);
		calls += (long)more;
	}
	fprintf(stderr, "cgwork[%d]: %ld reads of 1 MiB\n", getpid(), calls);
}

int main(int argc, char **argv)
{
	int procs = 1, opt;
	if (argc < 2) {
		fprintf(stderr, "usage: cgwork fork|file|mapread|spin|loop [-n PROCS] [-t] [-d SECONDS] [-s MIB] [-b KIB]\n");
		return 2;
	}
	kind = argv[1];
	optind = 2;
	while ((opt = getopt(argc, argv, "n:td:s:b:")) != -1) {
		switch (opt) {
		case 'n': procs = atoi(optarg); break;
		case 't': threads = 1; break;
		case 'd': secs = atof(optarg); break;
		case 's': mib = atol(optarg); break;
		case 'b': kib = atol(optarg); break;
		default: return 2;
		}
	}
	void (*work)(void) = !strcmp(kind, "fork") ? forker : !strcmp(kind, "file") ? filer
		: !strcmp(kind, "mapread") ? mapreader : !strcmp(kind, "spin") ? spin : !strcmp(kind, "loop") ? loop : NULL;
	if (!work || procs < 1 || procs > 64 || secs <= 0 || mib < 1 || kib < 1 || kib > 1024) {
		fprintf(stderr, "cgwork: bad arguments\n");
		return 2;
	}
	// Workers first: under pids.max the fork bomb's own children must not
	// keep the other workers from starting.
	pid_t workers[64];
	for (int i = 1; i < procs; i++) {
		pid_t pid = workers[i] = fork();
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			work();
			_exit(0);
		}
		if (pid < 0)
			perror("fork");
	}
	work();
	// The workers only: the fork bomb reaps its own children.
	for (int i = 1; i < procs; i++)
		if (workers[i] > 0)
			while (waitpid(workers[i], NULL, 0) < 0 && errno == EINTR)
				;
	return 0;
}
