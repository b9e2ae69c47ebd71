// memlock: locking memory fails with "Cannot allocate memory" while the
// machine has gigabytes free.
//
// The kernel counts a process's locked pages (VmLck) against its
// RLIMIT_MEMLOCK unless it has CAP_IPC_LOCK. Containers and login sessions
// often get 64 KiB or 8 MiB of it; a program that pins its buffers
// (databases, crypto key pages, RDMA and DPDK, audio) reaches that long
// before memory runs short, and then mlock fails with ENOMEM, mmap with
// MAP_LOCKED (or any mmap after mlockall(MCL_FUTURE)) with EAGAIN, and
// io_uring_setup with ENOMEM. This program lowers the limit for itself
// alone (setrlimit), drops CAP_IPC_LOCK (root keeps it, and the limit does
// not apply to it), locks memory until the kernel refuses, then retries for
// a bounded time the way a program waiting for memory does. It changes no
// global state.
//
// memlock [-m MODE] [-l KIB] [-p PROCS] [-d SECONDS] [-b BACKOFF_US] [-x] [-o]
//
// MODE is what locks:
//   mlock     mlock of 64 KiB chunks of one large mapping (default)
//   mlockall  mlockall(MCL_CURRENT|MCL_FUTURE), then 64 KiB mmaps, each
//             locked as made, until one is refused; -l defaults to the
//             address space it holds plus 256 KiB, so mlockall itself passes
//   malloc    as mlockall, then malloc of 16 KiB: brk refuses to move the
//             break, and glibc's fallback mmap fails with EAGAIN
//   maplocked mmap(MAP_LOCKED) of 64 KiB chunks
//   iouring   io_uring_setup of 256-entry rings, kept open
// -l KIB sets RLIMIT_MEMLOCK (soft and hard; default 64 KiB, mlockall's
// above). -x gives up: exit 1 at the first refusal. -o handles it: after
// the first refusal it goes on unlocked (writes to /dev/null) for SECONDS
// and exits 0, the way a program that only tries to lock does. With
// PROCS > 1 each of PROCS forked processes does the same.
//
// Printed on stderr, per process: "memlock: full pid=N mode=M limit_kb=L
// vmlck_kb=K vmsize_kb=S mem_available_kb=A" at the first refusal, and at
// the end a RESULT line with the refusals counted by errno.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/io_uring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (64 << 10)

static const char *mode = "mlock";
static double duration = 2;
static long backoff_us = 10000;
static int give_up, handle;
static long limit_kb = -1;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

// status_kb reads a "Key:  N kB" line of /proc/self/status.
static long status_kb(const char *key)
{
	char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	size_t kl = strlen(key);
	for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, key, kl) && l[kl] == ':')
			return strtol(l + kl + 1, NULL, 10);
	return -1;
}

static long mem_available_kb(void)
{
	char buf[4096];
	int fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *p = strstr(buf, "MemAvailable:");
	return p ? strtol(p + 13, NULL, 10) : -1;
}

// drop_ipc_lock takes CAP_IPC_LOCK out of the effective and permitted
// sets: with it, the kernel does not apply RLIMIT_MEMLOCK at all.
static int drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d) != 0)
		return -1;
	d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	d[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
	d[CAP_IPC_LOCK / 32].inheritable &= ~(1u << (CAP_IPC_LOCK % 32));
	return syscall(SYS_capset, &h, d);
}

static char *region;	    // mlock's: the mapping locked chunk by chunk
static long region_chunks;
static long next_chunk;

// lock_one locks one more chunk the mode's way: 0 done, else the errno.
static int lock_one(void)
{
	if (!strcmp(mode, "mlock")) {
		if (next_chunk >= region_chunks)
			return ERANGE;
		if (mlock(region + next_chunk * CHUNK, CHUNK) != 0)
			return errno;
		next_chunk++;
		return 0;
	}
	if (!strcmp(mode, "iouring")) {
		struct io_uring_params p;
		memset(&p, 0, sizeof p);
		long fd = syscall(SYS_io_uring_setup, 256, &p);
		return fd < 0 ? errno : 0; // kept open: its rings stay counted
	}
	if (!strcmp(mode, "malloc")) {
		void *m = malloc(16 << 10); // kept: locked, as every new mapping
		return m ? 0 : (errno ? errno : ENOMEM);
	}
	int flags = MAP_PRIVATE | MAP_ANONYMOUS;
	if (!strcmp(mode, "maplocked"))
		flags |= MAP_LOCKED;
	void *p = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, flags, -1, 0);
	return p == MAP_FAILED ? errno : 0;
}

