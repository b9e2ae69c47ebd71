// blockedio-worker: calls that do not ask for I/O but end up waiting for it.
//
//   blockedio-worker -m free -o unlink|truncate|otrunc|rename -D DIR [-s MB] [-n ITER] [-d SECONDS]
//       writes a file of MB MiB and makes its blocks allocated (fsync), then
//       frees them with the chosen call; on a file system mounted with
//       `discard` the call waits for the device to discard them.
//   blockedio-worker -m dirty -D DIR [-s MB] [-d SECONDS]
//       writes MB MiB in 8 MiB writes (no fsync), again and again: past the
//       dirty limits each write() is throttled in balance_dirty_pages.
//
// -d loops until SECONDS have passed (for -p and whole-host runs).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// 8 MiB: a throttled writer's pauses add up inside one write() call, and the
// doctor sees a call's sleeps from 10 ms on.
static char buf[8 << 20];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "blockedio-worker: %s: %s\n", what, strerror(errno));
	exit(1);
}

// fill writes mb MiB to fd and makes the blocks real.
static void fill(int fd, int mb)
{
	for (int i = 0; i < mb; i++)
		if (write(fd, buf, 1 << 20) != 1 << 20)
			die("write");
	if (fsync(fd))
		die("fsync");
}

int main(int argc, char **argv)
{
	const char *mode = "free", *op = "unlink", *dir = NULL;
	int mb = 64, iters = 8, opt;
	double seconds = 0;
	while ((opt = getopt(argc, argv, "m:o:D:s:n:d:")) != -1) {
		switch (opt) {
		case 'm': mode = optarg; break;
		case 'o': op = optarg; break;
		case 'D': dir = optarg; break;
		case 's': mb = atoi(optarg); break;
		case 'n': iters = atoi(optarg); break;
		case 'd': seconds = atof(optarg); break;
		default:
			fprintf(stderr, "usage: blockedio-worker -m free|dirty [-o unlink|truncate|otrunc|rename] -D DIR [-s MB] [-n ITER] [-d SECONDS]\n");
			return 2;
		}
	}
	if (!dir) {
		fprintf(stderr, "blockedio-worker: -D DIR is required\n");
		return 2;
	}
	memset(buf, 0xa5, sizeof(buf));
	char a[4096], b[4096];
	snprintf(a, sizeof(a), "%s/w%d", dir, getpid());
	snprintf(b, sizeof(b), "%s/w%d.new", dir, getpid());
	double end = now() + seconds;
	for (int i = 0; seconds > 0 ? now() < end : i < iters; i++) {
		if (!strcmp(mode, "dirty")) {
			int fd = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			if (fd < 0)
				die("open");
			for (int k = 0; k < (mb + 7) / 8; k++)
				if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
					die("write");
			close(fd);
			continue;
		}
		int fd = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0)
			die("open");
		fill(fd, mb);
		if (!strcmp(op, "unlink")) {
			close(fd);
			if (unlink(a))
				die("unlink");
		} else if (!strcmp(op, "truncate")) {
			if (ftruncate(fd, 0))
				die("ftruncate");
			close(fd);
		} else if (!strcmp(op, "otrunc")) {
			close(fd);
			fd = open(a, O_WRONLY | O_TRUNC);
			if (fd < 0)
				die("open O_TRUNC");
			close(fd);
		} else if (!strcmp(op, "rename")) {
			close(fd);
			int nfd = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			if (nfd < 0)
				die("open new");
			close(nfd);
			if (rename(b, a)) // replaces a: its blocks are freed
				die("rename");
		} else {
			fprintf(stderr, "blockedio-worker: unknown -o %s\n", op);
			return 2;
		}
	}
	unlink(a);
	unlink(b);
	printf("RESULT mode=%s op=%s pid=%d\n", mode, op, getpid());
	return 0;
}
