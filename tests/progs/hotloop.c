/*
 * Spends nearly all its time in one user function, hot_user(), then calls
 * getppid N times: a known hot user function and a known kernel path.
 * argv[1]: seconds of spinning; argv[2]: getppid calls.
 */
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long hot_user(double seconds)
{
	volatile unsigned long x = 0;
	double end = now() + seconds;
	while (now() < end)
		for (int i = 0; i < 100000; i++)
			x += i;
	return x;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1;
	long calls = argc > 2 ? atol(argv[2]) : 0;
	hot_user(secs);
	for (long i = 0; i < calls; i++)
		syscall(SYS_getppid);
	return 0;
}
