// textbusy: a write to a running program, or an exec of a file still open
// for writing, fails with ETXTBSY, "Text file busy", and the question is
// which process holds the file.
//
// textbusy [-m write|rdwr|truncate|exec|rename|probe] [-n HOLDERS] [-p PROCS] [-r RETRIES] [-b BACKOFF_MS]
//
// It works in a fresh directory /tmp/textbusy.PID, removed at the end. It
// copies its own executable there as "server" and starts HOLDERS (default
// 1) processes running that copy (each execs it; their comm is "server"),
// which live until the main process ends (they read a pipe whose writer it
// is; PR_SET_PDEATHSIG too). Then the main process "deploys" a new version
// of the program. Modes:
//
//   write     openat(server, O_WRONLY|O_TRUNC), as cp onto the running
//             binary does: refused with ETXTBSY; retried RETRIES times
//             (default 5) every BACKOFF_MS (default 200), then exit 1.
//   rdwr      the same with open(server, O_RDWR) (the open syscall).
//   truncate  the same with truncate(server, 0).
//   exec      no server runs: a child "textbusy-edit" writes a script
//             job.sh and keeps it open for writing (an editor, or a
//             descriptor a fork inherited); the main process execs job.sh,
//             is refused with ETXTBSY, retries and exits 1.
//   rename    benign: the new version is written to server.new and renamed
//             over server (install(1) does this): no ETXTBSY, exit 0.
//   probe     benign: one openat(O_WRONLY) of server, refused, then the
//             rename as above, exit 0: a program that handles a busy file.
//
// -p PROCS forks PROCS deployers that each do the mode's calls.
//
// Printed on stderr: "textbusy: held pid=N file=F" once the file is held,
// and a RESULT line at the end.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *mode = "write";
static int holders = 1;
static int procs = 1;
static int retries = 5;
static int backoff_ms = 200;
static char dir[64], server[96], script[96];
static int life[2];

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

// hold: the server running the copied binary, until the main process ends.
static int hold(int fd)
{
	char c;
	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
	return 0;
}

static void copy_self(const char *to)
{
	int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (in < 0 || out < 0) {
		perror("textbusy: copying itself");
		exit(1);
	}
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof buf)) > 0)
		if (write(out, buf, n) != n) {
			perror("textbusy: write");
			exit(1);
		}
	close(in);
	close(out);
}

static pid_t start_holder(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(life[1]);
		char fd[16];
		snprintf(fd, sizeof fd, "%d", life[0]);
		execl(server, "server", "--hold", fd, (char *)NULL);
		perror("textbusy: exec server");
		_exit(1);
	}
	return pid;
}

static pid_t start_editor(void)
{
	int ready[2];
	if (pipe(ready) < 0)
		exit(1);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		prctl(PR_SET_NAME, "textbusy-edit");
		close(life[1]);
		close(ready[0]);
		int fd = open(script, O_WRONLY | O_CREAT | O_TRUNC, 0755);
		const char body[] = "#!/bin/sh\necho job done\n";
		if (fd < 0 || write(fd, body, sizeof body - 1) < 0)
			_exit(1);
		// Kept open for writing, as an editor that has not closed it.
		(void)!write(ready[1], "x", 1);
		hold(life[0]);
		_exit(0);
	}
	close(ready[1]);
	char c;
	(void)!read(ready[0], &c, 1);
	close(ready[0]);
	return pid;
}

// try is one attempt of the mode's call: 0 done, else the errno.
static int try(void)
{
	long r = 0;
	if (!strcmp(mode, "write") || !strcmp(mode, "probe"))
		r = syscall(SYS_openat, AT_FDCWD, server, O_WRONLY | O_TRUNC | O_CLOEXEC);
	else if (!strcmp(mode, "rdwr"))
		r = syscall(SYS_open, server, O_RDWR | O_CLOEXEC);
	else if (!strcmp(mode, "truncate"))
		r = syscall(SYS_truncate, server, 0);
	else if (!strcmp(mode, "exec")) {
		char *argv[] = {script, NULL}, *envp[] = {NULL};
		r = syscall(SYS_execve, script, argv, envp);
	}
	if (r < 0)
		return errno;
	if (r > 0 && strcmp(mode, "truncate"))
		close((int)r);
	return 0;
}

