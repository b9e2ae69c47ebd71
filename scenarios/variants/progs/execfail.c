// execfail: a launcher whose children try to run a program that cannot run,
// and exit with the shell's status for it (127 not found, 126 not
// executable), as a container whose entrypoint is missing or broken does.
// The doctor's exec-failure finding must name the failure whichever errno,
// however many attempts one child makes ($PATH), from whichever thread,
// with execve or execveat, once or in a restart loop already under way.
//
// usage: execfail [-e KIND] [-n CHILDREN] [-i MS] [-d SECONDS] [-t] [-x]
//   KIND: enoent (a missing path), eacces (a file without the execute bit),
//   enoexec (an executable file that is neither ELF nor #!), interp (a
//   script whose #! interpreter is missing: ENOENT), path (execvp over a
//   $PATH of 8 directories, none holding the program: 8 ENOENT), execveat
//   (execveat(fd, "", AT_EMPTY_PATH) of an open file without the execute
//   bit: EACCES).
//   -n CHILDREN one after the other (default 1), -i MS apart; with -d, a
//   restart loop for SECONDS instead.
//   -t the child execs from a second thread while the first waits.
//   -x no child: the process itself, which started fine, execs the program
//   in place, as an entrypoint script's `exec "$@"` or `bash -c CMD` does,
//   and exits with 127/126 when that fails.
// The files are made in a temporary directory, removed on exit and on
// SIGINT/SIGTERM/SIGHUP.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *kind = "enoent";
static char dir[] = "/tmp/execfail.XXXXXX";
static char target[256];
static char pathvar[4096];
static int target_fd = -1;

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

// What cleanup removes, named in advance: it runs in a signal handler too.
static char file_path[300], bin_path[8][300];

static void cleanup(void)
{
	unlink(file_path);
	for (int i = 0; i < 8; i++)
		rmdir(bin_path[i]);
	rmdir(dir);
}

static void on_signal(int sig)
{
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void make_file(const char *content, mode_t mode)
{
	strcpy(target, file_path);
	int fd = open(target, O_WRONLY | O_CREAT | O_TRUNC, mode);
	if (fd < 0 || write(fd, content, strlen(content)) != (ssize_t)strlen(content)) {
		perror(target);
		exit(1);
	}
	close(fd);
	chmod(target, mode);
}

static void setup(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(file_path, sizeof(file_path), "%s/entrypoint", dir);
	for (int i = 0; i < 8; i++)
		snprintf(bin_path[i], sizeof(bin_path[i]), "%s/bin%d", dir, i);
	atexit(cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	if (!strcmp(kind, "enoent")) {
		snprintf(target, sizeof(target), "%s/app/server", dir);
	} else if (!strcmp(kind, "eacces") || !strcmp(kind, "execveat")) {
		make_file("#!/bin/sh\necho hello\n", 0644);
		if (!strcmp(kind, "execveat"))
			target_fd = open(target, O_RDONLY);
	} else if (!strcmp(kind, "enoexec")) {
		make_file("server: not a binary, a config file copied over it\n", 0755);
	} else if (!strcmp(kind, "interp")) {
		make_file("#!/usr/local/bin/python2.7\nprint 'hello'\n", 0755);
	} else if (!strcmp(kind, "path")) {
		char *p = pathvar;
		for (int i = 0; i < 8; i++) {
			mkdir(bin_path[i], 0755);
			p += sprintf(p, "%s%s", i ? ":" : "", bin_path[i]);
		}
		strcpy(target, "server");
	} else {
		fprintf(stderr, "execfail: unknown kind %s\n", kind);
		exit(2);
	}
}

// try_exec runs the program the way KIND says and returns why it could not.
static int try_exec(void)
{
	char *argv[] = {target, NULL};
	char *envp[] = {"PATH=/nonexistent", NULL};
	if (!strcmp(kind, "path")) {
		setenv("PATH", pathvar, 1);
		execvp(target, argv);
	} else if (!strcmp(kind, "execveat")) {
		syscall(SYS_execveat, target_fd, "", argv, envp, AT_EMPTY_PATH);
	} else {
		execve(target, argv, envp);
	}
	int e = errno;
	fprintf(stderr, "execfail[%d]: %s: %s\n", getpid(), target, strerror(e));
	return e;
}

static void *attempt(void *arg)
{
	(void)arg;
	_exit(try_exec() == ENOENT ? 127 : 126);
}

static void child(int threaded)
{
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	if (threaded) {
		pthread_t t;
		pthread_create(&t, NULL, attempt, NULL);
		for (;;)
			pause();
	}
	attempt(NULL);
}

int main(int argc, char **argv)
{
	int n = 1, threaded = 0, opt;
	long interval = 0;
	double secs = 0;
	int in_place = 0;
	while ((opt = getopt(argc, argv, "e:n:i:d:tx")) != -1) {
		switch (opt) {
		case 'e': kind = optarg; break;
		case 'n': n = atoi(optarg); break;
		case 'i': interval = atol(optarg); break;
		case 'd': secs = atof(optarg); break;
		case 't': threaded = 1; break;
		case 'x': in_place = 1; break;
		default:
			fprintf(stderr, "usage: execfail [-e enoent|eacces|enoexec|interp|path|execveat] [-n N] [-i MS] [-d S] [-t] [-x]\n");
			return 2;
		}
	}
	if (n < 1 || interval < 0 || secs < 0) {
		fprintf(stderr, "execfail: bad arguments\n");
		return 2;
	}
	setup();
	if (in_place) {
		int e = try_exec();
		cleanup(); // _exit skips atexit
		_exit(e == ENOENT ? 127 : 126);
	}
	int failed = 0, tries = 0;
	double end = now() + secs;
	for (int i = 0; secs > 0 ? now() < end : i < n; i++) {
		pid_t pid = fork();
		if (pid == 0)
			child(threaded);
		int status;
		waitpid(pid, &status, 0);
		tries++;
		failed += WIFEXITED(status) && WEXITSTATUS(status) >= 126;
		if (interval)
			msleep(interval);
	}
	fprintf(stderr, "execfail: %d of %d children could not run %s\n", failed, tries, target);
	return failed ? 1 : 0;
}
