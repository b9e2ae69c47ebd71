// oomer: processes that outgrow their memory cgroup's limit, so the kernel's
// OOM killer ends them with SIGKILL (and counts it in /proc/vmstat
// oom_kill). The doctor's oom-kill finding must name the kill whatever the
// process, thread and cgroup counts, whichever way the memory is charged,
// and whether the growth began before sysray started.
//
// usage: oomer [-p PROCS] [-t THREADS] [-c CGROUPS] [-l LIMIT_MIB] [-s STEP_MIB]
//              [-i MS] [-m anon|populate|memfd] [-r -d SECONDS]
//   -p PROCS workers, each a child that joins a cgroup (round robin over -c
//   CGROUPS, each limited to LIMIT_MIB, default 64) and grows by STEP_MIB
//   (default 8) every MS milliseconds (default 0) until it is killed; with
//   -p 0 the main process itself joins the first cgroup and grows.
//   -t THREADS per worker, each growing.
//   -m anon: malloc and touch (page faults in user mode); populate:
//   mmap(MAP_POPULATE), so the charge that fails is made inside the mmap
//   syscall; memfd: write() to a memfd (shmem page cache, charged inside
//   write, not in the process's RSS).
//   -r restarts a worker when it dies, for -d SECONDS, as a supervisor does.
// The cgroups (cgroup v1's memory controller where mounted, else v2) are
// made here and removed on every way out: a janitor child, outside them,
// waits for the main process to end however it ends (even by SIGKILL),
// kills what is left in them and removes them.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXCG 16

