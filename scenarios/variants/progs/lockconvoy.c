// lockconvoy: threads serialised on one lock, most of their life asleep in
// futex: the lock-convoy story (docs/detectors/lock-convoy.md).
//
// usage: lockconvoy [-t THREADS] [-p PROCS] [-d SECONDS] [-l KIND] [-w US]
//                   [-o US] [-m MODE] [-i MS]
//   -t threads per process (8); -p processes, each its own lock and
//   threads (1); -d how long, 0 until killed (3).
//   -l the lock: mutex (a default pthread mutex: FUTEX_WAIT and FUTEX_WAKE
//      from glibc's lll_lock), rwlock (pthread_rwlock_wrlock: every taker a
//      writer), pi (a PTHREAD_PRIO_INHERIT mutex: FUTEX_LOCK_PI and
//      FUTEX_UNLOCK_PI), spin (a lock of its own that spins 200 times
//      before it calls futex, and counts its calls: the ground truth).
//   -w microseconds of work inside the lock (20); -o outside it (2).
//   -m convoy (the default), or idle: the benign cousin, a pool of -t
//      workers parked on a condition variable that the main thread signals
//      once every -i milliseconds (100) with one short task.
// At the end each process prints one line: its pid, the lock's address,
// the acquisitions, how many found the lock taken, and (spin) the futex
// calls it made: waits, the waits that found the word changed (EAGAIN),
// wakes, and the threads the wakes woke.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int nthreads = 8, nprocs = 1, work_in = 20, work_out = 2, interval_ms = 100;
static double duration = 3;
static const char *kind = "mutex", *mode = "convoy";

static pthread_mutex_t mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw;
static _Atomic int spin_word; // 0 free, 1 taken, 2 taken with waiters
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int tasks;
static atomic_int stop;

static atomic_ulong acquisitions, contended, f_waits, f_again, f_wakes, f_woke;
static double loops_per_us = 100;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

// Work the CPU does, no syscall: a calibrated loop.
static void spin_us(int us)
{
	volatile unsigned long x = 0;
	long n = (long)(us * loops_per_us);
	for (long i = 0; i < n; i++)
		x += i;
}

static void calibrate(void)
{
	double t = now_s();
	spin_us(10000); // 1e6 loops at the guess
	double el = now_s() - t;
	if (el > 0)
		loops_per_us = 1e6 / (el * 1e6);
}

static long futex(_Atomic int *addr, int op, int val)
{
	return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

// Drepper's "Futexes are tricky" mutex 3, spinning first.
__attribute__((noinline)) static void spin_lock(void)
{
	int c = 0;
	if (atomic_compare_exchange_strong(&spin_word, &c, 1))
		return;
	for (int i = 0; i < 200; i++) {
		c = 0;
		if (atomic_load_explicit(&spin_word, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong(&spin_word, &c, 1))
			return;
		__builtin_ia32_pause();
	}
	atomic_fetch_add(&contended, 1);
	c = atomic_exchange(&spin_word, 2);
	while (c != 0) {
		long r = futex(&spin_word, FUTEX_WAIT_PRIVATE, 2);
		atomic_fetch_add(&f_waits, 1);
		if (r < 0 && errno == EAGAIN)
			atomic_fetch_add(&f_again, 1);
		c = atomic_exchange(&spin_word, 2);
	}
}

__attribute__((noinline)) static void spin_unlock(void)
{
	if (atomic_exchange(&spin_word, 0) == 2) {
		long r = futex(&spin_word, FUTEX_WAKE_PRIVATE, 1);
		atomic_fetch_add(&f_wakes, 1);
		if (r > 0)
			atomic_fetch_add(&f_woke, r);
	}
}

__attribute__((noinline)) static void take(void)
{
	if (!strcmp(kind, "spin")) {
		spin_lock();
	} else if (!strcmp(kind, "rwlock")) {
		if (pthread_rwlock_trywrlock(&rw) != 0) {
			atomic_fetch_add(&contended, 1);
			pthread_rwlock_wrlock(&rw);
		}
	} else {
		if (pthread_mutex_trylock(&mtx) != 0) {
			atomic_fetch_add(&contended, 1);
			pthread_mutex_lock(&mtx);
		}
	}
	atomic_fetch_add(&acquisitions, 1);
}

__attribute__((noinline)) static void release(void)
{
	if (!strcmp(kind, "spin"))
		spin_unlock();
	else if (!strcmp(kind, "rwlock"))
		pthread_rwlock_unlock(&rw);
	else
		pthread_mutex_unlock(&mtx);
}

__attribute__((noinline)) static void *convoy_thread(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		take();
		spin_us(work_in);
		release();
		spin_us(work_out);
	}
	return NULL;
}

static void *idle_worker(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mtx);
	while (!atomic_load(&stop)) {
		while (!tasks && !atomic_load(&stop))
			pthread_cond_wait(&cond, &mtx);
		if (!tasks)
			break;
		tasks--;
		atomic_fetch_add(&acquisitions, 1);
		pthread_mutex_unlock(&mtx);
		spin_us(work_in);
		pthread_mutex_lock(&mtx);
	}
	pthread_mutex_unlock(&mtx);
	return NULL;
}

