// fdleak: a process that runs out of file descriptors. It lowers its own
// RLIMIT_NOFILE, then leaks descriptors of one kind until a call that
// creates one fails with EMFILE, and goes on trying (as a server does, once
// per request) for the rest of its run. The doctor's fd-exhaustion finding
// must name the call and the errno, the limit and what the descriptors
// are, whichever call hits the limit, however many processes and threads
// share it, and whether the leak began before sysray.
//
// usage: fdleak [-k KIND] [-l SOFT] [-H HARD] [-d SECONDS] [-p PROCS] [-t THREADS] [-i US]
//   KIND: file (openat of one log file, never closed), socket (UDP sockets
//   connected to 127.0.0.1, never closed, as a resolver that forgets its
//   sockets), pipe (pipe2, never closed), accept (a server on 127.0.0.1
//   that polls its non-blocking listener with epoll, accepts and never
//   closes what it accepted; a client process connects over and over, so
//   the accepted sockets sit in CLOSE_WAIT. Once the table is full,
//   accept4 fails with EMFILE, the connection stays queued, the listener
//   stays readable and the loop spins: the classic accept busy loop).
//   -l sets the soft limit (default 256), -H the hard one (default: the
//   soft). Each worker (-p processes, each with -t threads) leaks until
//   EMFILE, then retries every -i microseconds (default 1000; accept never
//   waits but in epoll_wait) until -d seconds (default 1) have passed.
// The log file is removed on exit and on SIGINT/SIGTERM/SIGHUP.
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
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *kind = "file";
static double secs = 1;
static long interval_us = 1000;
static char logpath[64];
static pid_t owner; // the process that made logpath, and removes it

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void cleanup(void)
{
	if (logpath[0] && getpid() == owner)
		unlink(logpath);
}

static void on_signal(int sig)
{
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

// One descriptor (two for a pipe) of the kind, or -1 with errno set.
static int leak_one(void)
{
	switch (kind[0]) {
	case 'f':
		return open(logpath, O_RDONLY | O_CLOEXEC);
	case 's': {
		int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		if (s >= 0)
			connect(s, (struct sockaddr *)&a, sizeof(a)); // UDP: no packet, just the peer
		return s;
	}
	case 'p': {
		int p[2];
		return pipe2(p, O_CLOEXEC) < 0 ? -1 : p[0];
	}
	}
	errno = EINVAL;
	return -1;
}

static void *leaker(void *arg)
{
	(void)arg;
	struct timespec gap = {interval_us / 1000000, (interval_us % 1000000) * 1000};
	long leaked = 0, failed = 0;
	int first = 0;
	double end = now() + secs;
	while (now() < end) {
		if (leak_one() >= 0) {
			leaked++;
			continue;
		}
		if (errno != EMFILE && errno != ENFILE) {
			perror("fdleak");
			exit(1);
		}
		if (!first++)
			fprintf(stderr, "fdleak[%d]: %s after %ld descriptors\n", getpid(), strerror(errno), leaked);
		failed++;
		nanosleep(&gap, NULL);
	}
	fprintf(stderr, "fdleak[%d]: leaked %ld, then %ld calls failed\n", getpid(), leaked, failed);
	return NULL;
}

// The client: connects, hangs up, again, until its parent is gone.
static void client(int port)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct timeval to = {0, 100000};
	struct timespec gap = {0, 2000000};
	for (;;) {
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &to, sizeof(to));
		connect(s, (struct sockaddr *)&a, sizeof(a));
		close(s);
		nanosleep(&gap, NULL);
	}
}

static void server(void)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t n = sizeof(a);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 128) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &n) < 0) {
		perror("fdleak: listen");
		exit(1);
	}
	pid_t c = fork();
	if (c == 0)
		client(ntohs(a.sin_port));
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = l};
	epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
	long accepted = 0, failed = 0;
	double end = now() + secs;
	while (now() < end) {
		if (epoll_wait(ep, &ev, 1, 100) <= 0)
			continue;
		for (;;) {
			int s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
			if (s >= 0) {
				accepted++; // and never closed
				continue;
			}
			if (errno == EMFILE || errno == ENFILE) {
				if (!failed++)
					fprintf(stderr, "fdleak[%d]: accept4: %s after %ld connections\n", getpid(), strerror(errno), accepted);
			} else if (errno != EAGAIN) {
				perror("fdleak: accept4");
			}
			break; // back to epoll_wait, which says the listener is readable
		}
	}
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	fprintf(stderr, "fdleak[%d]: accepted %ld, then accept4 failed %ld times\n", getpid(), accepted, failed);
}

static void work(int threads)
{
	if (kind[0] == 'a') {
		server();
		return;
	}
	pthread_t t[64];
	for (int i = 1; i < threads; i++)
		pthread_create(&t[i], NULL, leaker, NULL);
	leaker(NULL);
	for (int i = 1; i < threads; i++)
		pthread_join(t[i], NULL);
}

int main(int argc, char **argv)
{
	int procs = 1, threads = 1, opt;
	long soft = 256, hard = 0;
	while ((opt = getopt(argc, argv, "k:l:H:d:p:t:i:")) != -1) {
		switch (opt) {
		case 'k': kind = optarg; break;
		case 'l': soft = atol(optarg); break;
		case 'H': hard = atol(optarg); break;
		case 'd': secs = atof(optarg); break;
		case 'p': procs = atoi(optarg); break;
		case 't': threads = atoi(optarg); break;
		case 'i': interval_us = atol(optarg); break;
		default:
			fprintf(stderr, "usage: fdleak [-k file|socket|pipe|accept] [-l SOFT] [-H HARD] [-d S] [-p N] [-t N] [-i US]\n");
			return 2;
		}
	}
	if (!hard)
		hard = soft;
	if ((strcmp(kind, "file") && strcmp(kind, "socket") && strcmp(kind, "pipe") && strcmp(kind, "accept")) ||
	    procs < 1 || procs > 64 || threads < 1 || threads > 64 || soft < 16 || hard < soft || secs <= 0 || interval_us < 0) {
		fprintf(stderr, "fdleak: bad arguments\n");
		return 2;
	}
	owner = getpid();
	snprintf(logpath, sizeof(logpath), "/tmp/fdleak-%d.log", owner);
	if (kind[0] == 'f') {
		int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			perror(logpath);
			return 1;
		}
		close(fd);
		atexit(cleanup);
		signal(SIGINT, on_signal);
		signal(SIGTERM, on_signal);
		signal(SIGHUP, on_signal);
	} else {
		logpath[0] = 0;
	}
	struct rlimit rl = {soft, hard};
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
		perror("fdleak: setrlimit");
		return 1;
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
