// mapcount: mmap fails with ENOMEM while the machine has gigabytes free.
//
// Every mapping (VMA) of a process counts against vm.max_map_count (65530
// by default), whatever its size. A program that maps many small regions
// the kernel cannot merge (different protections, guard pages, JIT code
// next to data) reaches that count long before it runs short of memory,
// and from then on mmap, and any mprotect or munmap that would split a
// mapping, return ENOMEM: "Cannot allocate memory", though MemAvailable is
// large. This program fills its own address space with one-page mappings
// of alternating protection (so no two neighbours merge; none is touched,
// so they cost no memory), then retries for a bounded time the way an
// allocator does: a 256 KiB mmap and an mprotect that splits a mapping,
// with a short back-off between tries. It changes no global state.
//
// mapcount [-p PROCS] [-t THREADS] [-d SECONDS] [-b BACKOFF_US]
//
// Each of PROCS processes (forked; 1: this process) fills its own address
// space, then THREADS threads retry in it. Printed on stderr, per process:
// "mapcount: full pid=N maps=M max_map_count=L mem_available_kb=K" when the
// mappings are in place (M is the kernel's count of the process's mappings:
// its /proc/PID/maps lines but [vsyscall]; it stays constant while the
// threads retry; on 6.18 it is one above L, as do_mmap refuses a count
// above the limit), and at the end a RESULT line with the ENOMEM counts.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int nthreads = 1;
static double duration = 3;
static long backoff_us = 1000;
static long page;

static char *reserve; // three pages, one mapping: mprotect of the middle one needs two splits
static double deadline;
static atomic_long enomem_mmap, enomem_mprotect, other_errors, successes;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long read_long(const char *path)
{
	char buf[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return strtol(buf, NULL, 10);
}

static long mem_available_kb(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return -1;
	char line[256];
	long kb = -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

// map_count counts the mappings the kernel holds against
// vm.max_map_count: the lines of /proc/self/maps but the [vsyscall] gate
// line, which the kernel shows every process without a VMA behind it.
static long map_count(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return -1;
	static char line[4096];
	long n = 0;
	while (fgets(line, sizeof line, f))
		if (strchr(line, '\n') && !strstr(line, "[vsyscall]"))
			n++;
	fclose(f);
	return n;
}

static pthread_barrier_t filled;

static void *retry(void *arg)
{
	if (arg)
		pthread_barrier_wait(&filled);
	while (now() < deadline) {
		void *p = mmap(NULL, 256 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			if (errno == ENOMEM)
				enomem_mmap++;
			else
				other_errors++;
		} else {
			successes++;
			munmap(p, 256 << 10);
		}
		if (mprotect(reserve + page, page, PROT_READ) == 0) {
			successes++;
			mprotect(reserve + page, page, PROT_READ | PROT_WRITE);
		} else if (errno == ENOMEM) {
			enomem_mprotect++;
		} else {
			other_errors++;
		}
		if (backoff_us > 0)
			usleep(backoff_us);
	}
	return NULL;
}

static int run(void)
{
	long limit = read_long("/proc/sys/vm/max_map_count");
	reserve = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (reserve == MAP_FAILED) {
		perror("mapcount: mmap reserve");
		return 1;
	}
	// Threads first, as a real program has them: their stacks are
	// mappings too, and pthread_create could not make one once the count
	// is reached. They wait for the fill.
	pthread_t *tids = calloc(nthreads, sizeof *tids);
	pthread_barrier_init(&filled, NULL, nthreads);
	for (int i = 1; i < nthreads; i++)
		if (pthread_create(&tids[i], NULL, retry, &filled) != 0) {
			perror("mapcount: pthread_create");
			return 1;
		}

	// Fill: one page at a time, each placed below the last (top-down
	// allocation) with the other protection, until mmap says ENOMEM.
	long mapped = 0;
	double t0 = now();
	for (;;) {
		int prot = mapped & 1 ? PROT_READ : PROT_NONE;
		void *p = mmap(NULL, page, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED) {
			if (errno != ENOMEM) {
				perror("mapcount: mmap");
				return 1;
			}
			break;
		}
		mapped++;
		if (mapped > 4 * (limit > 0 ? limit : 65530) + 1000) {
			fprintf(stderr, "mapcount: %ld mappings and no ENOMEM; giving up\n", mapped);
			return 1;
		}
	}
	double fill_s = now() - t0;
	long maps = map_count();
	long avail = mem_available_kb();
	fprintf(stderr, "mapcount: full pid=%d maps=%ld max_map_count=%ld mem_available_kb=%ld mapped=%ld fill_ms=%.0f\n",
		getpid(), maps, limit, avail, mapped, fill_s * 1e3);

	deadline = now() + duration;
	pthread_barrier_wait(&filled);
	retry(NULL);
	for (int i = 1; i < nthreads; i++)
		pthread_join(tids[i], NULL);
	fprintf(stderr, "RESULT pid=%d maps=%ld max_map_count=%ld mem_available_kb=%ld enomem_mmap=%ld enomem_mprotect=%ld successes=%ld other_errors=%ld threads=%d\n",
		getpid(), maps, limit, avail, (long)enomem_mmap, (long)enomem_mprotect, (long)successes,
		(long)other_errors, nthreads);
	return 0;
}

int main(int argc, char **argv)
{
	int procs = 1, c;
	while ((c = getopt(argc, argv, "p:t:d:b:")) != -1) {
		switch (c) {
		case 'p': procs = atoi(optarg); break;
		case 't': nthreads = atoi(optarg); break;
		case 'd': duration = atof(optarg); break;
		case 'b': backoff_us = atol(optarg); break;
		default:
			fprintf(stderr, "usage: mapcount [-p PROCS] [-t THREADS] [-d SECONDS] [-b BACKOFF_US]\n");
			return 2;
		}
	}
	page = sysconf(_SC_PAGESIZE);
	if (procs <= 1)
		return run();
	for (int i = 0; i < procs; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("mapcount: fork");
			break;
		}
		if (pid == 0)
			_exit(run());
	}
	int status, rc = 0;
	while (wait(&status) > 0)
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			rc = 1;
	return rc;
}
