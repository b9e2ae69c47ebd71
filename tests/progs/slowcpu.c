// Makes N getrandom calls of M MiB each (default 32): tens of milliseconds of
// kernel CPU apiece, without sleeping. Prints the total time inside them, in
// ns, as measured around each call.
//
// usage: slowcpu [N [M]]
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

static long long now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 5;
	size_t size = (size_t)(argc > 2 ? atoi(argv[2]) : 32) << 20;
	char *buf = malloc(size);
	long long total = 0;
	for (int i = 0; i < n; i++) {
		long long t = now();
		size_t got = 0;
		while (got < size) {
			ssize_t r = getrandom(buf + got, size - got, 0);
			if (r < 0)
				return 1;
			got += r;
		}
		total += now() - t;
	}
	printf("%lld\n", total);
	return 0;
}
