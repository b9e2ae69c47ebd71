/*
 * Calls getppid exactly argv[1] times in each of argv[2] threads once it
 * gets SIGUSR1, prints "done" when all have, and stays alive with every thread blocked:
 * counts made by threads that are still alive when they are read.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static long n;
static pthread_barrier_t done;

static void *loop(void *arg)
{
	for (long i = 0; i < n; i++)
		syscall(SYS_getppid);
	pthread_barrier_wait(&done);
	for (;;)
		pause();
	return arg;
}

int main(int argc, char **argv)
{
	n = argc > 1 ? atol(argv[1]) : 10000;
	int threads = argc > 2 ? atoi(argv[2]) : 1;
	pthread_t t[64];
	if (threads < 1 || threads > 64)
		return 2;
	sigset_t set;
	int sig;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sigwait(&set, &sig);
	pthread_barrier_init(&done, NULL, threads + 1);
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, loop, NULL);
	pthread_barrier_wait(&done);
	printf("done\n");
	fflush(stdout);
	for (;;)
		pause();
}
