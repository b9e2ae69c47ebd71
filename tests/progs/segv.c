/* A child that dies of SIGSEGV writing to address 0x10; the parent reports it and exits 0. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		volatile int *p = (int *)0x10;
		*p = 1;
		_exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	printf("child %d signaled=%d sig=%d\n", pid, WIFSIGNALED(status), WTERMSIG(status));
	return 0;
}
