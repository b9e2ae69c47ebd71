// inotifyfill: inotify_add_watch fails with ENOSPC on a nearly empty disk.
//
// inotify watches are limited per user (fs.inotify.max_user_watches, and in
// a user namespace /proc/sys/user/max_inotify_watches); past the limit
// inotify_add_watch returns ENOSPC, "No space left on device", whatever the
// disk holds. Instances are limited per user too
// (fs.inotify.max_user_instances, 128 by default); past it inotify_init1
// returns EMFILE, "Too many open files", with the descriptor table nearly
// empty. This program is a file watcher that runs as a dedicated uid (so no
// other program's watches count), watches files until the kernel refuses,
// and retries a bounded number of times, as watchers (IDEs, build tools,
// log shippers) do.
//
// inotifyfill [-m watches|instances] [-l LIMIT] [-N] [-u UID] [-r RETRIES] [-i INTERVAL_MS] [-- CMD ARG...]
//
//   -m watches    (default) one instance, a watch per file until ENOSPC
//   -m instances  inotify_init1 until EMFILE
//   -l LIMIT      the limit to set: watches default 512 (the host's
//                 fs.inotify.max_user_watches is lowered and put back);
//                 instances default 0: the host's limit as it is
//   -N            set LIMIT in a user namespace of its own instead
//                 (/proc/sys/user/max_inotify_*), changing nothing global;
//                 the watcher is root in that namespace, UID outside it
//   -u UID        the dedicated uid (default 64321)
//   -r, -i        retries after the first refusal (default 200), and the
//                 pause between them (default 10 ms)
//   -- CMD        set the limit, run CMD instead of the watcher, put the
//                 limit back when CMD ends: a recorder started under the
//                 lowered limit stores it in its capture's header, e.g.
//                 inotifyfill -- sysray record -w f -- inotifyfill -l 0
//                 (-l 0: the limit as it is)
//
// A changed sysctl is put back by a keeper process that waits for this one
// to end, however it ends (a normal exit, a signal, SIGKILL); only killing
// the keeper too (its process group, or the keeper by its pid) leaves the
// lowered value, which `sysctl fs.inotify.max_user_watches` then shows.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *mode = "watches";
static long limit = -1;
static int userns;
static uid_t uid = 64321;
static int retries = 200;
static int interval_ms = 10;

static char dir[] = "/tmp/inotifyfill.XXXXXX";
static long nfiles;

static long read_long(const char *path)
{
	char buf[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return strtol(buf, NULL, 10);
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, s, strlen(s));
	int err = errno;
	close(fd);
	errno = err;
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

static int write_long(const char *path, long v)
{
	char buf[32];
	snprintf(buf, sizeof buf, "%ld\n", v);
	return write_str(path, buf);
}

static void file_name(char *buf, size_t len, long i)
{
	snprintf(buf, len, "%s/f%06ld", dir, i);
}

static void remove_files(void)
{
	char path[PATH_MAX];
	for (long i = 0; i < nfiles; i++) {
		file_name(path, sizeof path, i);
		unlink(path);
	}
	rmdir(dir);
}

static void msleep(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

// keeper forks a process that waits for this one to end (the pipe's write
// end closes with it, however it dies) and then writes old back to sysctl
// and removes the files. It ignores the signals a terminal or a supervisor
// sends the group, so that it outlives them.
static pid_t keeper(const char *sysctl, long old, int *wfd)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		signal(SIGPIPE, SIG_IGN);
		close(p[1]);
		char c;
		while (read(p[0], &c, 1) < 0 && errno == EINTR)
			;
		if (sysctl && write_long(sysctl, old) < 0)
			fprintf(stderr, "inotifyfill: restoring %s to %ld: %s\n", sysctl, old, strerror(errno));
		remove_files();
		_exit(0);
	}
	close(p[0]);
	*wfd = p[1];
	return pid;
}

