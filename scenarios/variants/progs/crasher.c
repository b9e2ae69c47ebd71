// crasher: processes that die of a signal the CPU or the kernel raises for
// their own bad access or instruction, each a real fault: the doctor's
// fatal-signal finding must say which signal, and where, whichever thread
// takes it, however many processes die, and whether the process was
// already running when sysray started.
//
// usage: crasher [-k KIND] [-p PROCS] [-t THREADS] [-w SECONDS] [-r MS -d SECONDS]
//   KIND: sigbus (a read of a MAP_SHARED file mapping past the end of the
//   file, which another descriptor truncated: BUS_ADRERR), segv-unmapped (a
//   read of a freed 1 MiB malloc block, which free() unmapped: SEGV_MAPERR),
//   segv-ro (a write to a never-read read-only file mapping: SEGV_ACCERR),
//   sigfpe (an integer division by zero: FPE_INTDIV), sigill (ud2:
//   ILL_ILLOPN), abort (abort(): SIGABRT from the process itself).
//   -t the last of THREADS threads faults; the others wait in pause().
//   -p forks PROCS children that each fault; the parent waits and exits 0.
//   -w waits this long (in 50 ms sleeps) before faulting.
//   -r restarts a faulting child every MS milliseconds for -d seconds, as a
//   supervisor with a restart policy does.
// Just before faulting the faulting thread calls getppid three times, so its
// last syscalls are known.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *kind = "sigbus";
static int threads = 1;
static double wait_s;

static void msleep(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

// A file of two pages, mapped shared, then cut to nothing through another
// descriptor, as when a log or database file is truncated under a reader.
static volatile char *truncated_map(void)
{
	char path[] = "/tmp/crasher.XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0) {
		perror("mkstemp");
		exit(1);
	}
	unlink(path);
	char buf[8192];
	memset(buf, 'x', sizeof(buf));
	if (write(fd, buf, sizeof(buf)) != sizeof(buf)) {
		perror("write");
		exit(1);
	}
	char *p = mmap(NULL, sizeof(buf), PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	if (ftruncate(fd, 0) < 0) {
		perror("ftruncate");
		exit(1);
	}
	return p;
}

// A read-only private mapping of a file, never read: the page is not
// present when the write comes.
static volatile char *readonly_map(void)
{
	int fd = open("/proc/self/exe", O_RDONLY);
	char *p = fd < 0 ? MAP_FAILED : mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) {
		perror("mmap /proc/self/exe");
		exit(1);
	}
	return p;
}

static volatile int zero;

static void fault(void)
{
	volatile char *p = NULL;
	if (!strcmp(kind, "sigbus"))
		p = truncated_map();
	else if (!strcmp(kind, "segv-ro"))
		p = readonly_map();
	else if (!strcmp(kind, "segv-unmapped")) {
		p = malloc(1 << 20); // above the mmap threshold: its own mapping
		p[0] = 1;
		free((void *)p); // munmap
	}
	for (double end = now() + wait_s; now() < end;)
		msleep(50);
	for (int i = 0; i < 3; i++)
		syscall(SYS_getppid);
	if (!strcmp(kind, "sigbus")) {
		(void)p[4096 + 16];
	} else if (!strcmp(kind, "segv-ro")) {
		p[100] = 1;
	} else if (!strcmp(kind, "segv-unmapped")) {
		(void)p[4096];
	} else if (!strcmp(kind, "sigfpe")) {
		volatile int x = 1000 / zero;
		(void)x;
	} else if (!strcmp(kind, "sigill")) {
		__asm__ volatile("ud2");
	} else if (!strcmp(kind, "abort")) {
		abort();
	}
	fprintf(stderr, "crasher[%d]: %s did not kill the process\n", getpid(), kind);
	exit(3);
}

static void *thread(void *arg)
{
	if (arg)
		fault();
	for (;;)
		pause();
	return NULL;
}

// One process: the last of its threads faults.
static void crash(void)
{
	pthread_t t;
	for (long i = 1; i < threads; i++)
		pthread_create(&t, NULL, thread, (void *)(long)(i == threads - 1));
	if (threads == 1)
		fault();
	for (;;)
		pause();
}

static int reap(void)
{
	int status, died = 0;
	pid_t pid;
	while ((pid = wait4(-1, &status, 0, NULL)) > 0)
		if (WIFSIGNALED(status)) {
			died++;
			fprintf(stderr, "crasher: child %d killed by %s\n", pid, strsignal(WTERMSIG(status)));
		}
	return died;
}

int main(int argc, char **argv)
{
	int procs = 0, restart_ms = 0, opt;
	double secs = 0;
	while ((opt = getopt(argc, argv, "k:p:t:w:r:d:")) != -1) {
		switch (opt) {
		case 'k': kind = optarg; break;
		case 'p': procs = atoi(optarg); break;
		case 't': threads = atoi(optarg); break;
		case 'w': wait_s = atof(optarg); break;
		case 'r': restart_ms = atoi(optarg); break;
		case 'd': secs = atof(optarg); break;
		default:
			fprintf(stderr, "usage: crasher [-k sigbus|segv-unmapped|segv-ro|sigfpe|sigill|abort] [-p N] [-t N] [-w S] [-r MS -d S]\n");
			return 2;
		}
	}
	const char *kinds[] = {"sigbus", "segv-unmapped", "segv-ro", "sigfpe", "sigill", "abort"};
	int ok = 0;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		ok |= !strcmp(kind, kinds[i]);
	if (!ok || procs < 0 || procs > 64 || threads < 1 || threads > 64 || restart_ms < 0 || (restart_ms && secs <= 0)) {
		fprintf(stderr, "crasher: bad arguments\n");
		return 2;
	}
	// No core files left behind.
	struct rlimit nocore = {0, 0};
	setrlimit(RLIMIT_CORE, &nocore);
	if (restart_ms) {
		int n = 0;
		for (double end = now() + secs; now() < end; n++) {
			if (fork() == 0)
				crash();
			int status;
			wait4(-1, &status, 0, NULL);
			fprintf(stderr, "crasher: restart %d: child killed by %s\n", n, WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "nothing");
			msleep(restart_ms);
		}
		return 0;
	}
	if (procs == 0)
		crash();
	for (int i = 0; i < procs; i++)
		if (fork() == 0)
			crash();
	fprintf(stderr, "crasher: %d of %d children died of a signal\n", reap(), procs);
	return 0;
}
