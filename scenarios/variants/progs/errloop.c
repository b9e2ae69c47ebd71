// errloop: a loop polling for something that is not there, so one syscall
// fails with one errno over and over: stat of a missing file (ENOENT), a
// read of an empty non-blocking pipe (EAGAIN), a connect to a port nobody
// listens on (ECONNREFUSED), kill(pid, 0) of a process that is gone
// (ESRCH). The doctor's error-storm finding must name the call and the
// errno whichever they are, however many processes and threads share the
// failures, however many calls (10,000 to 1,000,000), and whether the loop
// began before sysray.
//
// usage: errloop [-k KIND] [-n CALLS | -d SECONDS] [-p PROCS] [-t THREADS] [-i US] [-w SECONDS] [-b]
//   KIND: enoent (newfstatat of a missing path), eagain (read of an empty
//   O_NONBLOCK pipe), econnrefused (socket, connect to 127.0.0.1 on a port
//   with no listener, close), esrch (kill(pid, 0) of a reaped child).
//   Each worker (-p processes, each with -t threads) makes CALLS failing
//   calls (default 20000) or fails for SECONDS, -i microseconds apart.
//   -w waits this long before starting.
//   -b adds a busy neighbour: one more process that makes the same syscall
//   three times as often, successfully (stat of /, a read of a pipe that
//   has data, kill(getpid(), 0); not with econnrefused), as a build or a
//   busy service on the same host does.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *kind = "enoent";
static long calls = 20000, interval_us;
static double secs;
static int port;     // econnrefused: a port with no listener
static pid_t gone;   // esrch: a child already reaped
static int neighbour; // the same calls, made to succeed

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

// A loopback port that was free a moment ago: bound, then closed unlistened.
static int free_port(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t n = sizeof(a);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || getsockname(s, (struct sockaddr *)&a, &n) < 0) {
		perror("finding a free port");
		exit(1);
	}
	close(s);
	return ntohs(a.sin_port);
}

static void *worker(void *arg)
{
	(void)arg;
	int pfd[2] = {-1, -1};
	if (!strcmp(kind, "eagain") && pipe2(pfd, O_NONBLOCK) < 0) {
		perror("pipe2");
		exit(1);
	}
	const char *path = neighbour ? "/" : "/var/run/app/ready";
	pid_t target = neighbour ? getpid() : gone;
	int per = neighbour ? 3 : 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct timespec gap = {interval_us / 1000000, (interval_us % 1000000) * 1000};
	long n = 0, failed = 0;
	double end = now() + secs;
	for (; secs > 0 ? now() < end : n < calls; n++) {
		int r = 0;
		for (int k = 0; k < per; k++)
		switch (kind[1]) {
		case 'n': { // enoent
			struct stat st;
			r = stat(path, &st);
			break;
		}
		case 'a': { // eagain
			char c = 0;
			if (neighbour && write(pfd[1], &c, 1) < 0)
				exit(1);
			r = read(pfd[0], &c, 1);
			break;
		}
		case 'c': { // econnrefused
			int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			r = connect(s, (struct sockaddr *)&a, sizeof(a));
			close(s);
			break;
		}
		case 's': // esrch
			r = kill(target, 0);
			break;
		}
		failed += r < 0;
		if (interval_us)
			nanosleep(&gap, NULL);
	}
	fprintf(stderr, "errloop[%d]: %ld of %ld %s calls failed%s\n", getpid(), failed, n * per, kind,
		neighbour ? " (the busy neighbour)" : "");
	return NULL;
}

static void work(int threads)
{
	pthread_t t[64];
	for (int i = 1; i < threads; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	worker(NULL);
	for (int i = 1; i < threads; i++)
		pthread_join(t[i], NULL);
}

int main(int argc, char **argv)
{
	int procs = 1, threads = 1, busy = 0, opt;
	double wait = 0;
	while ((opt = getopt(argc, argv, "k:n:d:p:t:i:w:b")) != -1) {
		switch (opt) {
		case 'k': kind = optarg; break;
		case 'n': calls = atol(optarg); break;
		case 'd': secs = atof(optarg); break;
		case 'p': procs = atoi(optarg); break;
		case 't': threads = atoi(optarg); break;
		case 'i': interval_us = atol(optarg); break;
		case 'w': wait = atof(optarg); break;
		case 'b': busy = 1; break;
		default:
			fprintf(stderr, "usage: errloop [-k enoent|eagain|econnrefused|esrch] [-n N | -d S] [-p N] [-t N] [-i US] [-w S] [-b]\n");
			return 2;
		}
	}
	if ((strcmp(kind, "enoent") && strcmp(kind, "eagain") && strcmp(kind, "econnrefused") && strcmp(kind, "esrch")) ||
	    (busy && !strcmp(kind, "econnrefused")) ||
	    procs < 1 || procs > 64 || threads < 1 || threads > 64 || calls < 1 || secs < 0 || interval_us < 0) {
		fprintf(stderr, "errloop: bad arguments\n");
		return 2;
	}
	if (!strcmp(kind, "econnrefused"))
		port = free_port();
	if (!strcmp(kind, "esrch")) {
		if ((gone = fork()) == 0)
			_exit(0);
		waitpid(gone, NULL, 0);
	}
	if (wait > 0) {
		struct timespec w = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
		nanosleep(&w, NULL);
	}
	if (busy && fork() == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		neighbour = 1;
		work(1);
		_exit(0);
	}
	for (int i = 1; i < procs; i++)
		if (fork() == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			work(threads);
			_exit(0);
		}
	work(threads);
	while (wait4(-1, NULL, 0, NULL) > 0)
		;
	return 0;
}
