// vsyscaller: programs built against an old C library (glibc before 2.14)
// or old static binaries, which reach time(), gettimeofday() and getcpu()
// by calling fixed addresses in the legacy vsyscall page
// (0xffffffffff600000, +0x400, +0x800). Under vsyscall=xonly or emulate
// every such call is an instruction fetch the CPU refuses: a page fault in
// which the kernel emulates the call (emulate_vsyscall). A read of the page
// (old code that inspects it) is refused with SIGSEGV under xonly and none.
// The doctor's legacy-vsyscall finding must name the call whichever entry,
// process count or thread count, and the death whichever thread dies.
//
// usage: vsyscaller [-c CALL] [-d SECONDS | -n CALLS] [-p PROCS] [-t THREADS] [-w SECONDS]
//   CALL: time (default), gettimeofday, getcpu: calls through the page, each
//   worker for -d seconds or -n calls; read: one thread (the last of -t)
//   reads the page and the process dies of SIGSEGV; in each of -p
//   processes, forked from a parent that waits for them and exits 0.
//   -w waits this long before starting.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define VSYSCALL 0xffffffffff600000UL

typedef long (*gtod_fn)(struct timeval *, struct timezone *);
typedef long (*time_fn)(time_t *);
typedef long (*getcpu_fn)(unsigned *, unsigned *, void *);

static const char *call = "time";
static double secs = 1;
static long count;
static int threads = 1;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

// One call through the page, the way the old libc made it: an indirect call
// to the fixed address.
static long vcall(void)
{
	switch (call[0]) {
	case 'g':
		if (call[3] == 't') { // gettimeofday
			struct timeval tv;
			return ((gtod_fn)VSYSCALL)(&tv, NULL);
		} else { // getcpu
			unsigned cpu, node;
			return ((getcpu_fn)(VSYSCALL + 0x800))(&cpu, &node, NULL);
		}
	default:
		return ((time_fn)(VSYSCALL + 0x400))(NULL);
	}
}

static void *worker(void *arg)
{
	long last = (long)arg;
	if (!strcmp(call, "read")) {
		if (!last) {
			pause(); // the process dies under it
			return NULL;
		}
		usleep(20000); // let the other threads start
		for (int i = 0; i < 3; i++)
			syscall(SYS_getppid);
		// Old code inspecting the page (e.g. reading the time() entry's
		// bytes): xonly makes the page execute-only.
		volatile uint8_t b = *(volatile uint8_t *)(VSYSCALL + 0x400);
		(void)b;
		fprintf(stderr, "vsyscaller[%d]: the read of the page succeeded (vsyscall=emulate?)\n", getpid());
		exit(0);
	}
	long n = 0;
	double end = now() + secs;
	if (count > 0) {
		for (; n < count; n++)
			vcall();
	} else {
		do {
			for (int i = 0; i < 256; i++, n++)
				vcall();
		} while (now() < end);
	}
	fprintf(stderr, "vsyscaller[%d]: %ld %s calls through the vsyscall page\n", getpid(), n, call);
	return NULL;
}

static void work(void)
{
	pthread_t t[64];
	for (long i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(long)(i == threads - 1));
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
}

static const char *page_mode(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	const char *mode = "none";
	if (!f)
		return "unknown";
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "[vsyscall]"))
			mode = strstr(line, " r-xp ") ? "emulate" : "xonly";
	fclose(f);
	return mode;
}

int main(int argc, char **argv)
{
	int procs = 1, opt;
	double wait = 0;
	while ((opt = getopt(argc, argv, "c:d:n:p:t:w:")) != -1) {
		switch (opt) {
		case 'c': call = optarg; break;
		case 'd': secs = atof(optarg); break;
		case 'n': count = atol(optarg); break;
		case 'p': procs = atoi(optarg); break;
		case 't': threads = atoi(optarg); break;
		case 'w': wait = atof(optarg); break;
		default:
			fprintf(stderr, "usage: vsyscaller [-c time|gettimeofday|getcpu|read] [-d S | -n N] [-p N] [-t N] [-w S]\n");
			return 2;
		}
	}
	if (strcmp(call, "time") && strcmp(call, "gettimeofday") && strcmp(call, "getcpu") && strcmp(call, "read")) {
		fprintf(stderr, "vsyscaller: unknown call %s\n", call);
		return 2;
	}
	if (procs < 1 || procs > 64 || threads < 1 || threads > 64 || secs <= 0 || count < 0) {
		fprintf(stderr, "vsyscaller: bad arguments\n");
		return 2;
	}
	const char *mode = page_mode();
	if (!strcmp(mode, "none"))
		fprintf(stderr, "vsyscaller: no vsyscall page (vsyscall=none): every call will die of SIGSEGV\n");
	if (wait > 0) {
		struct timespec w = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
		nanosleep(&w, NULL);
	}
	if (procs == 1) {
		work();
		return 0;
	}
	for (int i = 0; i < procs; i++)
		if (fork() == 0) {
			work();
			return 0;
		}
	int status, died = 0;
	while (wait4(-1, &status, 0, NULL) > 0)
		died += WIFSIGNALED(status);
	fprintf(stderr, "vsyscaller: %d of %d processes died of a signal\n", died, procs);
	return 0;
}
