/* Three threads, then exit status 7 from a non-main thread. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static void *worker(void *arg)
{
	usleep(1000);
	if (arg)
		exit(7);
	return NULL;
}

int main(void)
{
	pthread_t t[3];
	for (long i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, worker, (void *)(long)(i == 2));
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	return 0;
}
