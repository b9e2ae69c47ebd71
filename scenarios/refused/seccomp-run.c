// seccomp-run: run a command under the seccomp filter of a container runtime
// older than the command's libc.
//
// Container runtimes install an allow-list profile whose default action
// refuses every syscall the profile's authors did not know yet. A libc built
// later calls those newer syscalls first (glibc 2.34 creates threads with
// clone3, 2.33 checks access with faccessat2) and falls back to the older
// call only on ENOSYS. Docker before 20.10.10 (and runc's profiles of that
// time) answered EPERM instead, so the fallback never ran: threads could not
// be created, `[ -x file ]` failed. Stricter profiles kill the process with
// SIGSYS. This launcher installs a raw BPF filter that refuses the named
// syscalls in one of those ways and execs the command, as a runtime does.
//
//   seccomp-run [-a eperm|enosys|kill|trap] [-s NAME[,NAME...]] -- CMD [ARG...]
//
// Defaults: -a eperm -s clone3,faccessat2. A bare CMD found next to this
// program is run from there, so `seccomp-run -- newlibc` works from bin/.
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static const struct {
	const char *name;
	int nr;
} known[] = {
	{"clone3", __NR_clone3},	   {"faccessat2", __NR_faccessat2},
	{"openat2", __NR_openat2},	   {"close_range", __NR_close_range},
	{"statx", __NR_statx},		   {"rseq", __NR_rseq},
	{"pidfd_open", __NR_pidfd_open},   {"epoll_pwait2", __NR_epoll_pwait2},
	{"getrandom", __NR_getrandom},	   {"copy_file_range", __NR_copy_file_range},
	{"membarrier", __NR_membarrier},   {"fchmodat2", 452},
};

static int lookup(const char *name)
{
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcmp(known[i].name, name))
			return known[i].nr;
	char *end;
	long nr = strtol(name, &end, 10);
	if (*name && !*end && nr >= 0 && nr < 1024)
		return (int)nr;
	return -1;
}

static void usage(void)
{
	fprintf(stderr, "usage: seccomp-run [-a eperm|enosys|kill|trap] [-s NAME[,NAME...]] -- CMD [ARG...]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *action = "eperm", *list = "clone3,faccessat2";
	int opt;
	while ((opt = getopt(argc, argv, "+a:s:")) != -1) {
		switch (opt) {
		case 'a':
			action = optarg;
			break;
		case 's':
			list = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind >= argc)
		usage();

	__u32 ret;
	if (!strcmp(action, "eperm"))
		ret = SECCOMP_RET_ERRNO | EPERM;
	else if (!strcmp(action, "enosys"))
		ret = SECCOMP_RET_ERRNO | ENOSYS;
	else if (!strcmp(action, "kill"))
		ret = SECCOMP_RET_KILL_PROCESS;
	else if (!strcmp(action, "trap"))
		ret = SECCOMP_RET_TRAP;
	else
		usage();

	int nrs[32], n = 0;
	char *names = strdup(list);
	for (char *tok = strtok(names, ","); tok; tok = strtok(NULL, ",")) {
		int nr = lookup(tok);
		if (nr < 0 || n == 32) {
			fprintf(stderr, "seccomp-run: unknown syscall %s\n", tok);
			return 2;
		}
		nrs[n++] = nr;
	}

	// arch check, load nr, one JEQ per refused call, allow.
	struct sock_filter f[4 + 2 * 32 + 1];
	int k = 0;
	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	for (int i = 0; i < n; i++) {
		f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nrs[i], 0, 1);
		f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, ret);
	}
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = {.len = (unsigned short)k, .filter = f};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		perror("seccomp-run: PR_SET_NO_NEW_PRIVS");
		return 1;
	}
	if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) {
		perror("seccomp-run: seccomp");
		return 1;
	}

	char *cmd = argv[optind], path[PATH_MAX];
	if (!strchr(cmd, '/')) {
		ssize_t len = readlink("/proc/self/exe", path, sizeof(path) - 1);
		if (len > 0) {
			path[len] = 0;
			char *slash = strrchr(path, '/');
			if (slash && (size_t)(slash + 1 - path) + strlen(cmd) < sizeof(path)) {
				strcpy(slash + 1, cmd);
				if (access(path, X_OK) == 0)
					cmd = path;
			}
		}
	}
	execvp(cmd, argv + optind);
	fprintf(stderr, "seccomp-run: %s: %s\n", argv[optind], strerror(errno));
	return 127;
}
