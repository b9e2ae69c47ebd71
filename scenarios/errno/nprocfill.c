// nprocfill: fork and pthread_create fail with "Resource temporarily
// unavailable" while the machine has memory free and no cgroup is at its
// pids.max.
//
// The kernel counts the tasks (processes and threads) of each user and
// refuses a new one with EAGAIN when the count has reached the creating
// process's soft RLIMIT_NPROC (copy_process), unless the user is root or
// the process holds CAP_SYS_RESOURCE or CAP_SYS_ADMIN. The count is per
// user, not per process: every task of the uid on the host counts, other
// programs' included. Login sessions and units often set it (ulimit -u,
// LimitNPROC=, nproc in limits.conf); a program that starts workers or
// threads reaches it and reads the errno as a transient or memory error.
//
// This program counts the tasks the uid already runs on the host, sets
// RLIMIT_NPROC (soft and hard) to that count plus EXTRA for itself alone,
// drops to the uid (setresuid: its capabilities go with root), creates
// tasks until the kernel refuses, then retries for a bounded time, the way
// a program waiting for a task slot does. Other tasks of the uid that start
// meanwhile only make it reach the limit sooner; ones that end give it
// more tasks before the refusal. It changes no global state.
//
// nprocfill [-m fork|thread|vfork|spawn] [-u UID] [-e EXTRA] [-p PROCS] [-d SECONDS] [-b BACKOFF_US] [-x] [-o]
//
// MODE is how it creates tasks:
//   fork    fork() (clone on x86-64) of children that wait (default)
//   thread  pthread_create (clone3) of threads that wait
//   vfork   fork() children until refused, then retries vfork()
//   spawn   fork() children until refused, then retries posix_spawn of
//           itself (glibc: clone3 with CLONE_VM|CLONE_VFORK)
// -u UID is the user it drops to (default 65534, nobody); -e EXTRA the
// tasks it may add (default 16). -x gives up: exit 1 at the first
// refusal. -o handles it: the first refusal ends the filling, and it works
// with the tasks it got (writes to /dev/null) for SECONDS and exits 0, the
// way a pool that sizes itself to what it can start does. With PROCS > 1,
// PROCS processes of the uid do the same, sharing its one count.
//
// Printed on stderr, per process: "nprocfill: full pid=N uid=U limit=L
// user_tasks_before=B made=M errno=E" at the first refusal, and at the end
// a RESULT line with the refusals counted.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *mode = "fork";
static double duration = 2;
static long backoff_us = 10000;
static int give_up, handle;
static long user_tasks_before, limit;
static uid_t uid = 65534;
static int gate[2]; // children wait for its write end to close
static char self[4096];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

// user_tasks counts the threads of the uid's processes, as the kernel
// counts them against RLIMIT_NPROC (the real uid).
static long user_tasks(uid_t u)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -1;
	long n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		char path[300], buf[4096];
		snprintf(path, sizeof path, "/proc/%s/status", de->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t r = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (r <= 0)
			continue;
		buf[r] = 0;
		char *p = strstr(buf, "\nUid:"), *t = strstr(buf, "\nThreads:");
		if (p && t && (uid_t)strtoul(p + 5, NULL, 10) == u)
			n += strtol(t + 9, NULL, 10);
	}
	closedir(d);
	return n;
}

