// paths: openat calls whose paths the record must carry whole, of every
// length from 1 to 300 bytes (a path argument is kept up to 255 bytes and
// marked truncated past that), each followed by a sendto whose address is
// captured too. Staged records (bpf/emit.h) then have every size a record
// with captured arguments can have, and batches fill at every offset.
//
// usage: paths DIR  (DIR must not exist: every openat fails with ENOENT)
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	char path[512];
	size_t dir = strlen(argv[1]);
	if (dir + 2 > 300)
		return 2;
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	for (size_t n = dir + 2; n <= 300; n++) {
		// DIR/xxx…x, n bytes long
		memcpy(path, argv[1], dir);
		path[dir] = '/';
		memset(path + dir + 1, 'a' + n % 26, n - dir - 1);
		path[n] = 0;
		openat(AT_FDCWD, path, O_RDONLY);
		to.sin_port = htons(n); // nothing listens: the datagram is dropped
		sendto(s, "x", 1, 0, (struct sockaddr *)&to, sizeof(to));
	}
	return 0;
}
