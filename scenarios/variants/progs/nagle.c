/*
 * nagle: a request/response client and server on 127.0.0.1 whose requests
 * are written in two small writes. Without TCP_NODELAY, Nagle's algorithm
 * holds the second write until the first is acknowledged, and the server,
 * waiting for the rest of the request before it answers, acknowledges it
 * only when its delayed-ACK timer fires (40 ms at least on Linux,
 * TCP_DELACK_MIN): every reply read waits about 40 ms.
 *
 *   nagle [-p PROCS] [-n REQUESTS] [-N] [-1] [-s MS] [-w write|send|sendto|writev]
 *         [-r read|recv|recvfrom|poll] [-e N] [-d SECONDS] [-H HEADER] [-B BODY]
 *
 *   -p   client processes, each on its own connection (1)
 *   -n   requests per client (50); 0 with -d: until the time is up
 *   -N   set TCP_NODELAY on the client's socket (the fix)
 *   -1   write each request in one call (the other fix)
 *   -s   the server takes this many ms to answer (a slow server)
 *   -e   with -s, only every Nth request is slow (1: all)
 *   -w   the call that writes the request; writev writes header and body
 *        as two one-element writevs
 *   -r   the call that reads the reply (poll: poll for it, then read)
 *   -d   stop after this many seconds whatever -n says (10)
 *
 * Prints each client's median and maximum wait for a reply, and
 * RESULT procs=... requests=... median_us=... max_us=...
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int nprocs = 1, nreq = 50, nodelay, onewrite, slow_ms, every = 1;
static int header = 16, body = 48;
static double dur = 10;
static const char *wcall = "write", *rcall = "read";

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static int readfull(int fd, char *buf, int n)
{
	for (int got = 0; got < n;) {
		ssize_t r = read(fd, buf + got, n - got);
		if (r <= 0)
			return -1;
		got += r;
	}
	return 0;
}

/* The server reads a whole request (header then body) and answers it in one write. */
static void serve(int fd)
{
	char buf[65536];
	for (int n = 1;; n++) {
		if (readfull(fd, buf, header + body) < 0)
			return;
		if (slow_ms && n % every == 0) {
			struct timespec ts = {0, slow_ms * 1000000L};
			nanosleep(&ts, NULL);
		}
		if (write(fd, buf, 32) != 32)
			return;
	}
}

static void put(int fd, const char *buf, int n)
{
	ssize_t r;
	if (!strcmp(wcall, "send"))
		r = send(fd, buf, n, 0);
	else if (!strcmp(wcall, "sendto"))
		r = sendto(fd, buf, n, 0, NULL, 0);
	else if (!strcmp(wcall, "writev")) {
		struct iovec iov = {(void *)buf, n};
		r = writev(fd, &iov, 1);
	} else
		r = write(fd, buf, n);
	if (r != n)
		die(wcall);
}

static ssize_t get(int fd, char *buf, int n)
{
	if (!strcmp(rcall, "poll")) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, -1) < 0)
			die("poll");
		return read(fd, buf, n);
	}
	if (!strcmp(rcall, "recv"))
		return recv(fd, buf, n, 0);
	if (!strcmp(rcall, "recvfrom"))
		return recvfrom(fd, buf, n, 0, NULL, NULL);
	return read(fd, buf, n);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* One client: its own connection, requests one at a time. Exits with 0. */
static void client(struct sockaddr_in *addr, double end, int id)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	if (nodelay && setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int)) < 0)
		die("setsockopt");
	if (connect(fd, (struct sockaddr *)addr, sizeof(*addr)) < 0)
		die("connect");
	char req[65536], rep[64];
	memset(req, 'q', sizeof(req));
	int cap = nreq > 0 ? nreq : 100000, n = 0;
	double *waits = malloc(cap * sizeof(double));
	while ((nreq == 0 || n < nreq) && n < cap && now() < end) {
		if (onewrite)
			put(fd, req, header + body);
		else {
			put(fd, req, header);
			put(fd, req + header, body);
		}
		double t = now();
		for (int got = 0; got < 32;) {
			ssize_t r = get(fd, rep, 32 - got);
			if (r <= 0)
				die("read reply");
			got += r;
		}
		waits[n++] = now() - t;
	}
	qsort(waits, n, sizeof(double), cmp);
	double med = n ? waits[n / 2] : 0, mx = n ? waits[n - 1] : 0;
	printf("client %d: %d requests, reply waited median %.0f us, max %.0f us\n", id, n, med * 1e6, mx * 1e6);
	printf("RESULT client=%d requests=%d median_us=%.0f max_us=%.0f\n", id, n, med * 1e6, mx * 1e6);
	fflush(stdout);
	close(fd);
	exit(0);
}

int main(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "p:n:N1s:e:w:r:d:H:B:")) != -1) {
		switch (c) {
		case 'p': nprocs = atoi(optarg); break;
		case 'n': nreq = atoi(optarg); break;
		case 'N': nodelay = 1; break;
		case '1': onewrite = 1; break;
		case 's': slow_ms = atoi(optarg); break;
		case 'e': every = atoi(optarg); break;
		case 'w': wcall = optarg; break;
		case 'r': rcall = optarg; break;
		case 'd': dur = atof(optarg); break;
		case 'H': header = atoi(optarg); break;
		case 'B': body = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: nagle [-p PROCS] [-n REQUESTS] [-N] [-1] [-s MS [-e N]] [-w write|send|sendto|writev] [-r read|recv|recvfrom|poll] [-d SECONDS]\n");
			return 2;
		}
	}
	if (header < 1 || body < 1 || header + body > 65536 || nprocs < 1 || every < 1)
		die("sizes");
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0)
		die("socket");
	struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(addr);
	if (bind(ls, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(ls, 128) < 0 ||
	    getsockname(ls, (struct sockaddr *)&addr, &alen) < 0)
		die("listen");
	double end = now() + dur;
	/* A server process per connection, so each client has its own peer. */
	pid_t server = fork();
	if (server < 0)
		die("fork");
	if (server == 0) {
		alarm((unsigned)dur + 2);
		for (int i = 0; i < nprocs; i++) {
			int fd = accept(ls, NULL, NULL);
			if (fd < 0)
				die("accept");
			if (fork() == 0) {
				serve(fd);
				_exit(0);
			}
			close(fd);
		}
		while (wait(NULL) > 0)
			;
		_exit(0);
	}
	close(ls);
	for (int i = 0; i < nprocs; i++)
		if (fork() == 0)
			client(&addr, end, i);
	int bad = 0, st;
	while (wait(&st) > 0)
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad = 1;
	return bad;
}
