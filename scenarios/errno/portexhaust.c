// portexhaust: connect fails with EADDRNOTAVAIL, "Cannot assign requested
// address", though the address is there.
//
// A client that opens a connection per request and closes it first keeps
// each connection's local port in TIME_WAIT for 60 s (TCP_TIMEWAIT_LEN, a
// constant; net.ipv4.tcp_fin_timeout is another timer). connect picks its
// local port from net.ipv4.ip_local_port_range, and once every port of the
// range is held in TIME_WAIT towards the same server address and port, it
// returns EADDRNOTAVAIL. tcp_tw_reuse=2, the default, lets connect reuse a
// TIME_WAIT port only for loopback addresses, so the server here listens on
// 10.200.0.1 (put on lo), which the kernel treats as any remote server.
//
// portexhaust [-n PORTS] [-d SECONDS] [-c CLIENTS] [-b BACKOFF_US] [-l] [-k | -- CMD ARG...]
//
// It runs in a network namespace of its own (unshare(CLONE_NEWNET)), with lo
// up and ip_local_port_range narrowed to PORTS ports (default 64) there: the
// namespace, and all it holds, goes away with the process however it ends,
// so nothing global changes. CLIENTS threads (default 1) connect, send a
// byte, read the reply and close, until connect says EADDRNOTAVAIL, then
// retry every BACKOFF_US (default 10000) for SECONDS (default 3). -l uses
// 127.0.0.1 instead, where tcp_tw_reuse=2 reuses a port whose TIME_WAIT is
// more than a second old, so refusals mix with successes.
//
// With -- CMD it makes the namespace and runs CMD in it instead (a recorder
// started there stores the namespace's port range in its capture's header),
// and -k runs the clients in the namespace as it is:
//   portexhaust -- sysray record -w f -- portexhaust -k
//
// Printed on stderr: "portexhaust: full pid=N connects=C range=LO-HI
// addr=A" when connect first fails, and a RESULT line at the end.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int ports = 64;
static double duration = 3;
static int clients = 1;
static long backoff_us = 10000;
static const char *addr = "10.200.0.1";
static const int server_port = 8080;
static int range_lo = 50000;
static int keep; // -k: run in the namespace as it is

static struct sockaddr_in server;
static atomic_long connects, eaddrnotavail, other_errors;
static atomic_int full_printed;
static double deadline;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

// setup_netns makes a network namespace for this process: lo up, the
// server's address on it, and the narrow port range.
static int setup_netns(void)
{
	if (unshare(CLONE_NEWNET) < 0) {
		perror("portexhaust: unshare(CLONE_NEWNET)");
		return -1;
	}
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr = {0};
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		goto fail;
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		goto fail;
	if (strcmp(addr, "127.0.0.1") != 0) {
		memset(&ifr, 0, sizeof ifr);
		strcpy(ifr.ifr_name, "lo:1");
		struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
		sin->sin_family = AF_INET;
		inet_pton(AF_INET, addr, &sin->sin_addr);
		if (ioctl(s, SIOCSIFADDR, &ifr) < 0)
			goto fail;
	}
	close(s);
	char range[64];
	snprintf(range, sizeof range, "%d %d\n", range_lo, range_lo + ports - 1);
	if (write_str("/proc/sys/net/ipv4/ip_local_port_range", range) < 0) {
		perror("portexhaust: ip_local_port_range");
		return -1;
	}
	return 0;
fail:
	perror("portexhaust: configuring lo");
	close(s);
	return -1;
}

// serve answers each connection's byte and closes after the client does,
// so that the client's side is the one left in TIME_WAIT.
static void *serve(void *arg)
{
	int ls = *(int *)arg;
	for (;;) {
		int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		char b;
		if (read(c, &b, 1) == 1 && write(c, "y", 1) == 1)
			while (read(c, &b, 1) > 0)
				;
		close(c);
	}
	return NULL;
}

// request is one connection: connect, a byte each way, close. It returns
// connect's errno, or 0.
static int request(void)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return errno;
	if (connect(s, (struct sockaddr *)&server, sizeof server) < 0) {
		int err = errno;
		close(s);
		return err;
	}
	char b;
	if (write(s, "x", 1) != 1 || read(s, &b, 1) != 1)
		other_errors++;
	close(s);
	return 0;
}