// enter_userns makes this process, running as the dedicated uid, root in a
// user namespace of its own (root there is the dedicated uid outside) and
// sets the inotify limit there: the kernel then charges each watch to that
// namespace and to every namespace above it, each against its own limit.
static int enter_userns(const char *knob, long lim)
{
	if (unshare(CLONE_NEWUSER) < 0) {
		perror("inotifyfill: unshare(CLONE_NEWUSER)");
		return -1;
	}
	char map[64];
	snprintf(map, sizeof map, "0 %u 1\n", (unsigned)uid);
	if (write_str("/proc/self/setgroups", "deny") < 0 ||
	    write_str("/proc/self/uid_map", map) < 0 ||
	    write_str("/proc/self/gid_map", map) < 0) {
		perror("inotifyfill: writing the user namespace's maps");
		return -1;
	}
	if (lim > 0 && write_long(knob, lim) < 0) {
		fprintf(stderr, "inotifyfill: %s: %s\n", knob, strerror(errno));
		return -1;
	}
	return 0;
}

static int watcher(long sysctl_limit, pid_t parent)
{
	int watches = strcmp(mode, "watches") == 0;
	const char *knob = watches ? "/proc/sys/user/max_inotify_watches" : "/proc/sys/user/max_inotify_instances";
	if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0) {
		perror("inotifyfill: dropping to the dedicated uid");
		return 1;
	}
	if (userns) {
		// The change of uid made the process undumpable, which gives
		// its /proc files to root: the maps could not be written.
		prctl(PR_SET_DUMPABLE, 1);
		if (enter_userns(knob, limit) < 0)
			return 1;
		sysctl_limit = read_long(knob);
	}
	// After the change of credentials, which clears it.
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		return 1;
	struct statvfs vfs;
	long disk_free_pct = statvfs(dir, &vfs) == 0 && vfs.f_blocks ? (long)(100 * vfs.f_bavail / vfs.f_blocks) : -1;
	char path[PATH_MAX];
	long held = 0, refused = 0, first_err = 0;
	if (watches) {
		int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
		if (fd < 0) {
			perror("inotifyfill: inotify_init1");
			return 1;
		}
		long i = 0;
		for (; i < nfiles; i++) {
			file_name(path, sizeof path, i);
			if (inotify_add_watch(fd, path, IN_MODIFY | IN_CLOSE_WRITE) < 0) {
				first_err = errno;
				break;
			}
			held++;
		}
		if (!first_err) {
			fprintf(stderr, "inotifyfill: %ld watches and no refusal\n", held);
			return 1;
		}
		fprintf(stderr, "inotifyfill: full pid=%d uid=%d watches=%ld limit=%ld errno=%s disk_free_pct=%ld\n",
			getpid(), (int)uid, held, sysctl_limit, strerrorname_np(first_err), disk_free_pct);
		refused = 1;
		for (int r = 0; r < retries; r++) {
			msleep(interval_ms);
			if (inotify_add_watch(fd, path, IN_MODIFY | IN_CLOSE_WRITE) < 0)
				refused++;
		}
	} else {
		for (;;) {
			int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
			if (fd < 0) {
				first_err = errno;
				break;
			}
			held++;
			if (held > 1 << 20)
				return 1;
		}
		fprintf(stderr, "inotifyfill: full pid=%d uid=%d instances=%ld limit=%ld errno=%s open_fds=%ld\n",
			getpid(), (int)uid, held, sysctl_limit, strerrorname_np(first_err), held + 3);
		refused = 1;
		for (int r = 0; r < retries; r++) {
			msleep(interval_ms);
			if (inotify_init1(IN_CLOEXEC | IN_NONBLOCK) < 0)
				refused++;
		}
	}
	fprintf(stderr, "RESULT mode=%s pid=%d uid=%d userns=%d held=%ld limit=%ld errno=%s refused=%ld disk_free_pct=%ld\n",
		mode, getpid(), (int)uid, userns, held, sysctl_limit, strerrorname_np(first_err), refused, disk_free_pct);
	return 0;
}

