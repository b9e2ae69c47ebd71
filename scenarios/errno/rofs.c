// rofs: writes into a read-only mount fail with EROFS, "Read-only file
// system", and the question is which mount, why it is read-only, and where
// the program should write instead.
//
// rofs [-m create|mkdir|unlink|rename|probe] [-k tmpfs|bind|overlay|as-is] [-D DIR] [-p PROCS] [-r RETRIES] [-b BACKOFF_MS]
//
// It runs in a mount namespace of its own (unshare(CLONE_NEWNS), / made
// private), so every mount below is its own and goes away with it, however
// it ends; nothing on the host changes. There it mounts a writable tmpfs on
// /tmp, makes /tmp/rofs/app/data hold a file old.log, and makes that data
// directory read-only by one of three kinds (-k):
//
//   tmpfs    (default) a tmpfs mounted there, then remounted read-only:
//            read-only at the superblock, as a filesystem the kernel
//            remounted after errors, or an image mounted ro, is.
//   bind     a bind mount of a writable directory, made read-only
//            (MS_BIND|MS_REMOUNT|MS_RDONLY): the mount is read-only, the
//            filesystem under it writable, as a container volume mounted
//            :ro is.
//   overlay  an overlay with lower layers only (no upperdir), read-only
//            by nature, as a container image's layers are.
//   as-is    no namespace and no mounts: the data directory is -D DIR
//            (default /root) as the process finds it, e.g. in a container
//            whose root filesystem is read-only. DIR must exist; a
//            rename or unlink needs DIR/old.log there.
//
// The main process (or each of PROCS forked workers, -p) then writes its
// log into the data directory, as a program told to keep state there does:
//
//   create   openat(data/out.log, O_WRONLY|O_CREAT|O_APPEND) (default)
//   mkdir    mkdir(data/cache)
//   unlink   unlink(data/old.log)
//   rename   rename(data/old.log, data/old.log.1), a log rotation
//
// each refused with EROFS, retried RETRIES times (default 5) every
// BACKOFF_MS (default 200), then exit 1. probe: one create in data, then
// the same file created in /tmp/rofs/fallback (writable) and written,
// exit 0: a program that falls back from a read-only path (benign).
//
// Printed on stderr: "rofs: ready pid=N dir=D kind=K" once the mount is
// read-only, and a RESULT line at the end.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *mode = "create";
static const char *kind = "tmpfs";
static int procs = 1;
static int retries = 5;
static int backoff_ms = 200;

#define DATA "/tmp/rofs/app/data"
static const char *data = DATA;

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

static void must(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "rofs: %s: %s\n", what, strerror(errno));
		exit(1);
	}
}

static void put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	must(fd >= 0, path);
	must(write(fd, text, strlen(text)) == (ssize_t)strlen(text), path);
	close(fd);
}

static void setup(void)
{
	must(unshare(CLONE_NEWNS) == 0, "unshare(CLONE_NEWNS)");
	must(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "making / private");
	must(mount("rofs-tmp", "/tmp", "tmpfs", 0, "size=4m,mode=1777") == 0, "mounting a tmpfs on /tmp");
	must(mkdir("/tmp/rofs", 0755) == 0 && mkdir("/tmp/rofs/app", 0755) == 0 && mkdir(DATA, 0755) == 0 &&
		     mkdir("/tmp/rofs/fallback", 0755) == 0,
	     "mkdir");
	if (!strcmp(kind, "tmpfs")) {
		must(mount("rofs-data", DATA, "tmpfs", 0, "size=1m") == 0, "mounting the data tmpfs");
		put(DATA "/old.log", "old\n");
		must(mount(NULL, DATA, NULL, MS_REMOUNT | MS_RDONLY, NULL) == 0, "remounting it read-only");
	} else if (!strcmp(kind, "bind")) {
		must(mkdir("/tmp/rofs/src", 0755) == 0, "mkdir src");
		put("/tmp/rofs/src/old.log", "old\n");
		must(mount("/tmp/rofs/src", DATA, NULL, MS_BIND, NULL) == 0, "bind mount");
		must(mount(NULL, DATA, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) == 0, "making the bind mount read-only");
	} else {
		must(mkdir("/tmp/rofs/lower1", 0755) == 0 && mkdir("/tmp/rofs/lower2", 0755) == 0, "mkdir lower");
		put("/tmp/rofs/lower1/old.log", "old\n");
		put("/tmp/rofs/lower2/base.conf", "base\n");
		must(mount("overlay", DATA, "overlay", 0, "lowerdir=/tmp/rofs/lower1:/tmp/rofs/lower2") == 0,
		     "mounting a lower-only overlay");
	}
}