// replace writes the new version beside the old and renames it over: the
// path then names a new inode, and the running server keeps the old one.
static int replace(void)
{
	char tmp[112];
	snprintf(tmp, sizeof tmp, "%s.new", server);
	copy_self(tmp);
	return rename(tmp, server) < 0 ? errno : 0;
}

// deploy is one deployer: the mode's calls; its exit status is 1 when it
// gave up.
static int deploy(int *busy)
{
	*busy = 0;
	if (!strcmp(mode, "rename"))
		return replace() ? 1 : 0;
	for (int i = 0; i <= retries; i++) {
		int err = try();
		if (err == 0)
			return 0;
		if (err != ETXTBSY) {
			fprintf(stderr, "textbusy: %s: %s\n", mode, strerror(err));
			return 2;
		}
		(*busy)++;
		if (!strcmp(mode, "probe"))
			return replace() ? 1 : 0;
		if (i < retries)
			sleep_ms(backoff_ms);
	}
	return 1;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--hold"))
		return hold(atoi(argv[2]));
	int opt;
	while ((opt = getopt(argc, argv, "m:n:p:r:b:")) != -1) {
		switch (opt) {
		case 'm': mode = optarg; break;
		case 'n': holders = atoi(optarg); break;
		case 'p': procs = atoi(optarg); break;
		case 'r': retries = atoi(optarg); break;
		case 'b': backoff_ms = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: textbusy [-m write|rdwr|truncate|exec|rename|probe] [-n HOLDERS] [-p PROCS] "
					"[-r RETRIES] [-b BACKOFF_MS]\n");
			return 2;
		}
	}
	const char *modes[] = {"write", "rdwr", "truncate", "exec", "rename", "probe"};
	int known = 0;
	for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
		known |= !strcmp(mode, modes[i]);
	if (!known || holders < 1 || procs < 1 || retries < 0) {
		fprintf(stderr, "textbusy: bad arguments\n");
		return 2;
	}
	snprintf(dir, sizeof dir, "/tmp/textbusy.%d", getpid());
	snprintf(server, sizeof server, "%s/server", dir);
	snprintf(script, sizeof script, "%s/job.sh", dir);
	if (mkdir(dir, 0755) < 0 || pipe2(life, O_CLOEXEC) < 0) {
		perror("textbusy: setup");
		return 1;
	}
	// The holders read life[0] across their exec: not close-on-exec there.
	fcntl(life[0], F_SETFD, 0);
	copy_self(server);
	pid_t held[64];
	int nheld = 0;
	if (!strcmp(mode, "exec")) {
		held[nheld++] = start_editor();
		fprintf(stderr, "textbusy: held pid=%d file=%s\n", held[0], script);
	} else {
		for (int i = 0; i < holders && nheld < 64; i++)
			held[nheld++] = start_holder();
		// The server runs once its exec is done: /proc/PID/exe names it.
		for (int i = 0; i < nheld; i++) {
			char exe[64], target[128];
			snprintf(exe, sizeof exe, "/proc/%d/exe", held[i]);
			for (int w = 0; w < 1000; w++) {
				ssize_t n = readlink(exe, target, sizeof target - 1);
				if (n > 0 && (target[n] = 0, !strcmp(target, server)))
					break;
				sleep_ms(1);
			}
			fprintf(stderr, "textbusy: held pid=%d file=%s\n", held[i], server);
		}
	}
	fcntl(life[0], F_SETFD, FD_CLOEXEC);
	int busy = 0, status = 0;
	if (procs == 1) {
		status = deploy(&busy);
	} else {
		for (int i = 0; i < procs; i++) {
			if (fork() == 0) {
				int b;
				_exit(deploy(&b));
			}
		}
		for (int i = 0; i < procs; i++) {
			int st;
			pid_t w = wait(&st);
			if (w > 0 && WIFEXITED(st) && WEXITSTATUS(st) > status)
				status = WEXITSTATUS(st);
		}
	}
	fprintf(stderr, "RESULT pid=%d mode=%s file=%s holder=%d holders=%d procs=%d etxtbsy=%d status=%d\n", getpid(), mode,
		!strcmp(mode, "exec") ? script : server, nheld ? held[0] : 0, nheld, procs, busy, status);
	close(life[1]);
	for (int i = 0; i < nheld; i++)
		waitpid(held[i], NULL, 0);
	char tmp[112];
	snprintf(tmp, sizeof tmp, "%s.new", server);
	unlink(tmp);
	unlink(server);
	unlink(script);
	rmdir(dir);
	return status;
}
