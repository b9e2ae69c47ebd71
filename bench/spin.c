/*
 * CPU-bound work for a fixed time; prints millions of iterations per second.
 * A sampler's cost shows as lost throughput.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3;
	volatile unsigned long x = 0;
	unsigned long iters = 0;
	double start = now(), end = start + secs, t;
	while ((t = now()) < end) {
		for (int i = 0; i < 100000; i++)
			x += i;
		iters += 100000;
	}
	printf("%.1f\n", iters / (t - start) / 1e6);
	return 0;
}
