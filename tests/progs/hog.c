/* Touches 1 GiB, 16 MiB at a time: under a small memory limit the OOM killer ends it. */
#include <stdlib.h>
#include <string.h>

int main(void)
{
	for (int i = 0; i < 64; i++) {
		char *p = malloc(16 << 20);
		if (!p)
			return 1;
		memset(p, 1, 16 << 20);
	}
	return 0;
}
