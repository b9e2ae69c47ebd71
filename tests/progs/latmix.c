/*
 * Fast and slow calls with spread-out latencies, for checking stat's
 * percentiles against a record of the same run. Waits for SIGUSR1 (so a
 * second tracer can attach first), then for argv[1] seconds: reads of
 * /dev/zero of 4 to 64 KiB (microseconds, thousands a second: past stat's
 * timing budget, so sampled) and sleeps of 0.1 to 1.5 ms (slow).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t); /* the vDSO: no syscall */
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static char buf[64 << 10];
	double secs = argc > 1 ? atof(argv[1]) : 2;
	int fd = open("/dev/zero", O_RDONLY);
	sigset_t set;
	int sig;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sigwait(&set, &sig);
	srand(7);
	double end = now() + secs;
	while (now() < end) {
		for (int i = 0; i < 200; i++)
			read(fd, buf, (4 << 10) + rand() % (60 << 10));
		struct timespec ts = {0, (100 + rand() % 1400) * 1000};
		nanosleep(&ts, NULL);
	}
	return 0;
}
