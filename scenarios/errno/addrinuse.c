// addrinuse: bind (or listen) fails with EADDRINUSE, "Address already in
// use", and the question is who holds the port.
//
// addrinuse [-m listener|timewait|listen|probe] [-p PORT] [-r RETRIES] [-b BACKOFF_MS] [-c CONNS] [-d SECONDS] [-R]
//
// It runs in a network namespace of its own (unshare(CLONE_NEWNET)) with
// lo up, so the port is taken there only and everything it held goes away
// with it, however it ends. The main process is the server that fails; a
// child it forks holds the port (its comm says which). Modes:
//
//   listener  a child "addrinuse-hold" listens on 127.0.0.1:PORT (default
//             8080); the main process binds the same address, is refused,
//             retries RETRIES times (default 5) every BACKOFF_MS (default
//             200) and exits 1, as a second instance of a service does.
//   timewait  a child "addrinuse-old", the previous run of the server,
//             binds PORT without SO_REUSEADDR, accepts CONNS (default 16)
//             connections from the main process, closes each first (so the
//             server's end of each stays in TIME_WAIT for 60 s) and exits.
//             The main process, the restarted server, then binds PORT
//             without SO_REUSEADDR: refused while the old connections sit in
//             TIME_WAIT, it retries and exits 1. -R sets SO_REUSEADDR on the
//             server's listening socket in both runs (the program fixed):
//             then the restarted server's bind succeeds. Setting it in the
//             restarted run only is not enough: the TIME_WAIT sockets keep
//             the option of the listener that accepted them.
//   listen    both bind PORT with SO_REUSEADDR, which the kernel allows while
//             neither listens; the holder listens first, so the main
//             process's listen is refused, retried, and it exits 1.
//   probe     the holder listens on PORT; the main process tries PORT once,
//             binds PORT+1 instead, listens and serves for SECONDS (default
//             1), and exits 0: a program that handles a taken port.
//
// Printed on stderr: "addrinuse: held pid=N port=P mode=M" once the port is
// held, and a RESULT line at the end.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *mode = "listener";
static int port = 8080;
static int retries = 5;
static int backoff_ms = 200;
static int conns = 16;
static double duration = 1;
static int reuse_fix;
// life: the main process holds its write end, so a holder's read of it
// returns when the main process ends, and the holder exits quietly.
static int life[2];

static void setup_netns(void)
{
	if (unshare(CLONE_NEWNET) < 0) {
		perror("addrinuse: unshare(CLONE_NEWNET)");
		exit(1);
	}
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr = {0};
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0 || (ifr.ifr_flags |= IFF_UP, ioctl(s, SIOCSIFFLAGS, &ifr)) < 0) {
		perror("addrinuse: bringing lo up");
		exit(1);
	}
	close(s);
}

static struct sockaddr_in addr_of(int p)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(p)};
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	return a;
}

static int tcp_socket(int reuse)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		perror("addrinuse: socket");
		exit(1);
	}
	if (reuse) {
		int one = 1;
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	}
	return s;
}

static int bind_port(int s, int p)
{
	struct sockaddr_in a = addr_of(p);
	return bind(s, (struct sockaddr *)&a, sizeof a);
}

// child forks a process named name that runs fn with the pipe's write end
// and ends with the main process (life).
static pid_t child(const char *name, void (*fn)(int, int), int arg, int *ready)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		perror("addrinuse: pipe");
		exit(1);
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("addrinuse: fork");
		exit(1);
	}
	if (pid == 0) {
		prctl(PR_SET_NAME, name);
		close(p[0]);
		close(life[1]);
		fn(p[1], arg);
		_exit(0);
	}
	close(p[1]);
	*ready = p[0];
	return pid;
}

static void wait_byte(int fd)
{
	char b;
	if (read(fd, &b, 1) != 1) {
		fprintf(stderr, "addrinuse: the holder ended before holding the port\n");
		exit(1);
	}
}

// hold listens on the port (arg: SO_REUSEADDR) until the main process ends. In
// listen mode it binds first, says so, waits for the go, then listens.
static int go_fd = -1;
static void hold(int ready, int reuse)
{
	int s = tcp_socket(reuse);
	if (bind_port(s, port) < 0) {
		perror("addrinuse: holder bind");
		_exit(1);
	}
	if (go_fd >= 0) {
		if (write(ready, "b", 1) != 1)
			_exit(1);
		char b;
		if (read(go_fd, &b, 1) != 1)
			_exit(1);
	}
	if (listen(s, 16) < 0) {
		perror("addrinuse: holder listen");
		_exit(1);
	}
	if (write(ready, "l", 1) != 1)
		_exit(1);
	char b;
	while (read(life[0], &b, 1) != 0)
		;
	_exit(0);
}