static void on_term(int sig)
{
	(void)sig;
	atomic_store(&stop, 1);
}

static int run(void)
{
	if (!strcmp(kind, "pi")) {
		pthread_mutexattr_t a;
		pthread_mutexattr_init(&a);
		pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT);
		pthread_mutex_init(&mtx, &a);
	}
	pthread_rwlockattr_t ra;
	pthread_rwlockattr_init(&ra);
	pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&rw, &ra);
	bool idle = !strcmp(mode, "idle");
	pthread_t *th = calloc(nthreads, sizeof(*th));
	for (int i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, idle ? idle_worker : convoy_thread, NULL);
	double end = duration > 0 ? now_s() + duration : 0;
	while (!atomic_load(&stop) && (!end || now_s() < end)) {
		if (idle) {
			usleep(interval_ms * 1000);
			pthread_mutex_lock(&mtx);
			tasks++;
			pthread_cond_signal(&cond);
			pthread_mutex_unlock(&mtx);
		} else {
			usleep(20000);
		}
	}
	atomic_store(&stop, 1);
	if (idle) {
		pthread_mutex_lock(&mtx);
		pthread_cond_broadcast(&cond);
		pthread_mutex_unlock(&mtx);
	}
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	void *lock = !strcmp(kind, "spin") ? (void *)&spin_word : !strcmp(kind, "rwlock") ? (void *)&rw : (void *)&mtx;
	printf("lockconvoy: pid=%d lock=%p kind=%s mode=%s threads=%d acquisitions=%lu contended=%lu futex_waits=%lu futex_again=%lu futex_wakes=%lu futex_woke=%lu\n",
	       getpid(), lock, kind, mode, nthreads, atomic_load(&acquisitions), atomic_load(&contended),
	       atomic_load(&f_waits), atomic_load(&f_again), atomic_load(&f_wakes), atomic_load(&f_woke));
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	int opt;
	while ((opt = getopt(argc, argv, "t:p:d:l:w:o:m:i:")) != -1) {
		switch (opt) {
		case 't': nthreads = atoi(optarg); break;
		case 'p': nprocs = atoi(optarg); break;
		case 'd': duration = atof(optarg); break;
		case 'l': kind = optarg; break;
		case 'w': work_in = atoi(optarg); break;
		case 'o': work_out = atoi(optarg); break;
		case 'm': mode = optarg; break;
		case 'i': interval_ms = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: lockconvoy [-t THREADS] [-p PROCS] [-d SECONDS] [-l mutex|rwlock|pi|spin] [-w US] [-o US] [-m convoy|idle] [-i MS]\n");
			return 2;
		}
	}
	if (strcmp(kind, "mutex") && strcmp(kind, "rwlock") && strcmp(kind, "pi") && strcmp(kind, "spin")) {
		fprintf(stderr, "lockconvoy: unknown lock %s\n", kind);
		return 2;
	}
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	calibrate();
	if (nprocs <= 1)
		return run();
	for (int i = 0; i < nprocs; i++) {
		pid_t p = fork();
		if (p == 0) {
			// Killed with the parent, however it ends (the variants kill it).
			prctl(PR_SET_PDEATHSIG, SIGTERM);
			if (getppid() == 1)
				return 0;
			return run();
		}
	}
	// A signal ends the parent at once; its children then get SIGTERM.
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	int st, rc = 0;
	while (wait(&st) > 0)
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			rc = 1;
	return rc;
}
