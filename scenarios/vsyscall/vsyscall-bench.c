// vsyscall-bench: how fast is time() when a program calls it the way glibc
// 2.13 (Debian wheezy, redis:2.8.22's base image) did, through the legacy
// vsyscall page, compared with the vDSO every current libc uses?
//
// On a kernel with vsyscall=xonly or emulate, each legacy call is an
// instruction fetch from a page the CPU may not execute: a page fault that
// the kernel answers by emulating time() (emulate_vsyscall). Under
// vsyscall=none the same call is a SIGSEGV.
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// A copy of glibc 2.13's sysdeps/unix/sysv/linux/x86_64/time.S: the same
// instructions the story's gdb session disassembled, so a tracer sees the
// fault at 0xffffffffff600400 with this function as the caller.
__asm__(".text\n"
	".globl vsyscall_time\n"
	".type vsyscall_time,@function\n"
	"vsyscall_time:\n"
	"	sub $0x8,%rsp\n"
	"	mov $0xffffffffff600400,%rax\n"
	"	call *%rax\n"
	"	add $0x8,%rsp\n"
	"	ret\n"
	".size vsyscall_time,.-vsyscall_time\n");
time_t vsyscall_time(time_t *t);

static time_t vdso_clock(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec;
}

// Each mode gets its own loop with a direct call, so that the loop costs
// the same around every mode and the fast ones are not hidden behind an
// indirect call.
#define LOOP(name, call)                                                                   \
	static time_t name(long n)                                                         \
	{                                                                                  \
		time_t sum = 0;                                                            \
		for (long i = 0; i < n; i++)                                               \
			sum += (call);                                                     \
		return sum;                                                                \
	}
LOOP(loop_vdso, time(NULL))
LOOP(loop_vdso_clock, vdso_clock())
// What the vsyscall page held under vsyscall=native: mov $201,%rax; syscall.
LOOP(loop_syscall, syscall(SYS_time, NULL))
LOOP(loop_vsyscall, vsyscall_time(NULL))

struct mode {
	const char *name;
	const char *what;
	time_t (*loop)(long n);
};

static const struct mode modes[] = {
	{"vdso", "glibc time() -> vDSO", loop_vdso},
	{"vdso-clock", "clock_gettime(REALTIME) -> vDSO", loop_vdso_clock},
	{"syscall", "syscall(SYS_time) (vsyscall=native)", loop_syscall},
	{"vsyscall", "call *0xffffffffff600400 (glibc 2.13)", loop_vsyscall},
};
#define NMODES (sizeof(modes) / sizeof(modes[0]))

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

// vsyscall_page reports how this kernel maps the page: emulate (r-x),
// xonly (--x) or none (absent).
static const char *vsyscall_page(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	const char *mode = "none";

	if (!f)
		return "unknown";
	while (fgets(line, sizeof(line), f)) {
		char perms[8];
		if (!strstr(line, "[vsyscall]"))
			continue;
		if (sscanf(line, "%*s %7s", perms) == 1)
			mode = perms[0] == 'r' ? "emulate" : "xonly";
	}
	fclose(f);
	return mode;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: vsyscall-bench [-m MODE[,MODE...]] [-d SECONDS | -n COUNT] [-f]\n"
		"  -m  modes to run (default vdso,syscall,vsyscall):\n");
	for (size_t i = 0; i < NMODES; i++)
		fprintf(stderr, "        %-10s %s\n", modes[i].name, modes[i].what);
	fprintf(stderr,
		"  -d  seconds per mode (default 1)\n"
		"  -n  calls per mode instead of a duration (rounded up to 65536)\n"
		"  -f  run the vsyscall mode even if the page is absent (dies of SIGSEGV)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	char sel[256] = "vdso,syscall,vsyscall";
	double secs = 1;
	long count = 0;
	int force = 0, opt;
	double rate[NMODES] = {0};
	int ran[NMODES] = {0};

	while ((opt = getopt(argc, argv, "m:d:n:fh")) != -1) {
		switch (opt) {
		case 'm':
			snprintf(sel, sizeof(sel), "%s", optarg);
			break;
		case 'd':
			secs = atof(optarg);
			break;
		case 'n':
			count = atol(optarg);
			break;
		case 'f':
			force = 1;
			break;
		default:
			usage();
		}
	}
	if (optind != argc || secs <= 0 || count < 0)
		usage();

	const char *page = vsyscall_page();
	printf("vsyscall page: %s\n", page);
	printf("%-10s %12s %9s %12s %9s\n", "mode", "calls", "seconds", "calls/s", "ns/call");

	for (char *tok = strtok(sel, ","); tok; tok = strtok(NULL, ",")) {
		size_t m;
		for (m = 0; m < NMODES && strcmp(tok, modes[m].name); m++)
			;
		if (m == NMODES) {
			fprintf(stderr, "unknown mode %s\n", tok);
			usage();
		}
		if (modes[m].loop == loop_vsyscall && !strcmp(page, "none") && !force) {
			fprintf(stderr, "vsyscall: page absent (vsyscall=none); skipped, -f to crash\n");
			continue;
		}
		// A wrong answer would mean we measured something other than time().
		time_t got = modes[m].loop(1), want = time(NULL);
		if (got < want - 1 || got > want + 1) {
			fprintf(stderr, "%s: returned %ld, time() says %ld\n", tok, (long)got, (long)want);
			return 1;
		}
		// Read the clock only every 64Ki calls so that the loop measures
		// the call, not the deadline test.
		long n = 0;
		volatile time_t sink = 0;
		double t0 = now();
		for (;;) {
			sink += modes[m].loop(65536);
			n += 65536;
			if (count ? n >= count : now() - t0 >= secs)
				break;
		}
		double t1 = now();
		(void)sink;
		double el = t1 - t0;
		rate[m] = n / el;
		ran[m] = 1;
		printf("%-10s %12ld %9.3f %12.0f %9.1f\n", tok, n, el, rate[m], el * 1e9 / n);
	}

	printf("RESULT vsyscall_page=%s", page);
	for (size_t m = 0; m < NMODES; m++) {
		if (!ran[m])
			continue;
		char key[32];
		snprintf(key, sizeof(key), "%s", modes[m].name);
		for (char *p = key; *p; p++)
			if (*p == '-')
				*p = '_';
		printf(" %s_per_s=%.0f", key, rate[m]);
	}
	if (ran[0] && ran[3])
		printf(" vdso_over_vsyscall=%.0f", rate[0] / rate[3]);
	printf("\n");
	return 0;
}
