// map32: thread stacks allocated the way glibc 2.3.2-2.8 did on x86_64.
//
// Those glibcs asked for every thread stack with MAP_32BIT (context switches
// were cheaper on early K8 when the TCB address fit in 32 bits), and when
// that failed retried without it (ARCH_RETRY_MMAP). MAP_32BIT only hands out
// addresses in [1 GiB, 2 GiB), so after about a thousand 1 MiB stacks every
// pthread_create pays for a failing mmap before the one that works. In 2008
// the failing call did a linear search of the low address space and thread
// creation got ~1000x slower; glibc 2.9 switched to MAP_STACK. This program
// creates threads with such stacks, keeps them alive, and prints how creation
// time and fork() time move as the thread count grows.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum mode { MODE_MAP32, MODE_STACK, MODE_GLIBC };
static const char *mode_names[] = {"map32", "stack", "glibc"};

static enum mode mode = MODE_MAP32;
static size_t stack_size = 1 << 20;
static size_t guard_size = 4096;
static int prot = PROT_READ | PROT_WRITE;

static pthread_mutex_t park_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cv = PTHREAD_COND_INITIALIZER;

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

// Workers park on a condition variable like an idle pool thread; they are
// never woken, the process exits under them.
static void *worker(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&park_mu);
	for (;;)
		pthread_cond_wait(&park_cv, &park_mu);
	return NULL;
}

struct alloc {
	void *mem;
	double first_us; // the first mmap, the MAP_32BIT one in map32 mode
	int low_failed;  // MAP_32BIT said no and we retried
};

// alloc_stack follows glibc 2.7's allocate_stack: one mmap for the whole
// stack, guard page at the low end made PROT_NONE.
static int alloc_stack(struct alloc *a)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS;
	double t0 = now_us();

	flags |= mode == MODE_MAP32 ? MAP_32BIT : MAP_STACK;
	a->low_failed = 0;
	a->mem = mmap(NULL, stack_size, prot, flags, -1, 0);
	a->first_us = now_us() - t0;
	if (a->mem == MAP_FAILED && mode == MODE_MAP32) {
		// ARCH_RETRY_MMAP: same request anywhere, and with PROT_EXEC.
		a->low_failed = 1;
		a->mem = mmap(NULL, stack_size, PROT_READ | PROT_WRITE | PROT_EXEC,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	}
	if (a->mem == MAP_FAILED)
		return errno;
	if (guard_size && mprotect(a->mem, guard_size, PROT_NONE) != 0)
		return errno;
	return 0;
}

