/*
 * resolver: a service whose name lookups go to a name server that never
 * answers. glibc's stub resolver sends the query over UDP to port 53 and
 * waits in poll for the answer; with no answer, poll returns 0 after the
 * resolver's timeout (resolv.conf `options timeout:`), once for every
 * attempt (`attempts:`) at every server, and the lookup fails after all
 * of them.
 *
 *   resolver [-p PROCS] [-n LOOKUPS] [-d SECONDS] [-c CALL] [-m MODE]
 *            [-t TIMEOUT] [-a ATTEMPTS] [-s MS] [-i MS] [-o OPTIONS]
 *
 *   -p   processes making lookups (1)
 *   -n   lookups per process (3); 0 with -d: until the time is up
 *   -d   stop after this many seconds whatever -n says (20)
 *   -c   getaddrinfo (AF_INET: one A query), unspec (getaddrinfo AF_UNSPEC:
 *        A and AAAA sent together with sendmmsg), gethostbyname
 *   -m   blackhole: a socket bound to 127.0.0.153:53 that never reads
 *        (the default); answer: a responder that answers at once (-s MS
 *        later: a slow but answering server); nxdomain: answers "no such
 *        name" at once; search: answers names in the zone sysray.test and
 *        "no such name" to any other (a name with a search domain put
 *        after it, as resolv.conf's search list makes); refused: nothing listens (port unreachable);
 *        listen: one answered lookup, then each "lookup" is a poll with
 *        a 1 s timeout on a UDP socket bound to 127.0.0.1:7777 that
 *        nothing sends to (a heartbeat listener, not DNS); idle: one
 *        answered lookup, then each "lookup" is a poll with a 1 s timeout
 *        on a pipe nothing writes to (an idle event loop); tcp-blackhole:
 *        a TCP listener on 127.0.0.153:53 that accepts each connection
 *        and never answers, closing it after the timeout (-t) seconds
 *        (with -o use-vc: glibc reads the answer with no timeout of its
 *        own, so the server's silence is a read that waits); tcp-answer:
 *        a TCP responder that answers each query (-s MS later);
 *        tcp-search: a TCP responder that answers as search does
 *   -t, -a  resolv.conf's `options timeout:T attempts:A` (1 and 1)
 *   -o   more resolv.conf options, as one word (e.g. single-request)
 *   -S   a resolv.conf search line (e.g. "corp.test svc.test")
 *   -N   look this name up each time (svc-ID-I.sysray.test: a new name each)
 *   -i   pause between lookups, ms (0)
 *   -x   each worker execs this program to look the names up instead
 *        (the same namespaces, server and resolv.conf), with
 *        -id I -n N -d SECONDSs -c CALL -i MSms [-name NAME]: goresolve, Go's own
 *        resolver
 *
 * Nothing outside the program changes: it runs in network, mount and UTS
 * namespaces of its own (so 127.0.0.153 and port 53 are its own, and the
 * host has no route to them), with its own /etc/resolv.conf and
 * /etc/nsswitch.conf ("hosts: dns") bind-mounted over the host's in its
 * mount namespace only. The namespaces end with its last process; the
 * files behind the mounts are unlinked at once. The workers die with the
 * parent (PR_SET_PDEATHSIG); SIGINT and SIGTERM end them all.
 *
 * Prints each lookup ("lookup PID I NAME: MS ms, RESULT") and, at the end,
 * RESULT procs=... lookups=... failed=... total_ms=... max_ms=...
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SERVER "127.0.0.153"

static int nprocs = 1, nlookups = 3, timeout_s = 1, attempts = 1, slow_ms, pause_ms;
/* which names the responders answer "no such name": 1 every one, 2 those outside sysray.test */
static int nxmode;
static double dur = 20;
static const char *call = "getaddrinfo", *mode = "blackhole", *extra = "", *search = "", *prog, *fixed;

struct tally {
	long lookups, failed;
	double total_ms, max_ms;
};

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

