// rename: getppid calls under names and thread ids that change mid-run, as
// records cache both (bpf/state.h, struct ids): the thread renames itself
// (prctl), another thread renames it (pthread_setname_np writes
// /proc/self/task/TID/comm), and a thread that is not the leader runs
// execve (it takes the process's id and the program's name). Before each
// getppid it appends "TID NAME" to the file named by argv[1]: the record of
// that call must say the same.
//
// usage: rename FILE
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static FILE *out;
static char self[4096];
static char *truth;
static int ready[2], go[2];

static void call(void)
{
	char name[17] = {0};
	prctl(PR_GET_NAME, name);
	fprintf(out, "%ld %s\n", (long)syscall(SYS_gettid), name);
	fflush(out);
	syscall(SYS_getppid);
}

static void *worker(void *arg)
{
	char c;
	(void)arg;
	call();
	// The main thread renames this one, which has made a call under its
	// old name, then lets it go on.
	if (write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) != 1)
		_exit(1);
	call();
	char *argv[] = {self, truth, "after", NULL};
	execv(self, argv);
	perror("execv");
	_exit(127);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: rename FILE\n");
		return 2;
	}
	truth = argv[1];
	out = fopen(truth, "a");
	if (!out) {
		perror(truth);
		return 1;
	}
	if (argc > 2) {
		call(); // after the execve: the leader's id, the program's name
		return 0;
	}
	if (readlink("/proc/self/exe", self, sizeof(self) - 1) < 0) {
		perror("readlink");
		return 1;
	}
	call();
	prctl(PR_SET_NAME, "self-named");
	call();
	if (pipe(ready) || pipe(go)) {
		perror("pipe");
		return 1;
	}
	pthread_t t;
	if (pthread_create(&t, NULL, worker, NULL)) {
		fprintf(stderr, "pthread_create failed\n");
		return 1;
	}
	char c;
	if (read(ready[0], &c, 1) != 1)
		return 1;
	if (pthread_setname_np(t, "other-named")) {
		fprintf(stderr, "pthread_setname_np failed\n");
		return 1;
	}
	if (write(go[1], "g", 1) != 1)
		return 1;
	for (;;)
		pause(); // the worker's execve ends this thread
}