static volatile sig_atomic_t stop;
static void on_signal(int sig) { stop = sig; }

int main(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "m:l:Nu:r:i:")) != -1) {
		switch (c) {
		case 'm': mode = optarg; break;
		case 'l': limit = atol(optarg); break;
		case 'N': userns = 1; break;
		case 'u': uid = atol(optarg); break;
		case 'r': retries = atoi(optarg); break;
		case 'i': interval_ms = atoi(optarg); break;
		default:
		usage:
			fprintf(stderr, "usage: inotifyfill [-m watches|instances] [-l LIMIT] [-N] [-u UID] [-r RETRIES] [-i INTERVAL_MS] [-- CMD ARG...]\n");
			return 2;
		}
	}
	int watches = strcmp(mode, "watches") == 0;
	if (!watches && strcmp(mode, "instances") != 0)
		goto usage;
	if (limit < 0)
		limit = watches ? 512 : 0;
	const char *sysctl = watches ? "/proc/sys/fs/inotify/max_user_watches" : "/proc/sys/fs/inotify/max_user_instances";
	long old = read_long(sysctl);
	if (old < 0) {
		fprintf(stderr, "inotifyfill: %s: %s\n", sysctl, strerror(errno));
		return 1;
	}
	int change = !userns && limit > 0 && limit != old;

	char **cmd = optind < argc ? argv + optind : NULL;
	if (cmd && !change) {
		fprintf(stderr, "inotifyfill: -- CMD needs a limit to set on the host (-l, not -N)\n");
		return 2;
	}
	if (watches && !cmd) {
		if (!mkdtemp(dir) || chmod(dir, 0755) < 0) {
			perror("inotifyfill: mkdtemp");
			return 1;
		}
		long want = (limit > 0 ? limit : old) + 8;
		char path[PATH_MAX];
		for (nfiles = 0; nfiles < want; nfiles++) {
			file_name(path, sizeof path, nfiles);
			int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
			if (fd < 0) {
				perror("inotifyfill: creating files");
				remove_files();
				return 1;
			}
			close(fd);
		}
	}
	// The keeper removes the files, and puts the sysctl back when it was
	// changed: from here on, whatever happens to this process.
	int wfd = -1;
	pid_t kpid = keeper(change ? sysctl : NULL, old, &wfd);
	if (kpid < 0) {
		perror("inotifyfill: keeper");
		remove_files();
		return 1;
	}
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	int rc = 1;
	if (change && write_long(sysctl, limit) < 0) {
		fprintf(stderr, "inotifyfill: %s: %s\n", sysctl, strerror(errno));
		goto out;
	}
	if (change)
		fprintf(stderr, "inotifyfill: %s %ld -> %ld (put back at the end)\n", sysctl, old, limit);
	pid_t parent = getpid();
	pid_t w = fork();
	if (w < 0) {
		perror("inotifyfill: fork");
		goto out;
	}
	if (w == 0) {
		// Only this process's end may wake the keeper; the watcher
		// ends with it.
		close(wfd);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		if (cmd) {
			prctl(PR_SET_PDEATHSIG, SIGTERM);
			execvp(cmd[0], cmd);
			fprintf(stderr, "inotifyfill: %s: %s\n", cmd[0], strerror(errno));
			_exit(127);
		}
		_exit(watcher(change ? limit : old, parent));
	}
	int status;
	for (;;) {
		if (waitpid(w, &status, 0) == w)
			break;
		if (errno != EINTR)
			break;
		// A command is asked to end (a recorder finishes its file); the
		// watcher is ours to kill.
		if (stop)
			kill(w, cmd ? SIGTERM : SIGKILL);
	}
	rc = stop ? 128 + stop : WIFEXITED(status) ? WEXITSTATUS(status) : 1;
out:
	close(wfd);
	waitpid(kpid, NULL, 0);
	if (change)
		fprintf(stderr, "inotifyfill: %s is %ld again\n", sysctl, read_long(sysctl));
	return rc;
}