static void msleep(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* A file with this content, bind-mounted over target in this mount namespace. */
static void overlay(const char *target, const char *content)
{
	char path[] = "/tmp/sysray-resolver-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		die("mkstemp");
	if (write(fd, content, strlen(content)) != (ssize_t)strlen(content))
		die("write");
	close(fd);
	/* A container's root may lack the file (a busybox image has no
	 * resolv.conf): a bind mount needs one to cover, made in this
	 * namespace's view of the root, which is the container's own. */
	if (access(target, F_OK) < 0) {
		int t = open(target, O_WRONLY | O_CREAT, 0644);
		if (t < 0)
			die(target);
		close(t);
	}
	if (mount(path, target, NULL, MS_BIND, NULL) < 0)
		die(target);
	unlink(path);
}

static void isolate(void)
{
	if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWUTS) < 0)
		die("unshare");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		die("mount private");
	/* No dot in the host name: glibc would make its domain a search domain. */
	if (sethostname("resolver", 8) < 0)
		die("sethostname");
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct ifreq ifr = {0};
	strcpy(ifr.ifr_name, "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		die("lo");
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		die("lo up");
	close(s);
	char conf[512];
	snprintf(conf, sizeof(conf), "nameserver " SERVER "\n%s%s%soptions timeout:%d attempts:%d %s\n",
		 *search ? "search " : "", search, *search ? "\n" : "", timeout_s, attempts, extra);
	overlay("/etc/resolv.conf", conf);
	overlay("/etc/nsswitch.conf", "hosts: dns\n");
}

static int udp53(void)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53)};
	inet_pton(AF_INET, SERVER, &a.sin_addr);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("bind " SERVER ":53");
	return s;
}

static void respond_tcp(int c);

/* Accepts each connection and holds it, unanswered, for the timeout (or answers it: tcp-answer). */
static int tcp53(void)
{
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53)};
	inet_pton(AF_INET, SERVER, &a.sin_addr);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 64) < 0)
		die("listen " SERVER ":53");
	return l;
}

static void tcp_server(int l, int answering)
{
	for (;;) {
		int c = accept(l, NULL, NULL);
		if (c < 0)
			continue;
		if (answering) {
			respond_tcp(c);
			continue;
		}
		msleep(timeout_s * 1000L);
		close(c);
	}
}

static void put16(unsigned char *p, int v)
{
	p[0] = v >> 8;
	p[1] = v;
}

/* Whether the question's name (from q + 12, n bytes in all) ends in the zone sysray.test. */
static int in_zone(const unsigned char *q, ssize_t n)
{
	char name[256];
	int p = 12, len = 0;
	while (p < n && q[p] && len + q[p] + 1 < (int)sizeof(name)) {
		if (len)
			name[len++] = '.';
		memcpy(name + len, q + p + 1, q[p]);
		len += q[p];
		p += q[p] + 1;
	}
	name[len] = 0;
	const char *zone = "sysray.test";
	size_t zl = strlen(zone);
	return len >= (int)zl && !strcasecmp(name + len - zl, zone) && (len == (int)zl || name[len - zl - 1] == '.');
}

/*
 * The answer to query q of n bytes into r: an A record 10.0.0.1 for A, no
 * data for others, or NXDOMAIN (nxdomain 1: for every name; 2: for a name
 * outside sysray.test, as a search domain makes it); 0 if q is bad.
 */
static int answer(const unsigned char *q, ssize_t n, unsigned char *r, int nxdomain)
{
	if (n < 12)
		return 0;
	int end = 12;
	while (end < n && q[end])
		end += q[end] + 1;
	end += 5; /* the root label, type, class */
	if (end > n)
		return 0;
	if (nxdomain == 2)
		nxdomain = !in_zone(q, n);
	int qtype = q[end - 4] << 8 | q[end - 3];
	memcpy(r, q, end);
	r[2] = 0x80 | (q[2] & 0x01); /* QR, RD as asked */
	r[3] = 0x80 | (nxdomain ? 3 : 0);
	put16(r + 4, 1);
	put16(r + 6, 0);
	put16(r + 8, 0);
	put16(r + 10, 0);
	int len = end;
	if (!nxdomain && qtype == 1) {
		static const unsigned char rr[] = {0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10, 0, 0, 1};
		memcpy(r + len, rr, sizeof(rr));
		len += sizeof(rr);
		put16(r + 6, 1);
	}
	if (slow_ms)
		msleep(slow_ms);
	return len;
}

