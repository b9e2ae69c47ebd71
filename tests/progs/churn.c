/*
 * Once it gets SIGUSR1: argv[3] rounds of argv[2] threads started and
 * joined, each calling getppid exactly argv[1] times; then argv[2] more
 * that do the same and stay alive. Prints "done" when all have, then
 * blocks. A thread that exits frees its kernel stack for the next thread,
 * in this process or another one: counts must follow the thread, not the
 * stack (bpf/fast.h keys a thread's counts by its stack's address).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static long n;
static pthread_barrier_t done;

static void calls(void)
{
	for (long i = 0; i < n; i++)
		syscall(SYS_getppid);
}

static void *once(void *arg)
{
	calls();
	return arg;
}

static void *stay(void *arg)
{
	calls();
	pthread_barrier_wait(&done);
	for (;;)
		pause();
	return arg;
}

int main(int argc, char **argv)
{
	n = argc > 1 ? atol(argv[1]) : 1000;
	int threads = argc > 2 ? atoi(argv[2]) : 4;
	int rounds = argc > 3 ? atoi(argv[3]) : 10;
	pthread_t t[64];
	if (threads < 1 || threads > 64)
		return 2;
	sigset_t set;
	int sig;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sigwait(&set, &sig);
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < threads; i++)
			pthread_create(&t[i], NULL, once, NULL);
		for (int i = 0; i < threads; i++)
			pthread_join(t[i], NULL);
	}
	pthread_barrier_init(&done, NULL, threads + 1);
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, stay, NULL);
	pthread_barrier_wait(&done);
	printf("done\n");
	fflush(stdout);
	for (;;)
		pause();
}
