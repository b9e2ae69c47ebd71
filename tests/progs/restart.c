/*
 * One read of a pipe, interrupted every 20 ms by a SIGALRM whose handler
 * has SA_RESTART: the kernel ends each attempt with -ERESTARTSYS, runs the
 * handler, and the read starts again. The tenth handler disarms the timer
 * and writes the byte the read then returns. Prints how many times the
 * handler ran; each time was one interrupted read. (A child wrote the byte
 * at 210 ms once: on a loaded host the reader, woken by the alarm of 200
 * ms, ran only after that write, so its read returned the byte and the
 * handler ran on the way out: ten handlers, nine interrupted reads.)
 * With argument "exit", the third handler calls _exit(0) instead of
 * returning: its read was interrupted, and then the process ended.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static volatile sig_atomic_t alarms;
static int exit_at, wfd;
static const int last = 10;

static void on_alarm(int sig)
{
	(void)sig;
	if (++alarms == exit_at)
		_exit(0);
	if (alarms == last) {
		struct itimerval off = {{0, 0}, {0, 0}};
		setitimer(ITIMER_REAL, &off, NULL);
		if (write(wfd, "x", 1) != 1)
			_exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "exit") == 0)
		exit_at = 3;
	int p[2];
	if (pipe(p))
		return 1;
	wfd = p[1];
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval on = {{0, 20000}, {0, 20000}};
	char c;
	setitimer(ITIMER_REAL, &on, NULL);
	ssize_t n = read(p[0], &c, 1);
	printf("%d %zd\n", (int)alarms, n);
	return 0;
}
