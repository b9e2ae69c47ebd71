/* An mmap that fails with EBADF, and a MAP_32BIT one that succeeds. */
#include <sys/mman.h>
#include <stdio.h>

int main(void)
{
	void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, 12345, 0);
	if (p != MAP_FAILED)
		return 1;
	p = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
	if (p == MAP_FAILED)
		return 2;
	printf("%p\n", p);
	return 0;
}
