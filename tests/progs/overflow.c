// Overflows a stack: "main" recurses on the main thread's stack until it
// hits the guard gap below it; "thread" does so on a 64 KiB thread stack,
// whose guard page is a PROT_NONE mapping. Each calls getppid three times
// just before, so its last syscalls are known.
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Winfinite-recursion"

static int deep(int n) __attribute__((noinline));
static int deep(int n)
{
	volatile char frame[512];
	frame[0] = (char)n;
	return deep(n + 1) + frame[0];
}

static void last_calls(void)
{
	for (int i = 0; i < 3; i++)
		syscall(SYS_getppid);
}

static void *run(void *arg)
{
	(void)arg;
	last_calls();
	deep(0);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "thread") == 0) {
		pthread_attr_t a;
		pthread_t t;
		pthread_attr_init(&a);
		pthread_attr_setstacksize(&a, 64 << 10);
		pthread_create(&t, &a, run, NULL);
		pthread_join(t, NULL);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "main") == 0) {
		last_calls();
		return deep(0);
	}
	fprintf(stderr, "usage: overflow main|thread\n");
	return 2;
}
