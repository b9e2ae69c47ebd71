/*
 * A tight loop of 1-byte reads of /dev/zero: the read exit the DNS
 * follower (bpf/dnswatch.h) looks at. With "dns", a UDP socket connected
 * to 127.0.0.1:53 stays open all along (a UDP connect sends nothing), so
 * the doctor has a socket marked and each read looks the table up: the
 * follower's worst case. Prints the mean ns per call.
 *
 *   read_loop [CALLS] [dns]
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000000;
	if (argc > 2 && !strcmp(argv[2], "dns")) {
		int s = socket(AF_INET, SOCK_DGRAM, 0);
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53)};
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
			perror("connect 127.0.0.1:53");
			return 1;
		}
	}
	int fd = open("/dev/zero", O_RDONLY);
	if (fd < 0) {
		perror("/dev/zero");
		return 1;
	}
	char c;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		if (read(fd, &c, 1) != 1)
			return 1;
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
	return 0;
}
