// vsyscall-crash: a container entrypoint that dies of SIGSEGV without a
// word, the way bash from redis:2.8.22 died on a vsyscall=none host.
//
// It starts like bash does (credentials, signal mask) and then touches the
// legacy vsyscall page. Which touches this kernel refuses depends on its
// vsyscall mode; -p runs every variant in a child and prints the outcome.
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define VSYSCALL_BASE 0xffffffffff600000UL

// glibc 2.13's time(), byte for byte (see vsyscall-bench.c).
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

// Calls into the page at off. The kernel only emulates the three entry
// points (0x000 gettimeofday, 0x400 time, 0x800 getcpu); any other target is
// a "misaligned vsyscall" and gets SIGSEGV whatever the mode.
static long vsyscall_call(unsigned long off, void *a, void *b)
{
	long ret;
	// The call pushes a return address below %rsp: step over the red zone
	// the compiler may be using.
	__asm__ volatile("lea -128(%%rsp),%%rsp\n\t"
			 "call *%1\n\t"
			 "lea 128(%%rsp),%%rsp"
			 : "=a"(ret)
			 : "r"(VSYSCALL_BASE + off), "D"(a), "S"(b), "d"(0)
			 : "rcx", "r8", "r9", "r10", "r11", "memory", "cc");
	return ret;
}

static int touch_read(void)
{
	// A data read: allowed under vsyscall=emulate, refused under xonly
	// ("vsyscall read attempt denied") and none.
	return *(volatile unsigned char *)VSYSCALL_BASE;
}

static int touch_time(void) { return vsyscall_time(NULL) > 0; }

static int touch_getcpu(void)
{
	unsigned cpu = ~0u, node = ~0u;
	vsyscall_call(0x800, &cpu, &node);
	return cpu != ~0u;
}

static int touch_bad(void)
{
	unsigned long a = 0, b = 0;
	return (int)vsyscall_call(0xc00, &a, &b);
}

struct variant {
	const char *name;
	int (*touch)(void);
	const char *expect[3]; // outcome under vsyscall=emulate, xonly, none
};

static const struct variant variants[] = {
	{"read", touch_read, {"ok", "SIGSEGV", "SIGSEGV"}},
	{"call-time", touch_time, {"ok", "ok", "SIGSEGV"}},
	{"call-getcpu", touch_getcpu, {"ok", "ok", "SIGSEGV"}},
	{"call-bad", touch_bad, {"SIGSEGV", "SIGSEGV", "SIGSEGV"}},
};
#define NVARIANTS (sizeof(variants) / sizeof(variants[0]))

static const struct variant *find(const char *name)
{
	for (size_t i = 0; i < NVARIANTS; i++)
		if (!strcmp(variants[i].name, name))
			return &variants[i];
	return NULL;
}

static const char *page_mode(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	const char *mode = "none";

	if (!f)
		return "unknown";
	while (fgets(line, sizeof(line), f)) {
		char perms[8];
		if (strstr(line, "[vsyscall]") && sscanf(line, "%*s %7s", perms) == 1)
			mode = perms[0] == 'r' ? "emulate" : "xonly";
	}
	fclose(f);
	return mode;
}

// entrypoint does what bash did before it died: ask who it is, block
// signals, then use the vsyscall page. It prints nothing on the way.
static int entrypoint(const struct variant *v)
{
	sigset_t set, old;
	volatile uid_t ids = getuid() + getgid() + geteuid() + getegid();

	(void)ids;
	sigfillset(&set);
	sigprocmask(SIG_BLOCK, &set, &old);
	sigprocmask(SIG_SETMASK, &old, NULL);
	int r = v->touch();
	// Only reached when the kernel emulated the access.
	printf("%s: survived (%d)\n", v->name, r);
	return 0;
}

static const char *expected(const struct variant *v, const char *mode)
{
	static const char *modes[] = {"emulate", "xonly", "none"};
	for (int i = 0; i < 3; i++)
		if (!strcmp(modes[i], mode))
			return v->expect[i];
	return "?";
}

static int probe(void)
{
	const char *mode = page_mode();
	char result[512];
	int off, all = 1;

	off = snprintf(result, sizeof(result), "RESULT vsyscall_page=%s", mode);
	printf("vsyscall page: %s\n%-12s %-9s %-9s\n", mode, "variant", "outcome", "expected");
	fflush(stdout);
	for (size_t i = 0; i < NVARIANTS; i++) {
		const struct variant *v = &variants[i];
		fflush(stdout);
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			// Keep the survivors quiet so the table stays readable.
			if (!freopen("/dev/null", "w", stdout))
				_exit(3);
			_exit(entrypoint(v));
		}
		int st;
		char outcome[32];
		waitpid(pid, &st, 0);
		if (WIFSIGNALED(st))
			snprintf(outcome, sizeof(outcome), "SIG%s", sigabbrev_np(WTERMSIG(st)));
		else if (WEXITSTATUS(st) == 0)
			snprintf(outcome, sizeof(outcome), "ok");
		else
			snprintf(outcome, sizeof(outcome), "exit%d", WEXITSTATUS(st));
		const char *want = expected(v, mode);
		all &= !strcmp(outcome, want);
		printf("%-12s %-9s %-9s\n", v->name, outcome, want);
		char key[32];
		snprintf(key, sizeof(key), "%s", v->name);
		for (char *p = key; *p; p++)
			if (*p == '-')
				*p = '_';
		off += snprintf(result + off, sizeof(result) - off, " %s=%s", key, outcome);
	}
	printf("%s as_expected=%s\n", result, all ? "yes" : "no");
	return all ? 0 : 1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: vsyscall-crash [VARIANT]   run as an entrypoint; default read\n"
		"       vsyscall-crash -p          run every variant in a child, print outcomes\n"
		"variants: read call-time call-getcpu call-bad\n");
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc > 2)
		usage();
	if (argc == 2 && !strcmp(argv[1], "-p"))
		return probe();
	const struct variant *v = find(argc == 2 ? argv[1] : "read");
	if (!v)
		usage();
	return entrypoint(v);
}