static void respond(int s, int nxdomain)
{
	unsigned char q[512], r[600];
	for (;;) {
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(s, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
		int len = answer(q, n, r, nxdomain);
		if (len > 0)
			sendto(s, r, len, 0, (struct sockaddr *)&from, fl);
	}
}

/* DNS over TCP: each message after its 2-byte length; answers each query on the connection. */
static void respond_tcp(int c)
{
	unsigned char q[514], r[602];
	for (;;) {
		ssize_t n = recv(c, q, 2, MSG_WAITALL);
		if (n != 2)
			break;
		int ql = q[0] << 8 | q[1];
		if (ql > 512 || recv(c, q, ql, MSG_WAITALL) != ql)
			break;
		int len = answer(q, ql, r + 2, nxmode);
		if (len <= 0)
			break;
		put16(r, len);
		if (send(c, r, len + 2, MSG_NOSIGNAL) != len + 2)
			break;
	}
	close(c);
}

static int lookup(const char *name)
{
	if (!strcmp(call, "gethostbyname"))
		return gethostbyname(name) ? 0 : -1;
	struct addrinfo hints = {.ai_family = strcmp(call, "unspec") ? AF_INET : AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(name, "80", &hints, &res);
	if (res)
		freeaddrinfo(res);
	return rc == 0 ? 0 : -1;
}

static void work(int id, struct tally *t)
{
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (prog) {
		char sid[16], sn[16], sd[32], si[32];
		snprintf(sid, sizeof(sid), "%d", id);
		snprintf(sn, sizeof(sn), "%d", nlookups);
		snprintf(sd, sizeof(sd), "%gs", dur);
		snprintf(si, sizeof(si), "%dms", pause_ms);
		/* A bare name is a program beside this one (scenarios/bin). */
		char path[4096];
		if (!strchr(prog, '/')) {
			ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
			if (n < 0)
				die("/proc/self/exe");
			path[n] = 0;
			char *slash = strrchr(path, '/');
			snprintf(slash + 1, sizeof(path) - (slash + 1 - path), "%s", prog);
			prog = path;
		}
		char *argv[] = {(char *)prog, "-id", sid, "-n", sn, "-d", sd, "-c", (char *)call, "-i", si,
				fixed ? "-name" : NULL, (char *)fixed, NULL};
		execv(prog, argv);
		die(prog);
	}
	double stop = now() + dur;
	int hb = -1;
	if (!strcmp(mode, "idle")) {
		int p[2];
		lookup("first.sysray.test");
		if (pipe(p) < 0)
			die("pipe");
		hb = p[0];
	}
	if (!strcmp(mode, "listen")) {
		lookup("first.sysray.test");
		hb = socket(AF_INET, SOCK_DGRAM, 0);
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(7777 + id)};
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (hb < 0 || bind(hb, (struct sockaddr *)&a, sizeof(a)) < 0)
			die("bind heartbeat");
	}
	for (int i = 0; (nlookups == 0 || i < nlookups) && now() < stop; i++) {
		char name[64];
		if (fixed)
			snprintf(name, sizeof(name), "%s", fixed);
		else
			snprintf(name, sizeof(name), "svc-%d-%d.sysray.test", id, i);
		double t0 = now();
		int rc;
		if (hb >= 0) {
			struct pollfd p = {.fd = hb, .events = POLLIN};
			rc = poll(&p, 1, 1000) > 0 ? 0 : -1;
		} else {
			rc = lookup(name);
		}
		double ms = (now() - t0) * 1e3;
		printf("lookup %d %d %s: %.1f ms, %s\n", getpid(), i, name, ms, rc ? "failed" : "answered");
		fflush(stdout);
		t->lookups++;
		if (rc)
			t->failed++;
		t->total_ms += ms;
		if (ms > t->max_ms)
			t->max_ms = ms;
		if (pause_ms)
			msleep(pause_ms);
	}
	exit(0);
}

static volatile sig_atomic_t stopping;
static void on_signal(int sig) { stopping = sig; }

int main(int argc, char **argv)
{
	int o;
	while ((o = getopt(argc, argv, "p:n:d:c:m:t:a:s:i:o:S:x:N:")) != -1) {
		switch (o) {
		case 'p': nprocs = atoi(optarg); break;
		case 'n': nlookups = atoi(optarg); break;
		case 'd': dur = atof(optarg); break;
		case 'c': call = optarg; break;
		case 'm': mode = optarg; break;
		case 't': timeout_s = atoi(optarg); break;
		case 'a': attempts = atoi(optarg); break;
		case 's': slow_ms = atoi(optarg); break;
		case 'i': pause_ms = atoi(optarg); break;
		case 'o': extra = optarg; break;
		case 'S': search = optarg; break;
		case 'x': prog = optarg; break;
		case 'N': fixed = optarg; break;
		default:
			fprintf(stderr, "usage: resolver [-p PROCS] [-n LOOKUPS] [-d SECONDS] [-c getaddrinfo|unspec|gethostbyname] "
					"[-m blackhole|answer|nxdomain|search|refused|listen|idle|tcp-blackhole|tcp-answer|tcp-search] [-t TIMEOUT] [-a ATTEMPTS] [-s MS] [-i MS] "
					"[-o OPTIONS] [-S SEARCH] [-N NAME] [-x PROGRAM]\n");
			return 2;
		}
	}
	if (nprocs < 1 || nprocs > 64 || dur <= 0 || dur > 120)
		return 2;
	nxmode = !strcmp(mode, "nxdomain") ? 1 : !strcmp(mode, "search") || !strcmp(mode, "tcp-search") ? 2 : 0;
	isolate();
	/* The server is this process's socket (never read), or a responder child. */
	pid_t responder = 0;
	int s = -1;
	if (strcmp(mode, "refused"))
		s = udp53();
	if (!strcmp(mode, "answer") || !strcmp(mode, "nxdomain") || !strcmp(mode, "search") || !strcmp(mode, "listen") ||
	    !strcmp(mode, "idle")) {
		responder = fork();
		if (responder == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			respond(s, nxmode);
		}
		close(s);
	}
	if (!strcmp(mode, "tcp-blackhole") || !strcmp(mode, "tcp-answer") || !strcmp(mode, "tcp-search")) {
		/* listening before any worker starts: no lookup is refused */
		int l = tcp53();
		responder = fork();
		if (responder == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			tcp_server(l, strcmp(mode, "tcp-blackhole"));
		}
		close(l);
	}
	/* Each worker counts in its own slot. */
	struct tally *t = mmap(NULL, nprocs * sizeof(*t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED)
		die("mmap");
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	pid_t kids[64];
	for (int i = 0; i < nprocs; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			work(i, &t[i]);
		}
	}
	/* Only its own children: under cgrun the janitor is a child too, and it waits for this process. */
	for (int i = 0; i < nprocs && !stopping;)
		if (waitpid(kids[i], NULL, 0) > 0 || errno != EINTR)
			i++;
	for (int i = 0; stopping && i < nprocs; i++)
		kill(kids[i], SIGTERM);
	if (responder > 0)
		kill(responder, SIGKILL);
	for (int i = 0; i < nprocs; i++)
		while (waitpid(kids[i], NULL, 0) < 0 && errno == EINTR)
			;
	if (responder > 0)
		waitpid(responder, NULL, 0);
	struct tally all = {0};
	for (int i = 0; i < nprocs; i++) {
		all.lookups += t[i].lookups;
		all.failed += t[i].failed;
		all.total_ms += t[i].total_ms;
		if (t[i].max_ms > all.max_ms)
			all.max_ms = t[i].max_ms;
	}
	printf("RESULT procs=%d lookups=%ld failed=%ld total_ms=%.1f max_ms=%.1f\n", nprocs, all.lookups, all.failed,
	       all.total_ms, all.max_ms);
	return stopping ? 1 : 0;
}