static int count_vmas(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0, c;

	if (!f)
		return -1;
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

// fork_us times fork() as the parent sees it: copying the page tables and
// the VMA tree of a process that holds all those stacks.
static double fork_us(void)
{
	double t0 = now_us();
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	double el = now_us() - t0;
	if (pid < 0)
		return -1;
	waitpid(pid, NULL, 0);
	return el;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: map32 [-m map32|stack|glibc] [-n THREADS] [-s STACK_KIB] [-g GUARD_BYTES]\n"
		"             [-b BUCKET] [-x] [-F]\n"
		"  -m  map32: MAP_32BIT then retry without (glibc 2.3.2-2.8, default)\n"
		"      stack: MAP_STACK (glibc >= 2.9, the fix)\n"
		"      glibc: let this glibc allocate the stacks\n"
		"  -n  threads to create (default 3000)\n"
		"  -s  stack size in KiB, guard included (default 1024)\n"
		"  -g  guard bytes made PROT_NONE at the bottom (default 4096)\n"
		"  -b  threads per table row (default 100)\n"
		"  -x  map stacks PROT_EXEC as well (an executable-stack binary)\n"
		"  -F  do not time fork() after each row\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int nthreads = 3000, bucket = 100, do_fork = 1, opt;

	while ((opt = getopt(argc, argv, "m:n:s:g:b:xFh")) != -1) {
		switch (opt) {
		case 'm':
			for (mode = 0; mode < 3 && strcmp(optarg, mode_names[mode]); mode++)
				;
			if (mode == 3)
				usage();
			break;
		case 'n':
			nthreads = atoi(optarg);
			break;
		case 's':
			stack_size = (size_t)atol(optarg) << 10;
			break;
		case 'g':
			guard_size = (size_t)atol(optarg);
			break;
		case 'b':
			bucket = atoi(optarg);
			break;
		case 'x':
			prot |= PROT_EXEC;
			break;
		case 'F':
			do_fork = 0;
			break;
		default:
			usage();
		}
	}
	if (optind != argc || nthreads <= 0 || bucket <= 0 || stack_size < 65536 ||
	    guard_size % 4096 || guard_size >= stack_size)
		usage();

	printf("mode=%s threads=%d stack=%zuKiB guard=%zu\n", mode_names[mode], nthreads,
	       stack_size >> 10, guard_size);
	printf("%7s %10s %10s %9s %6s %9s\n", "threads", "create_us", "mmap_us", "low_fail",
	       "vmas", "fork_us");

	int first_fail = 0, created = 0, err = 0;
	double sum_before = 0, sum_after = 0, mmap_before = 0, mmap_after = 0;
	int n_before = 0, n_after = 0;
	double fork_first = -1, fork_last = -1;
	// Where the MAP_32BIT stacks landed, to show the 1 GiB window.
	uintptr_t lowest = UINTPTR_MAX, highest = 0;
	int low = 0;

	for (int row = 0; created < nthreads; row++) {
		double c_sum = 0, m_sum = 0;
		int fails = 0, in_row = 0;

		for (; in_row < bucket && created < nthreads; in_row++) {
			pthread_attr_t attr;
			pthread_t th;
			struct alloc a = {0};
			double t0 = now_us();

			pthread_attr_init(&attr);
			if (mode == MODE_GLIBC) {
				pthread_attr_setstacksize(&attr, stack_size);
				pthread_attr_setguardsize(&attr, guard_size);
			} else {
				err = alloc_stack(&a);
				if (err) {
					fprintf(stderr, "stack %d: mmap: %s\n", created, strerror(err));
					break;
				}
				pthread_attr_setstack(&attr, a.mem, stack_size);
			}
			err = pthread_create(&th, &attr, worker, NULL);
			double el = now_us() - t0;
			pthread_attr_destroy(&attr);
			if (err) {
				fprintf(stderr, "thread %d: pthread_create: %s\n", created, strerror(err));
				break;
			}
			created++;
			if (a.low_failed && !first_fail)
				first_fail = created;
			if (mode == MODE_MAP32 && !a.low_failed) {
				uintptr_t p = (uintptr_t)a.mem;
				lowest = p < lowest ? p : lowest;
				highest = p > highest ? p : highest;
				low++;
			}
			fails += a.low_failed;
			c_sum += el;
			m_sum += a.first_us;
			if (first_fail) {
				sum_after += el, mmap_after += a.first_us, n_after++;
			} else {
				sum_before += el, mmap_before += a.first_us, n_before++;
			}
		}
		if (in_row == 0)
			break;
		double f = do_fork ? fork_us() : -1;
		if (fork_first < 0)
			fork_first = f;
		fork_last = f;
		printf("%7d %10.1f %10.2f %9d %6d %9.0f\n", created, c_sum / in_row, m_sum / in_row,
		       fails, count_vmas(), f);
		fflush(stdout);
		if (err)
			break;
	}

	if (mode == MODE_MAP32) {
		if (low)
			printf("MAP_32BIT stacks: %d in [%#lx, %#lx)\n", low, (unsigned long)lowest,
			       (unsigned long)(highest + stack_size));
		if (first_fail)
			printf("MAP_32BIT first failed at thread %d\n", first_fail);
		else
			printf("MAP_32BIT never failed\n");
	}
	printf("RESULT mode=%s threads=%d first_fail=%d create_us_before=%.1f create_us_after=%.1f "
	       "mmap_us_before=%.2f mmap_us_after=%.2f fork_us_first=%.0f fork_us_last=%.0f "
	       "error=%s\n",
	       mode_names[mode], created, first_fail, n_before ? sum_before / n_before : 0,
	       n_after ? sum_after / n_after : 0, n_before ? mmap_before / n_before : 0,
	       n_after ? mmap_after / n_after : 0, fork_first, fork_last, err ? strerrorname_np(err) : "none");
	return err ? 1 : 0;
}