static char root[128];         // the memory hierarchy's root
static const char *limit_file; // memory.limit_in_bytes (v1) or memory.max (v2)
static pid_t main_pid;
static int ncg = 1, threads = 1;
static long step_mib = 8, interval_ms;
static const char *how = "anon";

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void msleep(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void cg_path(char *buf, size_t n, int i, const char *file)
{
	snprintf(buf, n, "%s/sysray-variant-oom-%d-%d%s%s", root, main_pid, i, file ? "/" : "", file ? file : "");
}

static int put(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

// empty kills what is left in a cgroup and tells whether it is empty.
static int empty(int i)
{
	char path[256], buf[4096];
	cg_path(path, sizeof(path), i, "cgroup.procs");
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
	char path[256];
	for (int i = 0; i < MAXCG; i++) {
		cg_path(path, sizeof(path), i, NULL);
		for (int tries = 0; tries < 500; tries++) {
			if (empty(i) && (rmdir(path) == 0 || errno == ENOENT))
				break;
			msleep(10);
		}
	}
}

// janitor runs outside the cgroups until the main process is gone, however
// it ends, then removes them.
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

static void join(int i)
{
	char path[256], pid[32];
	cg_path(path, sizeof(path), i, "cgroup.procs");
	snprintf(pid, sizeof(pid), "%d", getpid());
	if (put(path, pid) < 0) {
		perror(path);
		exit(1);
	}
}

static void grow_once(int memfd)
{
	size_t len = (size_t)step_mib << 20;
	if (!strcmp(how, "populate")) {
		if (mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0) == MAP_FAILED)
			perror("mmap");
	} else if (!strcmp(how, "memfd")) {
		static char chunk[1 << 20];
		memset(chunk, 1, sizeof(chunk));
		for (long i = 0; i < step_mib; i++)
			if (write(memfd, chunk, sizeof(chunk)) < 0) {
				perror("write memfd");
				msleep(10);
			}
	} else {
		char *p = malloc(len);
		if (p)
			memset(p, 1, len);
	}
}

static void *grow(void *arg)
{
	(void)arg;
	int memfd = -1;
	if (!strcmp(how, "memfd") && (memfd = memfd_create("oomer", 0)) < 0) {
		perror("memfd_create");
		exit(1);
	}
	for (;;) {
		grow_once(memfd);
		if (interval_ms)
			msleep(interval_ms);
	}
	return NULL;
}

static void worker(int i)
{
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	join(i % ncg);
	pthread_t t;
	for (int j = 1; j < threads; j++)
		pthread_create(&t, NULL, grow, NULL);
	grow(NULL);
}

static pid_t spawn(int i)
{
	pid_t pid = fork();
	if (pid == 0)
		worker(i);
	return pid;
}

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

int main(int argc, char **argv)
{
	int procs = 1, restart = 0, opt;
	long limit_mib = 64;
	double secs = 0;
	while ((opt = getopt(argc, argv, "p:t:c:l:s:i:m:rd:")) != -1) {
		switch (opt) {
		case 'p': procs = atoi(optarg); break;
		case 't': threads = atoi(optarg); break;
		case 'c': ncg = atoi(optarg); break;
		case 'l': limit_mib = atol(optarg); break;
		case 's': step_mib = atol(optarg); break;
		case 'i': interval_ms = atol(optarg); break;
		case 'm': how = optarg; break;
		case 'r': restart = 1; break;
		case 'd': secs = atof(optarg); break;
		default:
			fprintf(stderr, "usage: oomer [-p N] [-t N] [-c N] [-l MIB] [-s MIB] [-i MS] [-m anon|populate|memfd] [-r -d S]\n");
			return 2;
		}
	}
	if (procs < 0 || procs > 64 || threads < 1 || threads > 64 || ncg < 1 || ncg > MAXCG || limit_mib < 8 ||
	    step_mib < 1 || interval_ms < 0 || (restart && (secs <= 0 || procs == 0)) ||
	    (strcmp(how, "anon") && strcmp(how, "populate") && strcmp(how, "memfd"))) {
		fprintf(stderr, "oomer: bad arguments\n");
		return 2;
	}
	struct stat st;
	if (stat("/sys/fs/cgroup/memory/cgroup.procs", &st) == 0) {
		strcpy(root, "/sys/fs/cgroup/memory");
		limit_file = "memory.limit_in_bytes";
	} else {
		strcpy(root, "/sys/fs/cgroup");
		limit_file = "memory.max";
	}
	main_pid = getpid();
	if (fork() == 0)
		janitor();
	// No SA_RESTART: a signal must interrupt the wait below.
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	for (int i = 0; i < ncg; i++) {
		char path[256], val[32];
		cg_path(path, sizeof(path), i, NULL);
		if (mkdir(path, 0755) < 0) {
			perror(path);
			return 1;
		}
		cg_path(path, sizeof(path), i, limit_file);
		snprintf(val, sizeof(val), "%ld", limit_mib << 20);
		if (put(path, val) < 0) {
			perror(path);
			return 1;
		}
	}
	fprintf(stderr, "oomer[%d]: %d cgroup(s) of %ld MiB under %s; growing by %ld MiB (%s)\n", main_pid, ncg,
		limit_mib, root, step_mib, how);
	if (procs == 0) {
		// The main process itself grows: killed by the OOM killer, the
		// janitor cleans up after it.
		worker(0);
	}
	pid_t kids[64];
	for (int i = 0; i < procs; i++)
		kids[i] = spawn(i);
	int kills = 0, alive = procs;
	double end = now() + secs;
	while (alive > 0 && !stop) {
		int status;
		pid_t pid = waitpid(-1, &status, 0);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		int i = 0;
		while (i < procs && kids[i] != pid)
			i++;
		if (i == procs)
			continue; // the janitor
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
			kills++;
		if (restart && now() < end && !stop) {
			kids[i] = spawn(i);
		} else {
			kids[i] = 0;
			alive--;
		}
	}
	for (int i = 0; i < procs; i++)
		if (kids[i] > 0)
			kill(kids[i], SIGKILL);
	fprintf(stderr, "oomer[%d]: %d worker(s) killed by SIGKILL\n", main_pid, kills);
	return 0;
}
