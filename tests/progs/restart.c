/*
 * One read of a pipe that a child fills after 210 ms, interrupted every 20
 * ms by a SIGALRM whose handler has SA_RESTART: the kernel ends each
 * attempt with -ERESTARTSYS, runs the handler, and the read starts again.
 * Prints how many times the handler ran; each time was one interrupted
 * read (the timer is armed just before the read and disarmed just after).
 * With argument "exit", the third handler calls _exit(0) instead of
 * returning: its read was interrupted, and then the process ended.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t alarms;
static int exit_at;

static void on_alarm(int sig)
{
	(void)sig;
	if (++alarms == exit_at)
		_exit(0);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "exit") == 0)
		exit_at = 3;
	int p[2];
	if (pipe(p))
		return 1;
	pid_t child = fork();
	if (child == 0) {
		usleep(210000);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		_exit(0);
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval on = {{0, 20000}, {0, 20000}}, off = {{0, 0}, {0, 0}};
	char c;
	setitimer(ITIMER_REAL, &on, NULL);
	ssize_t n = read(p[0], &c, 1);
	setitimer(ITIMER_REAL, &off, NULL);
	waitpid(child, NULL, 0);
	printf("%d %zd\n", (int)alarms, n);
	return 0;
}
