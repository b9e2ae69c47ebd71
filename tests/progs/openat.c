/* One openat of argv[1] with known flags and mode, then close; exits 3 on failure. */
#include <fcntl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int fd = openat(AT_FDCWD, argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (fd < 0)
		return 3;
	close(fd);
	/* and one that must fail with ENOENT */
	openat(AT_FDCWD, "/nonexistent/sysray", O_RDONLY);
	return 0;
}
