// cgrun: runs a command inside a cgroup of its own with limits set, as a
// container runtime does, and removes the cgroup however the command ends.
// The doctor's cgroup-limit finding must name the limit the command hits.
//
// usage: cgrun [-p PIDS_MAX] [-m MIB] [-q QUOTA_US] [-P PERIOD_US] -- CMD ARGS...
//   -p sets pids.max; -m the memory limit (memory.high on cgroup v2, where
//   it throttles, memory.limit_in_bytes on v1, which has no high); -q the
//   CPU quota per period (-P, default 100000 µs: cpu.max on v2,
//   cpu.cfs_quota_us and cpu.cfs_period_us on v1).
// Each controller is used from its v1 hierarchy where one is mounted
// (/sys/fs/cgroup/CONTROLLER), else from the unified one (/sys/fs/cgroup),
// where the root's cgroup.subtree_control must enable it (systemd does):
// cgrun changes nothing outside its own cgroup.
// The cgroup is sysray-variants-PID. cgrun moves itself into it and execs
// CMD, so CMD keeps cgrun's pid (what `sysray doctor -p PID` is given). A
// janitor child, left outside the cgroup, waits for that pid to end however
// it ends (even by SIGKILL), kills whatever is left in the cgroup and
// removes it. A CMD without a slash is looked up next to cgrun first.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NCTL 3

static const char *controllers[NCTL] = {"pids", "memory", "cpu"};
static char dirs[NCTL][256]; // per controller, "" when unused
static pid_t main_pid;

static void msleep(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int put(const char *dir, const char *file, const char *val)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	int fd = open(path, O_WRONLY);
	if (fd < 0) {
		perror(path);
		return -1;
	}
	ssize_t n = write(fd, val, strlen(val));
	if (n < 0)
		perror(path);
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

static int exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

// kill_all kills what is in a cgroup and tells whether it was empty.
static int kill_all(const char *dir)
{
	char path[1024], buf[8192];
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 1;
	buf[n] = 0;
	for (char *s = strtok(buf, "\n"); s; s = strtok(NULL, "\n"))
		kill(atoi(s), SIGKILL);
	return 0;
}

static void remove_all(void)
{
	for (int i = 0; i < NCTL; i++) {
		if (!dirs[i][0])
			continue;
		int shared = 0; // v2: one directory for every controller
		for (int j = 0; j < i; j++)
			shared |= !strcmp(dirs[i], dirs[j]);
		if (shared)
			continue;
		for (int tries = 0; tries < 500; tries++) {
			if (kill_all(dirs[i]) && (rmdir(dirs[i]) == 0 || errno == ENOENT))
				break;
			msleep(10);
		}
		if (exists(dirs[i]))
			fprintf(stderr, "cgrun: could not remove %s\n", dirs[i]);
	}
}

static void janitor(void)
{
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	int pfd = syscall(SYS_pidfd_open, main_pid, 0);
	if (pfd >= 0) {
		struct pollfd p = {.fd = pfd, .events = POLLIN};
		while (poll(&p, 1, -1) < 0 && errno == EINTR)
			;
	} else {
		while (getppid() == main_pid)
			msleep(50);
	}
	remove_all();
	_exit(0);
}

// name picks the cgroup directory a controller is used from.
static void name(int c)
{
	char v1[128];
	snprintf(v1, sizeof(v1), "/sys/fs/cgroup/%s/cgroup.procs", controllers[c]);
	if (exists(v1))
		snprintf(dirs[c], sizeof(dirs[c]), "/sys/fs/cgroup/%s/sysray-variants-%d", controllers[c], main_pid);
	else
		snprintf(dirs[c], sizeof(dirs[c]), "/sys/fs/cgroup/sysray-variants-%d", main_pid);
}

static int make(int c)
{
	if (mkdir(dirs[c], 0755) < 0 && errno != EEXIST) {
		perror(dirs[c]);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	long pids_max = 0, mib = 0, quota = 0, period = 100000;
	int opt;
	while ((opt = getopt(argc, argv, "+p:m:q:P:")) != -1) {
		switch (opt) {
		case 'p': pids_max = atol(optarg); break;
		case 'm': mib = atol(optarg); break;
		case 'q': quota = atol(optarg); break;
		case 'P': period = atol(optarg); break;
		default:
			fprintf(stderr, "usage: cgrun [-p PIDS_MAX] [-m MIB] [-q QUOTA_US] [-P PERIOD_US] -- CMD ARGS...\n");
			return 2;
		}
	}
	if (optind >= argc || pids_max < 0 || mib < 0 || quota < 0 || period < 1000) {
		fprintf(stderr, "cgrun: bad arguments\n");
		return 2;
	}
	main_pid = getpid();
	if (pids_max)
		name(0);
	if (mib)
		name(1);
	if (quota)
		name(2);
	// The janitor first, knowing the names, so it is outside the cgroup
	// and does not count against pids.max.
	if (fork() == 0)
		janitor();
	int ok = 1;
	char val[64];
	for (int i = 0; ok && i < NCTL; i++)
		if (dirs[i][0])
			ok = make(i) == 0;
	if (ok && pids_max) {
		snprintf(val, sizeof(val), "%ld", pids_max);
		ok = put(dirs[0], "pids.max", val) == 0;
	}
	if (ok && mib) {
		const char *d = dirs[1];
		snprintf(val, sizeof(val), "%ld", mib << 20);
		ok = put(d, strstr(d, "/memory/") ? "memory.limit_in_bytes" : "memory.high", val) == 0;
	}
	if (ok && quota) {
		const char *d = dirs[2];
		if (strstr(d, "/cpu/")) {
			snprintf(val, sizeof(val), "%ld", period);
			ok = put(d, "cpu.cfs_period_us", val) == 0;
			snprintf(val, sizeof(val), "%ld", quota);
			ok = ok && put(d, "cpu.cfs_quota_us", val) == 0;
		} else {
			snprintf(val, sizeof(val), "%ld %ld", quota, period);
			ok = put(d, "cpu.max", val) == 0;
		}
	}
	snprintf(val, sizeof(val), "%d", main_pid);
	for (int i = 0; ok && i < NCTL; i++)
		if (dirs[i][0])
			ok = put(dirs[i], "cgroup.procs", val) == 0;
	if (!ok)
		return 1; // the janitor removes what was made
	fprintf(stderr, "cgrun[%d]: in sysray-variants-%d (pids.max %ld, memory %ld MiB, cpu %ld/%ld µs)\n", main_pid,
		main_pid, pids_max, mib, quota, period);
	char *cmd = argv[optind];
	if (!strchr(cmd, '/')) {
		char self[PATH_MAX], path[PATH_MAX + 64];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n > 0) {
			self[n] = 0;
			snprintf(path, sizeof(path), "%s/%s", dirname(self), cmd);
			if (access(path, X_OK) == 0)
				execv(path, argv + optind);
		}
	}
	execvp(cmd, argv + optind);
	perror(cmd);
	return 127;
}
