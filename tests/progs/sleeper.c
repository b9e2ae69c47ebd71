/* Sleeps argv[1] ms (default 400) at a time, forever: known latencies, and always a sleep in flight. */
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	long ms = argc > 1 ? atol(argv[1]) : 400;
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000 * 1000};
	for (;;)
		nanosleep(&ts, NULL);
}