// try is one attempt: 0 done, else the errno.
static int try(const char *dir)
{
	char path[128], to[128];
	long r = 0;
	if (!strcmp(mode, "create") || !strcmp(mode, "probe")) {
		snprintf(path, sizeof path, "%s/out.log", dir);
		r = syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (r >= 0) {
			(void)!write((int)r, "line\n", 5);
			close((int)r);
			r = 0;
		}
	} else if (!strcmp(mode, "mkdir")) {
		snprintf(path, sizeof path, "%s/cache", dir);
		r = syscall(SYS_mkdir, path, 0755);
	} else if (!strcmp(mode, "unlink")) {
		snprintf(path, sizeof path, "%s/old.log", dir);
		r = syscall(SYS_unlink, path);
	} else {
		snprintf(path, sizeof path, "%s/old.log", dir);
		snprintf(to, sizeof to, "%s/old.log.1", dir);
		r = syscall(SYS_rename, path, to);
	}
	return r < 0 ? errno : 0;
}

static int work(int *refused)
{
	*refused = 0;
	for (int i = 0; i <= retries; i++) {
		int err = try(data);
		if (err == 0)
			return 0;
		if (err != EROFS) {
			fprintf(stderr, "rofs: %s: %s\n", mode, strerror(err));
			return 2;
		}
		(*refused)++;
		if (!strcmp(mode, "probe"))
			return try("/tmp/rofs/fallback") ? 1 : 0;
		if (i < retries)
			sleep_ms(backoff_ms);
	}
	return 1;
}

int main(int argc, char **argv)
{
	int opt;
	const char *dir = "/root";
	while ((opt = getopt(argc, argv, "m:k:D:p:r:b:")) != -1) {
		switch (opt) {
		case 'D': dir = optarg; break;
		case 'm': mode = optarg; break;
		case 'k': kind = optarg; break;
		case 'p': procs = atoi(optarg); break;
		case 'r': retries = atoi(optarg); break;
		case 'b': backoff_ms = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: rofs [-m create|mkdir|unlink|rename|probe] [-k tmpfs|bind|overlay|as-is] [-D DIR] [-p PROCS] "
					"[-r RETRIES] [-b BACKOFF_MS]\n");
			return 2;
		}
	}
	int ok = 0;
	const char *modes[] = {"create", "mkdir", "unlink", "rename", "probe"};
	for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
		ok |= !strcmp(mode, modes[i]);
	if (!ok || (strcmp(kind, "tmpfs") && strcmp(kind, "bind") && strcmp(kind, "overlay") && strcmp(kind, "as-is")) ||
	    (!strcmp(kind, "as-is") && !strcmp(mode, "probe")) || procs < 1 || retries < 0) {
		fprintf(stderr, "rofs: bad arguments\n");
		return 2;
	}
	if (!strcmp(kind, "as-is"))
		data = dir;
	else
		setup();
	fprintf(stderr, "rofs: ready pid=%d dir=%s kind=%s\n", getpid(), data, kind);
	int refused = 0, status = 0;
	if (procs == 1) {
		status = work(&refused);
	} else {
		for (int i = 0; i < procs; i++)
			if (fork() == 0) {
				int r;
				_exit(work(&r));
			}
		for (int i = 0; i < procs; i++) {
			int st;
			if (wait(&st) > 0 && WIFEXITED(st) && WEXITSTATUS(st) > status)
				status = WEXITSTATUS(st);
		}
	}
	fprintf(stderr, "RESULT pid=%d mode=%s kind=%s dir=%s procs=%d erofs=%d status=%d\n", getpid(), mode, kind, data, procs,
		refused, status);
	return status;
}
