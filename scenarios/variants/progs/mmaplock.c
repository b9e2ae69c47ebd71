// mmaplock: threads of one process that change its address space while
// one of them holds the mmap lock for long.
//
//   mmaplock [-h populate|munmap|mprotect] [-w mprotect|mmap|brk|fault] [-t WAITERS] [-s MB] [-d SECONDS]
//
// The holder maps (with MAP_POPULATE) or unmaps -s MiB again and again, or
// (mprotect) changes the protection of a mapping of 2 × -s MiB whose first
// half it filled, again and again, holding the lock for writing while it
// rewrites every page's entry. Each waiter thread makes small calls that
// need the lock: mprotect of one page, mmap+munmap of 64 KiB, or brk up and
// down; or (fault, with -h mprotect) no call but a madvise a pass: it reads
// one page after another of its slice of the mapping's second half, each
// read a page fault, and a fault on a mapping being changed cannot use the
// mapping's own lock and waits for the process's mmap lock, outside any
// syscall.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
static const char *holdmode = "populate", *waitmode = "mprotect";
static size_t size = 512UL << 20;
static pthread_barrier_t ready; // the holder's mapping is made
static char *shared;            // -h mprotect: the holder's mapping
static int nwaiters;

static void *holder(void *a)
{
	(void)a;
	if (!strcmp(holdmode, "mprotect")) {
		shared = mmap(NULL, 2 * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (shared == MAP_FAILED) {
			perror("mmaplock: mmap");
			exit(1);
		}
		memset(shared, 1, size);
		pthread_barrier_wait(&ready);
		while (!stop) {
			mprotect(shared, 2 * size, PROT_READ);
			mprotect(shared, 2 * size, PROT_READ | PROT_WRITE);
		}
		return NULL;
	}
	pthread_barrier_wait(&ready);
	while (!stop) {
		char *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | (!strcmp(holdmode, "populate") ? MAP_POPULATE : 0), -1, 0);
		if (p == MAP_FAILED) {
			perror("mmaplock: mmap");
			exit(1);
		}
		if (strcmp(holdmode, "populate"))
			memset(p, 1, size); // faults, then a long munmap
		munmap(p, size);
	}
	return NULL;
}

// faulter reads its slice of the second half of the holder's mapping,
// a page at a time, each read of a page not mapped yet a fault; then lets
// the slice's pages go (MADV_DONTNEED) and reads it again.
static void *faulter(long i)
{
	size_t slice = size / nwaiters;
	volatile char *p = shared + size + i * slice;
	char sum = 0;
	while (!stop) {
		for (size_t off = 0; off < slice && !stop; off += 4096)
			sum += p[off];
		madvise((char *)p, slice, MADV_DONTNEED);
	}
	return (void *)(long)sum;
}

static void *waiter(void *a)
{
	pthread_barrier_wait(&ready);
	if (!strcmp(waitmode, "fault"))
		return faulter((long)a);
	char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned long cur = syscall(SYS_brk, 0);
	while (!stop) {
		if (!strcmp(waitmode, "mmap")) {
			char *q = mmap(NULL, 64 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			munmap(q, 64 << 10);
		} else if (!strcmp(waitmode, "brk")) {
			syscall(SYS_brk, cur + (1 << 20));
			syscall(SYS_brk, cur);
		} else {
			mprotect(p, 4096, PROT_READ);
			mprotect(p, 4096, PROT_READ | PROT_WRITE);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int waiters = 2, opt;
	double seconds = 2;
	while ((opt = getopt(argc, argv, "h:w:t:s:d:")) != -1) {
		switch (opt) {
		case 'h': holdmode = optarg; break;
		case 'w': waitmode = optarg; break;
		case 't': waiters = atoi(optarg); break;
		case 's': size = (size_t)atoi(optarg) << 20; break;
		case 'd': seconds = atof(optarg); break;
		default:
			fprintf(stderr, "usage: mmaplock [-h populate|munmap|mprotect] [-w mprotect|mmap|brk|fault] [-t WAITERS] [-s MB] [-d SECONDS]\n");
			return 2;
		}
	}
	if (waiters < 1 || waiters > 64) {
		fprintf(stderr, "mmaplock: -t 1..64\n");
		return 2;
	}
	if (!strcmp(waitmode, "fault") && strcmp(holdmode, "mprotect")) {
		fprintf(stderr, "mmaplock: -w fault needs -h mprotect\n");
		return 2;
	}
	// brk is the process's one heap: only one waiter may move it.
	if (!strcmp(waitmode, "brk"))
		waiters = 1;
	pthread_t t[65];
	nwaiters = waiters;
	pthread_barrier_init(&ready, NULL, waiters + 1);
	pthread_create(&t[0], NULL, holder, NULL);
	for (int i = 1; i <= waiters; i++)
		pthread_create(&t[i], NULL, waiter, (void *)(long)(i - 1));
	struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
	nanosleep(&ts, NULL);
	stop = 1;
	for (int i = 0; i <= waiters; i++)
		pthread_join(t[i], NULL);
	printf("RESULT holder=%s waiter=%s waiters=%d\n", holdmode, waitmode, waiters);
	return 0;
}
