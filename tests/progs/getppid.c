/* Calls getppid exactly N times (argv[1]): ground truth for syscall counts. */
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	for (long i = 0; i < n; i++)
		syscall(SYS_getppid);
	return 0;
}
