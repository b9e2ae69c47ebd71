// thrash: readers of a file larger than their memory cgroup's limit, pass
// after pass, so every pass reads the file from disk again: the page cache
// keeps only the limit's worth, and a sequential pass evicts each page
// before the next pass comes back to it. The doctor's page-cache-thrash
// finding must name the process, the file, the limit and the time lost in
// faults, whatever the process and thread counts, the access pattern, and
// whether the reading began before sysray started; and stay quiet on a
// single cold pass.
//
// usage: thrash [-s FILE_MIB] [-l LIMIT_MIB] [-p PROCS] [-t THREADS]
//               [-n PASSES] [-d SECONDS] [-m mmap|read|pread|readv] [-r]
//   -s the file's size (default 96 MiB), written to /var/tmp (a disk: a
//      tmpfs file is memory, not cache) and removed on every way out.
//   -l the memory limit of the cgroup the readers run in (default 32 MiB;
//      memory.limit_in_bytes where cgroup v1's memory controller is
//      mounted, else memory.max); 0: no cgroup, no limit.
//   -p PROCS processes (default 1) read the one file, each mapping it;
//   -t THREADS per process split each pass between them.
//   -n PASSES over the file (default 0: until -d SECONDS, default 6, or
//      until killed).
//   -m mmap (default): read through a shared mapping, one byte a page;
//      read: read() 128 KiB at a time into a buffer, on an fd of each
//      thread's own (a file offset of its own), from its part's start
//      each pass; pread: pread() 128 KiB at a time on the shared fd;
//      readv: readv() of two 64 KiB buffers on an fd of its own.
//   -r random page order with MADV_RANDOM (no read-around): every page a
//      fault of its own.
// Each process prints its major and minor fault counts (getrusage) and its
// read calls when it ends: the ground truth sysray's counts are checked
// against. The file's
// pages are dropped from the page cache (fsync, then
// POSIX_FADV_DONTNEED) before the readers start, so each run starts cold;
// the cgroup is removed by a janitor child however the run ends.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096

static char root[128], cgdir[256], file[256];
static const char *limit_file;
static pid_t main_pid;
static long file_mib = 96, limit_mib = 32, passes, secs = 6;
static int threads = 1, rnd;
static const char *how = "mmap";
static volatile sig_atomic_t stop;
static double deadline;

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

