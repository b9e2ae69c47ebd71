// audit-acceptor: a TCP server on 127.0.0.1 that accepts the way NodeJS's
// event loop does (poll, then non-blocking accept4 until EAGAIN) and times
// every accept4, plus a client process that connects at a steady rate.
//
// A non-blocking accept4 should take microseconds. With an audit rule on
// accept4 and the audit backlog full, each call sleeps at syscall exit in
// audit_log_start -> schedule_timeout until the backlog drains or
// backlog_wait_time runs out; the application sees a gap it cannot explain.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {ns / 1000000000ull, ns % 1000000000ull};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

// client connects, sends a byte and closes, every interval, until end, and
// reports its counts on the report pipe.
static void client(int port, uint64_t interval, uint64_t end, int report)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	// connect() waits at most this long when the accept queue is full.
	struct timeval tv = {1, 0};
	unsigned long ok = 0, failed = 0;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	// Both tests matter: a connect into a full accept queue takes up to its
	// timeout, and the schedule alone would then run far past the end.
	for (uint64_t next = now_ns(); next < end && now_ns() < end; next += interval) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			break;
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && write(fd, "x", 1) == 1)
			ok++;
		else
			failed++;
		close(fd);
		uint64_t t = now_ns();
		if (next + interval > t)
			sleep_ns(next + interval - t);
	}
	unsigned long counts[2] = {ok, failed};
	_exit(write(report, counts, sizeof(counts)) == sizeof(counts) ? 0 : 1);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: audit-acceptor [-d SECONDS] [-i INTERVAL_MS] [-w]\n"
		"  -d  how long to serve (default 8)\n"
		"  -i  client connects every this many ms (default 10)\n"
		"  -w  print \"READY <pid> <port>\" and wait for a byte (or EOF) on stdin\n"
		"      before serving, so a supervisor can set up audit for this pid\n");
	exit(2);
}

int main(int argc, char **argv)
{
	double secs = 8, interval_ms = 10;
	int wait_go = 0, opt;

	while ((opt = getopt(argc, argv, "d:i:wh")) != -1) {
		switch (opt) {
		case 'd':
			secs = atof(optarg);
			break;
		case 'i':
			interval_ms = atof(optarg);
			break;
		case 'w':
			wait_go = 1;
			break;
		default:
			usage();
		}
	}
	if (optind != argc || secs <= 0 || interval_ms <= 0)
		usage();

	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t slen = sizeof(sa);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 511) ||
	    getsockname(lfd, (struct sockaddr *)&sa, &slen)) {
		perror("listen on 127.0.0.1");
		return 1;
	}
	int port = ntohs(sa.sin_port);
	if (wait_go) {
		char c;
		printf("READY %d %d\n", getpid(), port);
		fflush(stdout);
		if (read(0, &c, 1) < 0)
			return 1;
	}

	uint64_t start = now_ns(), end = start + (uint64_t)(secs * 1e9);
	int report[2];
	if (pipe(report)) {
		perror("pipe");
		return 1;
	}
	pid_t cpid = fork();
	if (cpid == 0)
		client(port, (uint64_t)(interval_ms * 1e6), end, report[1]);
	if (cpid < 0) {
		perror("fork");
		return 1;
	}
	close(report[1]);

	size_t cap = 1 << 16, n = 0;
	uint64_t *lat = malloc(cap * sizeof(*lat));
	unsigned long accepted = 0, eagain = 0, other = 0;
	uint64_t first_slow_at = 0;
	if (!lat)
		return 1;

	while (now_ns() < end) {
		struct pollfd p = {.fd = lfd, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		// Drain the accept queue, as libuv's uv__server_io does, but
		// stop at the deadline: with a stalled backlog every call can
		// take backlog_wait_time and the queue would outlast any run.
		while (now_ns() < end) {
			uint64_t t0 = now_ns();
			int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
			int e = errno;
			uint64_t d = now_ns() - t0;
			if (n == cap) {
				uint64_t *nl = realloc(lat, 2 * cap * sizeof(*lat));
				if (!nl)
					return 1;
				lat = nl, cap *= 2;
			}
			lat[n++] = d;
			if (d >= 10000000 && !first_slow_at)
				first_slow_at = t0 - start;
			if (fd >= 0) {
				accepted++;
				close(fd);
				continue;
			}
			if (e == EAGAIN || e == EWOULDBLOCK)
				eagain++;
			else
				other++;
			break;
		}
	}
	double el = (now_ns() - start) / 1e9;
	// The client stops by itself at the deadline (a connect may take up to
	// its 1 s timeout).
	unsigned long conn[2] = {0, 0};
	if (read(report[0], conn, sizeof(conn)) != sizeof(conn))
		conn[0] = conn[1] = 0;
	waitpid(cpid, NULL, 0);

	static const struct {
		const char *label;
		uint64_t below;
	} edges[] = {
		{"<10us", 10000},	{"10us-100us", 100000},	   {"100us-1ms", 1000000},
		{"1ms-10ms", 10000000}, {"10ms-100ms", 100000000}, {"100ms-1s", 1000000000},
		{">=1s", UINT64_MAX},
	};
	uint64_t counts[7] = {0}, total_slow = 0, slow = 0;
	for (size_t i = 0; i < n; i++) {
		size_t b = 0;
		while (lat[i] >= edges[b].below)
			b++;
		counts[b]++;
		if (lat[i] >= 10000000)
			slow++, total_slow += lat[i];
	}
	printf("accept4 latency over %.1fs: %zu calls, %lu accepted, %lu EAGAIN, %lu other errors\n", el,
	       n, accepted, eagain, other);
	printf("client: %lu connections, %lu failed or timed out\n", conn[0], conn[1]);
	printf("%-12s %8s\n", "latency", "calls");
	for (size_t b = 0; b < 7; b++)
		printf("%-12s %8llu\n", edges[b].label, (unsigned long long)counts[b]);

	qsort(lat, n, sizeof(*lat), cmp_u64);
#define Q(q) (n ? lat[(size_t)((q) * (n - 1))] / 1000 : 0)
	printf("STATS calls=%zu accepted=%lu eagain=%lu connects=%lu connect_failed=%lu p50_us=%llu "
	       "p90_us=%llu p99_us=%llu max_us=%llu slow=%llu slow_ms_total=%llu first_slow_ms=%llu\n",
	       n, accepted, eagain, conn[0], conn[1], (unsigned long long)Q(0.5), (unsigned long long)Q(0.9),
	       (unsigned long long)Q(0.99), (unsigned long long)(n ? lat[n - 1] / 1000 : 0),
	       (unsigned long long)slow, (unsigned long long)(total_slow / 1000000),
	       (unsigned long long)(first_slow_at / 1000000));
	return 0;
}