static void *client(void *arg)
{
	(void)arg;
	// Until the first refusal, as fast as the server answers.
	for (;;) {
		int err = request();
		if (err == 0) {
			connects++;
			if (connects > 100L * ports + 10000 || now() > deadline)
				return NULL;
			continue;
		}
		if (err == EADDRNOTAVAIL)
			break;
		other_errors++;
		if (now() > deadline)
			return NULL;
	}
	eaddrnotavail++;
	if (!atomic_exchange(&full_printed, 1))
		fprintf(stderr, "portexhaust: full pid=%d connects=%ld range=%d-%d addr=%s\n",
			getpid(), (long)connects, range_lo, range_lo + ports - 1, addr);
	while (now() < deadline) {
		usleep(backoff_us);
		int err = request();
		if (err == 0)
			connects++;
		else if (err == EADDRNOTAVAIL)
			eaddrnotavail++;
		else
			other_errors++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "+n:d:c:b:lk")) != -1) {
		switch (c) {
		case 'n': ports = atoi(optarg); break;
		case 'd': duration = atof(optarg); break;
		case 'c': clients = atoi(optarg); break;
		case 'b': backoff_us = atol(optarg); break;
		case 'l': addr = "127.0.0.1"; break;
		case 'k': keep = 1; break;
		default:
			fprintf(stderr, "usage: portexhaust [-n PORTS] [-d SECONDS] [-c CLIENTS] [-b BACKOFF_US] [-l] [-k | -- CMD ARG...]\n");
			return 2;
		}
	}
	if (ports < 2 || clients < 1) {
		fprintf(stderr, "portexhaust: -n needs at least 2 ports, -c a client\n");
		return 2;
	}
	if (keep) {
		// Inside a namespace an outer portexhaust made: its range.
		FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
		int lo = 0, hi = 0;
		if (!f || fscanf(f, "%d %d", &lo, &hi) != 2 || hi < lo) {
			fprintf(stderr, "portexhaust: reading ip_local_port_range\n");
			return 1;
		}
		fclose(f);
		if (hi - lo + 1 > 4096) {
			fprintf(stderr, "portexhaust: -k in a namespace with %d ports (the host's?): run it under portexhaust -- CMD\n", hi - lo + 1);
			return 1;
		}
		range_lo = lo;
		ports = hi - lo + 1;
	} else if (setup_netns() < 0) {
		return 1;
	}
	if (optind < argc) {
		// The namespace is ready: CMD runs in it and ends with us.
		pid_t pid = fork();
		if (pid < 0) {
			perror("portexhaust: fork");
			return 1;
		}
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGTERM);
			execvp(argv[optind], argv + optind);
			fprintf(stderr, "portexhaust: %s: %s\n", argv[optind], strerror(errno));
			_exit(127);
		}
		signal(SIGINT, SIG_IGN); // the terminal's Ctrl-C reaches CMD itself
		int status;
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	}
	server.sin_family = AF_INET;
	server.sin_port = htons(server_port);
	inet_pton(AF_INET, addr, &server.sin_addr);
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(ls, (struct sockaddr *)&server, sizeof server) < 0 || listen(ls, 128) < 0) {
		perror("portexhaust: listen");
		return 1;
	}
	pthread_t srv;
	pthread_create(&srv, NULL, serve, &ls);
	deadline = now() + duration;
	pthread_t *tids = calloc(clients, sizeof *tids);
	for (int i = 1; i < clients; i++)
		pthread_create(&tids[i], NULL, client, NULL);
	client(NULL);
	for (int i = 1; i < clients; i++)
		pthread_join(tids[i], NULL);
	fprintf(stderr, "RESULT pid=%d ports=%d range=%d-%d addr=%s connects=%ld eaddrnotavail=%ld other_errors=%ld clients=%d\n",
		getpid(), ports, range_lo, range_lo + ports - 1, addr, (long)connects, (long)eaddrnotavail,
		(long)other_errors, clients);
	return 0;
}
