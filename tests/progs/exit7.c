/*
 * Threads that start and finish one at a time, then a last thread that ends
 * the process with exit(7) while main waits in pause(): deterministic, so
 * its syscall counts can be compared with strace's.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static void *worker(void *arg)
{
	/*
	 * Long enough that main is already waiting in pthread_join (a futex
	 * wait) when it ends: with 1 ms, a loaded host once let main reach
	 * the join late, found the thread gone, and made one futex call
	 * fewer than the run it was compared with.
	 */
	usleep(20000);
	if (arg)
		exit(7);
	return NULL;
}

int main(void)
{
	pthread_t t;
	for (int i = 0; i < 2; i++) {
		pthread_create(&t, NULL, worker, NULL);
		pthread_join(t, NULL);
	}
	pthread_create(&t, NULL, worker, (void *)1);
	for (;;)
		pause();
}