static void *idle(void *arg)
{
	(void)arg;
	char c;
	while (read(gate[0], &c, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

// child_wait is a forked child's life: until the gate closes or the
// parent dies.
static void child_wait(void)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	close(gate[1]);
	idle(NULL);
	_exit(0);
}

static pthread_attr_t attr;

// Its own children, waited for by pid: under cgrun, the process also has
// cgrun's janitor as a child, which waits for this one to end.
static pid_t kids[1 << 16];
static long nkids;

static void reap(void)
{
	close(gate[1]);
	for (long i = 0; i < nkids; i++)
		while (waitpid(kids[i], NULL, 0) < 0 && errno == EINTR)
			;
}

// fill_one makes one more waiting task: 0 done, else the errno.
static int fill_one(void)
{
	if (!strcmp(mode, "thread")) {
		pthread_t t;
		return pthread_create(&t, &attr, idle, NULL);
	}
	pid_t pid = fork();
	if (pid == 0)
		child_wait();
	if (pid > 0 && nkids < (long)(sizeof kids / sizeof kids[0]))
		kids[nkids++] = pid;
	return pid < 0 ? errno : 0;
}

// again retries the mode's call once: 0 done, else the errno. A task it
// makes does not wait (vfork's and spawn's children exit at once).
static int again(void)
{
	if (!strcmp(mode, "vfork")) {
		pid_t pid = vfork();
		if (pid == 0)
			_exit(0);
		if (pid < 0)
			return errno;
		waitpid(pid, NULL, 0);
		return 0;
	}
	if (!strcmp(mode, "spawn")) {
		pid_t pid;
		char *argv[] = {self, "-h", NULL};
		int err = posix_spawn(&pid, self, NULL, NULL, argv, NULL);
		if (err == 0)
			waitpid(pid, NULL, 0);
		return err;
	}
	return fill_one();
}

static int run(void)
{
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 << 10);
	long made = 0, eagain = 0, other = 0;
	int err;
	while ((err = fill_one()) == 0)
		if (++made > 1 << 16) {
			fprintf(stderr, "nprocfill: %ld tasks and no refusal; is the process still root?\n", made);
			return 1;
		}
	fprintf(stderr, "nprocfill: full pid=%d uid=%d mode=%s limit=%ld user_tasks_before=%ld made=%ld user_tasks=%ld errno=%s\n",
		getpid(), (int)getuid(), mode, limit, user_tasks_before, made, user_tasks(uid), strerrorname_np(err));
	double deadline = now() + duration;
	for (;;) {
		if (err == EAGAIN)
			eagain++;
		else
			other++;
		if (give_up) {
			fprintf(stderr, "nprocfill: %s: giving up\n", strerror(err));
			return 1;
		}
		if (handle || now() >= deadline)
			break;
		usleep(backoff_us);
		if ((err = again()) != 0)
			continue;
		// A slot came free (another task of the uid ended): fill it.
		made++;
		while ((err = fill_one()) == 0)
			made++;
	}
	if (handle) {
		// The work the program came to do, with the tasks it got.
		int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
		char buf[512] = {0};
		while (now() < deadline) {
			if (write(fd, buf, sizeof buf) < 0)
				break;
			usleep(1000);
		}
		close(fd);
	}
	fprintf(stderr, "RESULT pid=%d mode=%s limit=%ld made=%ld eagain=%ld other=%ld\n", getpid(), mode, limit, made,
		eagain, other);
	return 0;
}

int main(int argc, char **argv)
{
	int procs = 1, c;
	long extra = 16;
	while ((c = getopt(argc, argv, "m:u:e:p:d:b:xoh")) != -1) {
		switch (c) {
		case 'm': mode = optarg; break;
		case 'u': uid = (uid_t)atol(optarg); break;
		case 'e': extra = atol(optarg); break;
		case 'p': procs = atoi(optarg); break;
		case 'd': duration = atof(optarg); break;
		case 'b': backoff_us = atol(optarg); break;
		case 'x': give_up = 1; break;
		case 'o': handle = 1; break;
		case 'h': return 0; // spawn's child
		default:
		usage:
			fprintf(stderr, "usage: nprocfill [-m fork|thread|vfork|spawn] [-u UID] [-e EXTRA] [-p PROCS] [-d SECONDS] [-b BACKOFF_US] [-x] [-o]\n");
			return 2;
		}
	}
	if ((strcmp(mode, "fork") && strcmp(mode, "thread") && strcmp(mode, "vfork") && strcmp(mode, "spawn")) || uid == 0 ||
	    extra < 1)
		goto usage;
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0) {
		perror("nprocfill: /proc/self/exe");
		return 1;
	}
	self[n] = 0;
	// Counted while still root: the uid's other tasks are the host's, and
	// the limit leaves EXTRA above them whatever they are. The processes
	// this program forks count too, so they are in EXTRA.
	user_tasks_before = user_tasks(uid);
	limit = user_tasks_before + extra;
	struct rlimit rl = {.rlim_cur = (rlim_t)limit, .rlim_max = (rlim_t)limit};
	if (setrlimit(RLIMIT_NPROC, &rl) != 0) {
		perror("nprocfill: setrlimit RLIMIT_NPROC");
		return 1;
	}
	// The kernel does not apply the limit to root or to a process with
	// CAP_SYS_RESOURCE or CAP_SYS_ADMIN: setresuid from root to another
	// uid clears every capability.
	if (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0) {
		perror("nprocfill: setresuid");
		return 1;
	}
	if (pipe2(gate, O_CLOEXEC) != 0) {
		perror("nprocfill: pipe");
		return 1;
	}
	if (procs <= 1) {
		int rc = run();
		reap();
		return rc;
	}
	pid_t workers[64];
	int nk = 0;
	for (int i = 0; i < procs && i < 64; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("nprocfill: fork");
			break;
		}
		if (pid == 0) {
			// Ended with this process however it ends (a SIGTERM
			// from whoever started it): the workers hold the user's
			// tasks.
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() == 1)
				_exit(1);
			int rc = run();
			reap();
			_exit(rc);
		}
		workers[nk++] = pid;
	}
	close(gate[1]);
	int status, rc = 0;
	for (int i = 0; i < nk; i++)
		if (waitpid(workers[i], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			rc = 1;
	return rc;
}
