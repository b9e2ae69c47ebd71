/*
 * A mix of syscalls with spread-out latencies, for checking percentiles:
 * getppid (fast), nanosleep of 0-2 ms (slow, varied), and reads of
 * /dev/zero of varied sizes (in between). Runs until killed.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(void)
{
	static char buf[1 << 20];
	int fd = open("/dev/zero", O_RDONLY);
	srand(42);
	for (;;) {
		for (int i = 0; i < 50; i++)
			syscall(SYS_getppid);
		for (int i = 0; i < 20; i++)
			read(fd, buf, 1 + rand() % sizeof(buf));
		struct timespec ts = {0, (rand() % 2000) * 1000};
		nanosleep(&ts, NULL);
	}
}
