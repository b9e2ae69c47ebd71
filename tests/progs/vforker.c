/* vforks argv[2] times (default 3); each child sleeps argv[1] ms (default
 * 30) and exits, so the parent's vfork sleeps that long, uninterruptibly
 * (killable), in wait_for_vfork_done. */
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long ms = argc > 1 ? atol(argv[1]) : 30;
	long n = argc > 2 ? atol(argv[2]) : 3;
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000 * 1000};
	for (; n > 0; n--) {
		pid_t pid = vfork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			/* Raw syscalls only: the child shares the parent's memory. */
			syscall(SYS_nanosleep, &ts, NULL);
			_exit(0);
		}
	}
	return 0;
}