static int run(void)
{
	if (!strcmp(mode, "mlock")) {
		region_chunks = 4096; // 256 MiB of address space, never touched but where locked
		region = mmap(NULL, region_chunks * CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (region == MAP_FAILED) {
			perror("memlock: mmap");
			return 1;
		}
	} else if (!strcmp(mode, "mlockall") || !strcmp(mode, "malloc")) {
		if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
			fprintf(stderr, "memlock: mlockall: %s (limit_kb=%ld vmsize_kb=%ld)\n", strerror(errno), limit_kb,
				status_kb("VmSize"));
			return 1;
		}
	}
	long locked = 0, enomem = 0, eagain = 0, eperm = 0, other = 0;
	int err;
	while ((err = lock_one()) == 0)
		if (++locked > 1 << 20) {
			fprintf(stderr, "memlock: %ld locks and no refusal; is CAP_IPC_LOCK still held?\n", locked);
			return 1;
		}
	long avail = mem_available_kb();
	fprintf(stderr, "memlock: full pid=%d mode=%s limit_kb=%ld vmlck_kb=%ld vmsize_kb=%ld mem_available_kb=%ld locked=%ld errno=%s\n",
		getpid(), mode, limit_kb, status_kb("VmLck"), status_kb("VmSize"), avail, locked, strerrorname_np(err));
	double deadline = now() + duration;
	for (;;) {
		switch (err) {
		case ENOMEM: enomem++; break;
		case EAGAIN: eagain++; break;
		case EPERM: eperm++; break;
		default: other++;
		}
		if (give_up) {
			fprintf(stderr, "memlock: %s: giving up\n", strerror(err));
			return 1;
		}
		if (handle || now() >= deadline)
			break;
		usleep(backoff_us);
		err = lock_one();
		if (err == 0)
			locked++;
	}
	if (handle) {
		// Carry on unlocked: the work the program came to do.
		int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
		char buf[512] = {0};
		while (now() < deadline) {
			if (write(fd, buf, sizeof buf) < 0)
				break;
			usleep(1000);
		}
		close(fd);
	}
	fprintf(stderr, "RESULT pid=%d mode=%s limit_kb=%ld vmlck_kb=%ld locked=%ld enomem=%ld eagain=%ld eperm=%ld other=%ld\n",
		getpid(), mode, limit_kb, status_kb("VmLck"), locked, enomem, eagain, eperm, other);
	return 0;
}

int main(int argc, char **argv)
{
	int procs = 1, c;
	while ((c = getopt(argc, argv, "m:l:p:d:b:xo")) != -1) {
		switch (c) {
		case 'm': mode = optarg; break;
		case 'l': limit_kb = atol(optarg); break;
		case 'p': procs = atoi(optarg); break;
		case 'd': duration = atof(optarg); break;
		case 'b': backoff_us = atol(optarg); break;
		case 'x': give_up = 1; break;
		case 'o': handle = 1; break;
		default:
		usage:
			fprintf(stderr, "usage: memlock [-m mlock|mlockall|malloc|maplocked|iouring] [-l KIB] [-p PROCS] [-d SECONDS] [-b BACKOFF_US] [-x] [-o]\n");
			return 2;
		}
	}
	if (strcmp(mode, "mlock") && strcmp(mode, "mlockall") && strcmp(mode, "malloc") && strcmp(mode, "maplocked") &&
	    strcmp(mode, "iouring"))
		goto usage;
	if (limit_kb < 0)
		limit_kb = strcmp(mode, "mlockall") && strcmp(mode, "malloc") ? 64 : status_kb("VmSize") + 256;
	struct rlimit rl = {.rlim_cur = (rlim_t)limit_kb << 10, .rlim_max = (rlim_t)limit_kb << 10};
	if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
		perror("memlock: setrlimit RLIMIT_MEMLOCK");
		return 1;
	}
	if (drop_ipc_lock() != 0) {
		perror("memlock: capset");
		return 1;
	}
	if (procs <= 1)
		return run();
	for (int i = 0; i < procs; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("memlock: fork");
			break;
		}
		if (pid == 0)
			_exit(run());
	}
	int status, rc = 0;
	while (wait(&status) > 0)
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			rc = 1;
	return rc;
}
