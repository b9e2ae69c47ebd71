/*
 * Fills argv[1] MiB of anonymous memory, prints FILLED, then holds it until
 * killed: with no swap, the host is left with little free memory and little
 * page cache (memory pressure for everyone else).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024;
	size_t len = mib << 20, page = 4096;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	/* Huge pages: a VM's first touch of its memory is slow, 4 KiB at a time slower. */
	madvise(p, len, MADV_HUGEPAGE);
	for (size_t i = 0; i < len; i += page)
		p[i] = 1;
	printf("FILLED %zu\n", mib);
	fflush(stdout);
	for (;;)
		pause();
}
