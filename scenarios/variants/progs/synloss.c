/*
 * synloss: TCP connects that wait out SYN retransmission timeouts. It
 * builds a pair of network namespaces of its own joined by a veth pair
 * (client 10.221.0.1, server 10.221.0.2, a /30 no other scenario uses),
 * and in the server's namespace either an nftables rule that drops the
 * first SYN of every connect (numgen inc mod K+1: K of every K+1 SYNs,
 * so each connect's first K SYNs are lost and the next one passes), or a
 * listener with a backlog of 1 that never accepts, so its accept queue is
 * full and the kernel drops every further SYN (ListenOverflows). The
 * client's kernel retransmits the SYN after 1 s (TCP_TIMEOUT_INIT), then
 * by tcp_syn_linear_timeouts and tcp_syn_retries: each connect takes
 * about 1 s per lost SYN while the first ones are lost.
 *
 *   synloss [-n CONNECTS] [-k LOST] [-o] [-P] [-d SECONDS] [-c]
 *
 *   -n   connects to make, one after the other (4); 0 with -d: until the
 *        time is up
 *   -k   SYNs lost before one passes, for every connect (1)
 *   -o   no drop rule: the server listens with a backlog of 1 and never
 *        accepts; the client's sockets retry the SYN once (TCP_SYNCNT 1),
 *        so a connect that finds the queue full fails with ETIMEDOUT
 *   -P   non-blocking connects: connect returns EINPROGRESS and poll
 *        waits for the socket to be writable
 *   -c   benign: connect to a closed port of the server (RST at once,
 *        ECONNREFUSED), no drop rule
 *   -d   stop after this many seconds whatever -n says (20)
 *
 * Everything it makes lives in the two namespaces, which the kernel
 * removes when the client and the server exit; the server exits when the
 * client does (it reads the pipe the client holds). Prints one line a
 * connect and RESULT connects=... slow=... timedout=... refused=...
 * median_ms=... max_ms=...
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CLIENT "10.221.0.1"
#define SERVER "10.221.0.2"
#define PORT 8080
#define CLOSED_PORT 8081
#define MAXN 4096

static int nconn = 4, lost = 1, overflow, nonblock, closedport;
static double dur = 20;

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

static void sh(const char *cmd)
{
	int rc = system(cmd);
	if (rc != 0) {
		fprintf(stderr, "synloss: `%s` failed (%d)\n", cmd, rc);
		exit(1);
	}
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* server: in its own namespace, configure its end, then listen. */
static void server(int go, int ready, int life)
{
	char c, cmd[512];
	if (unshare(CLONE_NEWNET) < 0)
		die("synloss: unshare(CLONE_NEWNET) (server)");
	if (write(ready, "n", 1) != 1) /* namespace made: the client adds the veth */
		die("synloss: write");
	if (read(go, &c, 1) != 1)
		exit(1);
	sh("ip link set lo up && ip addr add " SERVER "/30 dev slv1 && ip link set slv1 up");
	if (!overflow && !closedport && lost > 0) {
		snprintf(cmd, sizeof cmd,
			 "nft add table inet synloss && "
			 "nft add chain inet synloss in '{ type filter hook input priority 0; }' && "
			 "nft add rule inet synloss in tcp dport %d 'tcp flags & (syn|ack) == syn' numgen inc mod %d '<' %d drop",
			 PORT, lost + 1, lost);
		sh(cmd);
	}
	int s = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(PORT)};
	inet_pton(AF_INET, SERVER, &a.sin_addr);
	if (bind(s, (struct sockaddr *)&a, sizeof a) < 0)
		die("synloss: bind");
	if (listen(s, overflow ? 1 : 128) < 0)
		die("synloss: listen");
	if (write(ready, "l", 1) != 1)
		die("synloss: write");
	if (overflow) {
		/* Never accept: wait for the client to exit (life reads EOF). */
		while (read(life, &c, 1) > 0)
			;
		exit(0);
	}
	struct pollfd p[2] = {{.fd = s, .events = POLLIN}, {.fd = life, .events = POLLIN}};
	for (;;) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			die("synloss: poll");
		if (p[1].revents)
			exit(0);
		if (p[0].revents) {
			int c2 = accept(s, NULL, NULL);
			if (c2 >= 0)
				close(c2);
		}
	}
}

