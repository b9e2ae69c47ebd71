/* Sleeps 400 ms at a time, forever: known latencies, and always a sleep in flight. */
#include <time.h>

int main(void)
{
	struct timespec ts = {0, 400 * 1000 * 1000};
	for (;;)
		nanosleep(&ts, NULL);
}
