/* Sleeps argv[1] ms (default 400) at a time, argv[2] times (default:
 * forever): known latencies, and always a sleep in flight. */
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	long ms = argc > 1 ? atol(argv[1]) : 400;
	long n = argc > 2 ? atol(argv[2]) : -1;
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000 * 1000};
	for (; n != 0; n--)
		nanosleep(&ts, NULL);
	return 0;
}
