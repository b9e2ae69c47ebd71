/*
 * Touches MIB mebibytes (argv[1], 1024 by default), says so on stdout, then
 * writes through a NULL pointer. Its core, where one is dumped, holds all
 * that memory: writing it keeps the kernel a second or more between the
 * fault and the exit (TestAgentCrashAcrossWindows).
 */
#include <stdio.h>
#include <stdlib.h>

/* Volatile: the compiler may not drop a write it cannot see is through NULL. */
static int *volatile nullp;

int main(int argc, char **argv)
{
	size_t n = (argc > 1 ? strtoul(argv[1], 0, 10) : 1024) << 20;
	volatile char *p = malloc(n);
	if (!p)
		return 1;
	for (size_t i = 0; i < n; i += 4096)
		p[i] = 1;
	printf("touched %zu\n", n);
	fflush(stdout);
	*nullp = 1;
	return p[0];
}
