// slowcall: syscalls that take tens to hundreds of milliseconds without
// being waits by design, each for a different reason in the kernel: the
// device (fsync), a lock another task holds (an inode's i_rwsem), or work
// done on the CPU (getrandom, or a read of /dev/urandom, the same
// get_random_bytes_user path). The doctor's slow-syscall finding must name
// the call and say where the time went, whichever the reason, the process
// and thread counts, and whether sysray started first.
//
// usage: slowcall [-k KIND] [-p PROCS] [-t THREADS] [-s MIB] [-d SECONDS | -n CALLS] [-w SECONDS]
//   KIND: fsync (each worker overwrites MIB of its own file on disk, in
//   /var/tmp, and fsyncs it), truncate (a log on tmpfs, /dev/shm: the
//   workers append 100-byte lines to it with write() while one more
//   process, the rotator, grows it by MIB with fallocate and truncates it to
//   nothing, as logrotate's copytruncate does; both hold the inode's lock
//   throughout, so the writers' write() waits), getrandom (getrandom of MIB
//   a call), urandom (read of MIB from /dev/urandom).
//   -p PROCS workers (default 1), each with -t THREADS, each for -d SECONDS
//   (default 2) or -n CALLS; -s MIB per call (default 64).
// The files are unlinked as soon as they are open: nothing to clean up.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *kind = "fsync";
static long mib = 64, calls;
static double secs = 2;
static int shared_fd = -1; // truncate: the log

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int tmpfile_in(const char *dir)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/slowcall.XXXXXX", dir);
	int fd = mkstemp(path);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	unlink(path);
	return fd;
}

static void *worker(void *arg)
{
	(void)arg;
	size_t len = (size_t)mib << 20;
	char *buf = NULL;
	int fd = -1;
	if (!strcmp(kind, "fsync")) {
		fd = tmpfile_in("/var/tmp");
		buf = malloc(len);
		memset(buf, 'x', len);
	} else if (!strcmp(kind, "truncate")) {
		fd = shared_fd;
	} else {
		buf = malloc(len);
		memset(buf, 0, len); // faulted in now, not inside the first call
		if (!strcmp(kind, "urandom") && (fd = open("/dev/urandom", O_RDONLY)) < 0) {
			perror("/dev/urandom");
			exit(1);
		}
	}
	long n = 0;
	double end = now() + secs, worst = 0;
	for (; calls > 0 ? n < calls : now() < end; n++) {
		double t = now();
		switch (kind[0]) {
		case 'f':
			if (pwrite(fd, buf, len, 0) != (ssize_t)len || fsync(fd) < 0) {
				perror("pwrite/fsync");
				exit(1);
			}
			break;
		case 't': {
			static const char line[] = "2026-11-23T11:00:00Z INFO request served in 1.2 ms by worker 7 (status 200)\n";
			if (write(fd, line, sizeof(line) - 1) < 0) {
				perror("write");
				exit(1);
			}
			struct timespec gap = {0, 1000000}; // a line a millisecond
			nanosleep(&gap, NULL);
			break;
		}
		case 'g':
			for (size_t got = 0; got < len;) {
				ssize_t r = getrandom(buf + got, len - got, 0);
				if (r < 0) {
					perror("getrandom");
					exit(1);
				}
				got += r;
			}
			break;
		case 'u':
			for (size_t got = 0; got < len;) {
				ssize_t r = read(fd, buf + got, len - got);
				if (r <= 0) {
					perror("read /dev/urandom");
					exit(1);
				}
				got += r;
			}
			break;
		}
		if (now() - t > worst)
			worst = now() - t;
	}
	fprintf(stderr, "slowcall[%d]: %ld %s calls, the slowest %.1f ms\n", getpid(), n, kind, worst * 1e3);
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

// rotate grows the log and cuts it back, over and over, until the workers
// are done.
static void rotate(void)
{
	off_t len = (off_t)mib << 20;
	for (double end = now() + secs + 1; now() < end;) {
		if (fallocate(shared_fd, 0, 0, len) < 0 || ftruncate(shared_fd, 0) < 0) {
			perror("fallocate/ftruncate");
			exit(1);
		}
	}
	exit(0);
}

int main(int argc, char **argv)
{
	int procs = 1, threads = 1, opt;
	double wait = 0;
	while ((opt = getopt(argc, argv, "k:p:t:s:d:n:w:")) != -1) {
		switch (opt) {
		case 'k': kind = optarg; break;
		case 'p': procs = atoi(optarg); break;
		case 't': threads = atoi(optarg); break;
		case 's': mib = atol(optarg); break;
		case 'd': secs = atof(optarg); break;
		case 'n': calls = atol(optarg); break;
		case 'w': wait = atof(optarg); break;
		default:
			fprintf(stderr, "usage: slowcall [-k fsync|truncate|getrandom|urandom] [-p N] [-t N] [-s MIB] [-d S | -n N] [-w S]\n");
			return 2;
		}
	}
	if ((strcmp(kind, "fsync") && strcmp(kind, "truncate") && strcmp(kind, "getrandom") && strcmp(kind, "urandom")) ||
	    procs < 1 || procs > 64 || threads < 1 || threads > 64 || mib < 1 || mib > 4096 || secs <= 0 || calls < 0) {
		fprintf(stderr, "slowcall: bad arguments\n");
		return 2;
	}
	if (wait > 0) {
		struct timespec w = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
		nanosleep(&w, NULL);
	}
	pid_t rotator = 0;
	if (!strcmp(kind, "truncate")) {
		shared_fd = tmpfile_in("/dev/shm");
		if ((rotator = fork()) == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			rotate();
		}
	}
	for (int i = 1; i < procs; i++)
		if (fork() == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			work(threads);
			_exit(0);
		}
	work(threads);
	if (rotator)
		kill(rotator, SIGKILL);
	while (wait4(-1, NULL, 0, NULL) > 0)
		;
	return 0;
}
