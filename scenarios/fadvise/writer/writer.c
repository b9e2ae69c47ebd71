// fadvise-writer: one process logging the way glog's LogFileObject::Write
// did with --drop_log_memory (the default): append, then
// posix_fadvise(fd, 0, len & ~4095, POSIX_FADV_DONTNEED) over the whole file
// after every write. The call walks and drops the file's page cache in the
// kernel each time, so most of the process's CPU goes to system time, and it
// gets worse as more such processes share the kernel.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

// run_delay_ns is the time this process spent runnable but waiting for a
// CPU, so a reader can tell kernel work from queueing behind other writers.
static uint64_t run_delay_ns(void)
{
	unsigned long long run = 0, wait = 0;
	FILE *f = fopen("/proc/self/schedstat", "r");
	if (f) {
		if (fscanf(f, "%llu %llu", &run, &wait) != 2)
			wait = 0;
		fclose(f);
	}
	return wait;
}

// utoa writes v in decimal and returns its length.
static size_t utoa(char *out, uint64_t v)
{
	char tmp[20];
	size_t n = 0;
	do {
		tmp[n++] = '0' + v % 10;
		v /= 10;
	} while (v);
	for (size_t i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	return n;
}

// A log2 histogram of fadvise latency: bucket i holds [2^i, 2^(i+1)) ns.
#define NBUCKETS 40
static uint64_t hist[NBUCKETS];

static void record(uint64_t ns)
{
	int b = 0;
	while (b < NBUCKETS - 1 && (ns >> (b + 1)))
		b++;
	hist[b]++;
}

// quantile returns the upper edge of the bucket holding quantile q.
static uint64_t quantile(uint64_t n, double q)
{
	uint64_t want = (uint64_t)(q * n), seen = 0;
	for (int b = 0; b < NBUCKETS; b++) {
		seen += hist[b];
		if (seen > want)
			return 2ull << b;
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: fadvise-writer -f FILE [-d SECONDS] [-s WRITE_BYTES] [-m MAX_FILE_MB] [-D] [-w]\n"
		"  -d  how long to log (default 5)\n"
		"  -s  bytes of log lines per write (default 4096)\n"
		"  -m  truncate the file when it reaches this size, like a log rotation (default 64)\n"
		"  -D  do not call posix_fadvise (glog --drop_log_memory=false, the fix)\n"
		"  -w  wait for a byte (or EOF) on stdin before starting, to start writers together\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *path = NULL;
	double secs = 5;
	size_t wsize = 4096;
	off_t max_size = 64 << 20;
	int drop = 1, wait_start = 0, opt;

	while ((opt = getopt(argc, argv, "f:d:s:m:Dwh")) != -1) {
		switch (opt) {
		case 'f':
			path = optarg;
			break;
		case 'd':
			secs = atof(optarg);
			break;
		case 's':
			wsize = (size_t)atol(optarg);
			break;
		case 'm':
			max_size = (off_t)atol(optarg) << 20;
			break;
		case 'D':
			drop = 0;
			break;
		case 'w':
			wait_start = 1;
			break;
		default:
			usage();
		}
	}
	if (!path || optind != argc || secs <= 0 || wsize == 0 || max_size <= 0)
		usage();

	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "open %s: %s\n", path, strerror(errno));
		return 1;
	}
	char *buf = malloc(wsize + 160);
	if (!buf)
		return 1;
	if (wait_start) {
		char c;
		if (read(0, &c, 1) < 0)
			return 1;
	}

	pid_t pid = getpid();
	uint64_t writes = 0, bytes = 0, calls = 0, fadv_total = 0, fadv_max = 0, lines = 0;
	off_t len = 0;
	uint64_t delay0 = run_delay_ns();
	struct rusage ru0, ru1;
	getrusage(RUSAGE_SELF, &ru0);
	uint64_t t0 = now_ns(), end = t0 + (uint64_t)(secs * 1e9), t = t0;

	while (t < end) {
		// Fill a write's worth of glog-style lines. The prefix is formatted
		// once per write and the lines are assembled by hand, so that user
		// time stays what a logger's would be and the kernel's share shows.
		struct timespec ts;
		struct tm tm;
		char prefix[96];
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		int plen = snprintf(prefix, sizeof(prefix), "I%02d%02d %02d:%02d:%02d.%06d %7d writer.c:%d] request ",
				    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
				    (int)(ts.tv_nsec / 1000), (int)pid, __LINE__);
		size_t n = 0;
		while (n < wsize) {
			memcpy(buf + n, prefix, plen);
			n += plen;
			n += utoa(buf + n, lines++);
			memcpy(buf + n, " served\n", 8);
			n += 8;
		}
		ssize_t w = write(fd, buf, n);
		if (w < 0) {
			fprintf(stderr, "write %s: %s\n", path, strerror(errno));
			return 1;
		}
		writes++;
		bytes += w;
		len += w;
		if (drop && len >= 4096) {
			// glog: "don't evict the most recent page".
			uint64_t a = now_ns();
			posix_fadvise(fd, 0, len & ~(off_t)4095, POSIX_FADV_DONTNEED);
			t = now_ns();
			uint64_t d = t - a;
			calls++;
			fadv_total += d;
			fadv_max = d > fadv_max ? d : fadv_max;
			record(d);
		} else {
			t = now_ns();
		}
		if (len >= max_size) {
			if (ftruncate(fd, 0) != 0) {
				fprintf(stderr, "truncate %s: %s\n", path, strerror(errno));
				return 1;
			}
			len = 0;
		}
	}

	getrusage(RUSAGE_SELF, &ru1);
	double el = (t - t0) / 1e9;
	long utime = (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) * 1000000L +
		     (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec);
	long stime = (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1000000L +
		     (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec);
	printf("WRITER pid=%d seconds=%.3f writes=%llu bytes=%llu fadvise_calls=%llu "
	       "fadvise_ns_total=%llu fadvise_ns_max=%llu fadvise_ns_p50=%llu fadvise_ns_p99=%llu "
	       "utime_us=%ld stime_us=%ld run_delay_us=%llu nvcsw=%ld nivcsw=%ld\n",
	       pid, el, (unsigned long long)writes, (unsigned long long)bytes,
	       (unsigned long long)calls, (unsigned long long)fadv_total,
	       (unsigned long long)fadv_max, (unsigned long long)quantile(calls, 0.5),
	       (unsigned long long)quantile(calls, 0.99), utime, stime,
	       (unsigned long long)((run_delay_ns() - delay0) / 1000),
	       ru1.ru_nvcsw - ru0.ru_nvcsw, ru1.ru_nivcsw - ru0.ru_nivcsw);
	close(fd);
	return 0;
}