int main(int argc, char **argv)
{
	int o;
	while ((o = getopt(argc, argv, "n:k:oPcd:")) != -1) {
		switch (o) {
		case 'n': nconn = atoi(optarg); break;
		case 'k': lost = atoi(optarg); break;
		case 'o': overflow = 1; break;
		case 'P': nonblock = 1; break;
		case 'c': closedport = 1; break;
		case 'd': dur = atof(optarg); break;
		default:
			fprintf(stderr, "usage: synloss [-n CONNECTS] [-k LOST] [-o] [-P] [-c] [-d SECONDS]\n");
			return 2;
		}
	}
	if (nconn < 0 || nconn > MAXN || lost < 0 || lost > 5 || dur <= 0 || dur > 300) {
		fprintf(stderr, "synloss: -n 0..%d, -k 0..5, -d up to 300\n", MAXN);
		return 2;
	}
	if (nconn == 0)
		nconn = MAXN;
	if (unshare(CLONE_NEWNET) < 0)
		die("synloss: unshare(CLONE_NEWNET) (client)");
	int go[2], ready[2], life[2];
	if (pipe(go) < 0 || pipe(ready) < 0 || pipe(life) < 0)
		die("synloss: pipe");
	pid_t srv = fork();
	if (srv < 0)
		die("synloss: fork");
	if (srv == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(go[1]);
		close(ready[0]);
		close(life[1]);
		server(go[0], ready[1], life[0]);
		exit(0);
	}
	close(go[0]);
	close(ready[1]);
	close(life[0]);
	char c, cmd[256];
	if (read(ready[0], &c, 1) != 1) {
		fprintf(stderr, "synloss: the server did not start\n");
		return 1;
	}
	snprintf(cmd, sizeof cmd,
		 "ip link set lo up && ip link add slv0 type veth peer name slv1 netns %d && "
		 "ip addr add " CLIENT "/30 dev slv0 && ip link set slv0 up", (int)srv);
	sh(cmd);
	if (write(go[1], "g", 1) != 1)
		die("synloss: write");
	if (read(ready[0], &c, 1) != 1) {
		fprintf(stderr, "synloss: the server did not listen\n");
		return 1;
	}
	/* The veth's carrier, and the neighbour entry, before the first SYN:
	 * a connect's time is then the SYNs' alone. */
	usleep(200000);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(closedport ? CLOSED_PORT : PORT)};
	inet_pton(AF_INET, SERVER, &a.sin_addr);
	static double ms[MAXN];
	int n = 0, slow = 0, timedout = 0, refused = 0, other = 0;
	double end = now() + dur;
	for (int i = 0; i < nconn && now() < end; i++) {
		int s = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
		if (s < 0)
			die("synloss: socket");
		if (overflow) {
			int one = 1;
			setsockopt(s, IPPROTO_TCP, TCP_SYNCNT, &one, sizeof one);
		}
		double t0 = now();
		int rc = connect(s, (struct sockaddr *)&a, sizeof a), err = rc < 0 ? errno : 0;
		if (nonblock && err == EINPROGRESS) {
			struct pollfd p = {.fd = s, .events = POLLOUT};
			poll(&p, 1, 30000);
			socklen_t l = sizeof err;
			getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &l);
		}
		double took = (now() - t0) * 1e3;
		ms[n++] = took;
		slow += took >= 900;
		timedout += err == ETIMEDOUT;
		refused += err == ECONNREFUSED;
		other += err != 0 && err != ETIMEDOUT && err != ECONNREFUSED;
		printf("connect %d: %.1f ms %s\n", i, took, err ? strerror(err) : "ok");
		fflush(stdout);
		close(s);
	}
	/* The server exits when it reads EOF here (or dies with us). */
	close(life[1]);
	waitpid(srv, NULL, 0);
	qsort(ms, n, sizeof ms[0], cmpd);
	printf("RESULT connects=%d slow=%d timedout=%d refused=%d other=%d median_ms=%.1f max_ms=%.1f\n",
	       n, slow, timedout, refused, other, n ? ms[n / 2] : 0, n ? ms[n - 1] : 0);
	return 0;
}