static int put(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

// cleanup kills what is left in the cgroup, removes it and the file.
static void cleanup(void)
{
	unlink(file);
	if (!cgdir[0])
		return;
	char path[300], buf[4096];
	snprintf(path, sizeof(path), "%s/cgroup.procs", cgdir);
	for (int tries = 0; tries < 500; tries++) {
		int fd = open(path, O_RDONLY);
		ssize_t n = fd < 0 ? 0 : read(fd, buf, sizeof(buf) - 1);
		if (fd >= 0)
			close(fd);
		if (n > 0) {
			buf[n] = 0;
			for (char *s = strtok(buf, "\n"); s; s = strtok(NULL, "\n"))
				kill(atoi(s), SIGKILL);
		} else if (rmdir(cgdir) == 0 || errno == ENOENT) {
			return;
		}
		msleep(10);
	}
}

// janitor waits outside the cgroup for the main process to end, however
// it ends, then cleans up.
static void janitor(void)
{
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	int pfd = syscall(SYS_pidfd_open, main_pid, 0);
	if (pfd >= 0) {
		struct pollfd p = {.fd = pfd, .events = POLLIN};
		while (poll(&p, 1, -1) < 0 && errno == EINTR)
			;
	} else {
		while (getppid() == main_pid)
			msleep(50);
	}
	cleanup();
	_exit(0);
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int done(long pass)
{
	if (stop)
		return 1;
	if (passes)
		return pass >= passes;
	return deadline > 0 && now() >= deadline;
}

struct part {
	int fd;
	char *map;
	size_t lo, hi; // pages
	long passes;
	long calls; // read calls made
	uint64_t sum;
};

// A page order that visits every page of [lo, hi) once, in a scattered
// order: a stride prime to the count.
static size_t scatter(size_t i, size_t n)
{
	return (i * 2654435761u) % n;
}

static void *reader(void *arg)
{
	struct part *p = arg;
	size_t n = p->hi - p->lo;
	char *buf = NULL;
	int fd = p->fd;
	if (strcmp(how, "mmap")) {
		buf = malloc(128 << 10);
		// read() and readv() move the fd's offset: a thread (and a
		// process: a forked fd shares it) needs an fd of its own.
		if (strcmp(how, "pread") && (fd = open(file, O_RDONLY)) < 0) {
			perror(file);
			exit(1);
		}
	}
	for (long pass = 0; !done(pass); pass++) {
		if (buf) {
			size_t end = p->hi * PAGE;
			if (strcmp(how, "pread"))
				lseek(fd, p->lo * PAGE, SEEK_SET);
			for (size_t off = p->lo * PAGE; off < end && !stop;) {
				size_t want = end - off < (128 << 10) ? end - off : 128 << 10;
				ssize_t r;
				if (!strcmp(how, "pread")) {
					r = pread(fd, buf, want, off);
				} else if (!strcmp(how, "readv")) {
					struct iovec iov[2] = {{buf, want / 2}, {buf + want / 2, want - want / 2}};
					r = readv(fd, iov, 2);
				} else {
					r = read(fd, buf, want);
				}
				p->calls++;
				if (r <= 0)
					break;
				p->sum += (unsigned char)buf[r - 1];
				off += r;
			}
		} else {
			for (size_t i = 0; i < n && !stop; i++) {
				size_t pg = p->lo + (rnd ? scatter(i, n) : i);
				p->sum += ((volatile unsigned char *)p->map)[pg * PAGE];
			}
		}
		p->passes++;
	}
	free(buf);
	if (fd != p->fd)
		close(fd);
	return NULL;
}

static int run(int fd, size_t size)
{
	char *map = NULL;
	if (!strcmp(how, "mmap")) {
		map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
		if (map == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		if (rnd)
			madvise(map, size, MADV_RANDOM);
	}
	size_t pages = size / PAGE;
	struct part parts[64];
	pthread_t tids[64];
	for (int i = 0; i < threads; i++) {
		parts[i] = (struct part){.fd = fd, .map = map, .lo = pages * i / threads, .hi = pages * (i + 1) / threads};
		if (i > 0)
			pthread_create(&tids[i], NULL, reader, &parts[i]);
	}
	reader(&parts[0]);
	long total = parts[0].passes, calls = parts[0].calls;
	for (int i = 1; i < threads; i++) {
		pthread_join(tids[i], NULL);
		total += parts[i].passes;
		calls += parts[i].calls;
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	// One line per process, parsed by tests: keep its form.
	printf("thrash[%d]: passes=%ld majflt=%ld minflt=%ld reads=%ld\n", getpid(), total, ru.ru_majflt, ru.ru_minflt, calls);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	int procs = 1, opt;
	while ((opt = getopt(argc, argv, "s:l:p:t:n:d:m:r")) != -1) {
		switch (opt) {
		case 's': file_mib = atol(optarg); break;
		case 'l': limit_mib = atol(optarg); break;
		case 'p': procs = atoi(optarg); break;
		case 't': threads = atoi(optarg); break;
		case 'n': passes = atol(optarg); break;
		case 'd': secs = atol(optarg); break;
		case 'm': how = optarg; break;
		case 'r': rnd = 1; break;
		default:
			fprintf(stderr, "usage: thrash [-s MIB] [-l MIB] [-p N] [-t N] [-n PASSES] [-d S] [-m mmap|read|pread|readv] [-r]\n");
			return 2;
		}
	}
	if (file_mib < 1 || file_mib > 1024 || limit_mib < 0 || procs < 1 || procs > 32 || threads < 1 || threads > 64 ||
	    passes < 0 || secs < 0 || (strcmp(how, "mmap") && strcmp(how, "read") && strcmp(how, "pread") && strcmp(how, "readv"))) {
		fprintf(stderr, "thrash: bad arguments\n");
		return 2;
	}
	main_pid = getpid();
	snprintf(file, sizeof(file), "/var/tmp/sysray-thrash-%d", main_pid);
	struct stat st;
	if (limit_mib > 0) {
		if (stat("/sys/fs/cgroup/memory/cgroup.procs", &st) == 0) {
			strcpy(root, "/sys/fs/cgroup/memory");
			limit_file = "memory.limit_in_bytes";
		} else {
			strcpy(root, "/sys/fs/cgroup");
			limit_file = "memory.max";
		}
		snprintf(cgdir, sizeof(cgdir), "%s/sysray-variant-thrash-%d", root, main_pid);
	}
	if (fork() == 0)
		janitor();
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	// The file, written outside the cgroup, then dropped from the cache:
	// the readers find none of it there.
	size_t size = (size_t)file_mib << 20;
	int fd = open(file, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		perror(file);
		return 1;
	}
	char *chunk = malloc(1 << 20);
	for (size_t off = 0; off < size; off += 1 << 20) {
		for (int i = 0; i < (1 << 20); i += PAGE)
			chunk[i] = (char)(off / PAGE + i / PAGE);
		if (write(fd, chunk, 1 << 20) != 1 << 20) {
			perror("write");
			return 1;
		}
	}
	free(chunk);
	fsync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);

	if (cgdir[0]) {
		char path[300], val[32];
		if (mkdir(cgdir, 0755) < 0) {
			perror(cgdir);
			return 1;
		}
		snprintf(path, sizeof(path), "%s/%s", cgdir, limit_file);
		snprintf(val, sizeof(val), "%ld", limit_mib << 20);
		if (put(path, val) < 0) {
			perror(path);
			return 1;
		}
		snprintf(path, sizeof(path), "%s/cgroup.procs", cgdir);
		snprintf(val, sizeof(val), "%d", main_pid);
		if (put(path, val) < 0) {
			perror(path);
			return 1;
		}
	}
	fprintf(stderr, "thrash[%d]: %d process(es) x %d thread(s) reading a %ld MiB file by %s%s, %s%ld MiB limit\n", main_pid,
		procs, threads, file_mib, how, rnd ? " in random order" : "", cgdir[0] ? "" : "no cgroup, no ", limit_mib);
	if (!passes && secs > 0)
		deadline = now() + secs;
	int rc = 0;
	if (procs == 1) {
		rc = run(fd, size);
	} else {
		pid_t kids[32];
		for (int i = 0; i < procs; i++)
			if ((kids[i] = fork()) == 0)
				_exit(run(fd, size));
		// Not wait(): the janitor is a child too, and waits for this one.
		for (int i = 0; i < procs; i++) {
			int status;
			while (waitpid(kids[i], &status, 0) < 0 && errno == EINTR)
				;
			if (!WIFEXITED(status) || WEXITSTATUS(status))
				rc = 1;
		}
	}
	close(fd);
	unlink(file);
	return rc;
}