// old_server is the server's previous run: it accepts conns connections,
// answers each with a byte, closes first, and exits once the peer closed
// too (the server's end is then in TIME_WAIT).
static void old_server(int ready, int n)
{
	int s = tcp_socket(reuse_fix);
	if (bind_port(s, port) < 0 || listen(s, 128) < 0) {
		perror("addrinuse: old server");
		_exit(1);
	}
	if (write(ready, "l", 1) != 1)
		_exit(1);
	for (int i = 0; i < n; i++) {
		int c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			perror("addrinuse: accept");
			_exit(1);
		}
		char b;
		if (read(c, &b, 1) != 1 || write(c, "y", 1) != 1)
			_exit(1);
		shutdown(c, SHUT_WR);
		while (read(c, &b, 1) > 0) // the client's close
			;
		close(c);
	}
	_exit(0);
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "m:p:r:b:c:d:R")) != -1) {
		switch (c) {
		case 'm': mode = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'r': retries = atoi(optarg); break;
		case 'b': backoff_ms = atoi(optarg); break;
		case 'c': conns = atoi(optarg); break;
		case 'd': duration = atof(optarg); break;
		case 'R': reuse_fix = 1; break;
		default:
			fprintf(stderr, "usage: addrinuse [-m listener|timewait|listen|probe] [-p PORT] [-r RETRIES] [-b BACKOFF_MS] [-c CONNS] [-d SECONDS] [-R]\n");
			return 2;
		}
	}
	if (port < 1 || port > 65534 || retries < 0 || conns < 1) {
		fprintf(stderr, "addrinuse: bad -p, -r or -c\n");
		return 2;
	}
	setup_netns();
	if (pipe2(life, O_CLOEXEC) < 0) {
		perror("addrinuse: pipe");
		return 1;
	}
	int ready, failures = 0, ok = 0;
	pid_t holder;
	const char *call = "bind";
	int s;
	if (!strcmp(mode, "listener") || !strcmp(mode, "probe")) {
		holder = child("addrinuse-hold", hold, 1, &ready);
		wait_byte(ready);
		fprintf(stderr, "addrinuse: held pid=%d port=%d mode=%s\n", holder, port, mode);
		s = tcp_socket(1);
		if (!strcmp(mode, "probe")) {
			if (bind_port(s, port) < 0 && errno == EADDRINUSE) {
				failures++;
				if (bind_port(s, port + 1) < 0 || listen(s, 16) < 0) {
					perror("addrinuse: probe's next port");
					return 1;
				}
			}
			ok = 1;
			sleep_ms((int)(duration * 1000));
		} else {
			for (int i = 0; i <= retries; i++) {
				if (i > 0)
					sleep_ms(backoff_ms);
				if (bind_port(s, port) == 0) {
					ok = 1;
					break;
				}
				if (errno != EADDRINUSE)
					perror("addrinuse: bind");
				failures++;
			}
		}
	} else if (!strcmp(mode, "timewait")) {
		holder = child("addrinuse-old", old_server, conns, &ready);
		wait_byte(ready);
		for (int i = 0; i < conns; i++) {
			int cs = tcp_socket(0);
			struct sockaddr_in a = addr_of(port);
			char b;
			if (connect(cs, (struct sockaddr *)&a, sizeof a) < 0 || write(cs, "x", 1) != 1 || read(cs, &b, 1) != 1) {
				perror("addrinuse: client");
				return 1;
			}
			while (read(cs, &b, 1) > 0) // the server closes first
				;
			close(cs);
		}
		int st;
		waitpid(holder, &st, 0);
		fprintf(stderr, "addrinuse: held pid=%d port=%d mode=%s conns=%d (the old server exited)\n", holder, port, mode, conns);
		s = tcp_socket(reuse_fix);
		for (int i = 0; i <= retries; i++) {
			if (i > 0)
				sleep_ms(backoff_ms);
			if (bind_port(s, port) == 0) {
				ok = 1;
				break;
			}
			if (errno != EADDRINUSE)
				perror("addrinuse: bind");
			failures++;
		}
	} else if (!strcmp(mode, "listen")) {
		int go[2];
		if (pipe2(go, O_CLOEXEC) < 0)
			return 1;
		go_fd = go[0];
		holder = child("addrinuse-hold", hold, 1, &ready);
		close(go[0]);
		wait_byte(ready); // bound
		s = tcp_socket(1);
		if (bind_port(s, port) < 0) {
			perror("addrinuse: bind beside the holder");
			return 1;
		}
		if (write(go[1], "g", 1) != 1)
			return 1;
		wait_byte(ready); // listening
		fprintf(stderr, "addrinuse: held pid=%d port=%d mode=%s\n", holder, port, mode);
		call = "listen";
		for (int i = 0; i <= retries; i++) {
			if (i > 0)
				sleep_ms(backoff_ms);
			if (listen(s, 16) == 0) {
				ok = 1;
				break;
			}
			if (errno != EADDRINUSE)
				perror("addrinuse: listen");
			failures++;
		}
	} else {
		fprintf(stderr, "addrinuse: unknown mode %s\n", mode);
		return 2;
	}
	fprintf(stderr, "RESULT pid=%d mode=%s port=%d call=%s eaddrinuse=%d bound=%d reuseaddr=%d\n",
		getpid(), mode, port, call, failures, ok, reuse_fix);
	return ok ? 0 : 1;
}
