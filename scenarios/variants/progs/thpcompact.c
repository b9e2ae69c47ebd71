// thpcompact: page faults that stall in direct compaction. A process
// faults in a region it asked transparent huge pages for
// (madvise(MADV_HUGEPAGE)) while the host's free memory is there but in
// scattered 4 KiB pages: with THP defrag at `madvise` (the default) or
// `always`, each such fault has the page allocator compact memory
// synchronously, in the faulting thread, on its CPU, before it can hand
// out a 2 MiB page. The doctor's compaction-stall finding must name the
// process, its time in direct compaction inside faults and the THP
// settings; and stay quiet when the same faults find free memory
// unfragmented (-b).
//
// usage: thpcompact [-f FREE_MIB] [-k KEEP_MIB] [-s THP_MIB] [-t THREADS]
//                   [-d SECONDS] [-D SECONDS] [-b]
//        thpcompact -P
//   -P prepare: write back and drop the page cache (below), and exit; for
//      a tracer to run before it starts: dropped by the traced command, 13
//      GiB of page cache took one write 2.5 s, a slow call before the story.
//   -f free memory to leave the host (default 1536 MiB): the rest of
//      MemFree is reserved as hugetlb pages (vm.nr_hugepages, put back on
//      every way out, by a janitor child if need be), which takes the
//      host's free 2 MiB blocks away cheaply. The page cache, when there
//      is more of it than the region (-s), is written back and dropped
//      first (sync, vm.drop_caches=1): what is
//      fragmented, and so how long the rounds can go on, must not depend
//      on what the host read before; and page cache left in place is
//      memory that reclaim (kswapd woken by fragmenting, DAMON's pageout,
//      the faults' own direct reclaim) turns into free 2 MiB blocks while
//      the faults run, which then need no compaction. On a host that had
//      read 20 GiB, the faults found such blocks for all but 42 of 256.
//   -k then 4 KiB pages (MADV_NOHUGEPAGE) are faulted in until MemFree
//      is down to KEEP_MIB (default 384), and every other one is given
//      back (MADV_DONTNEED); the free 2 MiB blocks left (/proc/buddyinfo,
//      orders 9 and 10) are reserved as hugetlb pages too: the free
//      memory left is scattered pages and small blocks.
//   -s the MADV_HUGEPAGE region then faulted, one write per 2 MiB
//      (default 512 MiB), by THREADS threads (default 1), each its part.
//   -d the THP faults begin SECONDS after thpcompact started (default 0),
//      or as soon as fragmenting ends if that is later: a clock, so that
//      when they begin does not depend on how fast this host fragments.
//   -D go on for SECONDS (default 0: one round): after each round the
//      region is unmapped, as much of the 4 KiB pages is given back as the
//      round took (keeping one page in each 2 MiB of them), and as many
//      hugetlb pages reserved as the round had huge pages, then the 2 MiB
//      blocks free, so the next round compacts again (the rounds and this
//      process share one CPU, whose per-CPU free lists hold what a round
//      gave back);
//      until the pages run out, or SIGTERM. The pages to give back last a
//      fixed number of rounds (about 16 of 32 MiB per GiB fragmented):
//      back to back, on a host that compacts fast, they ran out in under a
//      second, before a tracer started seconds later could attach. So the
//      rounds are spread over SECONDS, as many as the pages allow.
//   -b benign: no reservation and no fragmenting, the same THP faults.
//
// The process that fragments memory names itself thpfrag; each round of
// THP faults is a child of its own, thpcompact, which ends with the round.
// Printed on stderr: "thpcompact: fragmented pid=N ..." before the THP
// faults, then a RESULT line (pid: the last round's process): the faults' own timing (clock_gettime around
// each first write; stall_fault_ms: the slowest of them, as many in each
// round as the host entered direct compaction and reclaim in it), the host's /proc/vmstat deltas over the THP faults
// (compact_stall, compact_success, compact_fail, thp_fault_alloc,
// thp_fault_fallback, allocstall: host-wide counts, the ground truth the
// doctor's figures are checked against) and the 2 MiB pages the region got
// (AnonHugePages of /proc/self/smaps_rollup).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define HUGE (2UL << 20)

static const char *nr_path = "/proc/sys/vm/nr_hugepages";
static long free_mib = 1536, keep_mib = 384, thp_mib = 512, delay_s, dur_s;
static long every_ms; // -D: a round begins this long after the one before began
static int threads = 1, benign;
static char orig_nr[32];
static pid_t main_pid;
static volatile sig_atomic_t stop;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int put(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

static int get(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return 0;
}

// field reads "name value" lines (/proc/vmstat, /proc/meminfo,
// smaps_rollup): the value of name, or -1.
static long field(const char *path, const char *name)
{
	static char buf[16384];
	if (get(path, buf, sizeof buf) < 0)
		return -1;
	size_t n = strlen(name);
	for (char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, name, n) == 0 && (p[n] == ' ' || p[n] == ':'))
			return strtol(p + n + 1 + strspn(p + n + 1, " \t"), NULL, 10);
	}
	return -1;
}

// allocstall sums /proc/vmstat's allocstall_* (direct reclaim entries by zone).
static long allocstall(void)
{
	const char *z[] = {"allocstall_dma", "allocstall_dma32", "allocstall_normal", "allocstall_movable"};
	long s = 0;
	for (unsigned i = 0; i < sizeof z / sizeof z[0]; i++) {
		long v = field("/proc/vmstat", z[i]);
		if (v > 0)
			s += v;
	}
	return s;
}

// bigblocks counts the free blocks of 2 MiB and more in the zones huge
// pages come from, in 2 MiB units (/proc/buddyinfo orders 9 and 10).
static long bigblocks(void)
{
	static char buf[4096];
	if (get("/proc/buddyinfo", buf, sizeof buf) < 0)
		return 0;
	long n = 0;
	for (char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		char *z = strstr(p, "zone");
		char *eol = strchr(p, '\n');
		if (!z || (eol && z > eol))
			continue;
		z += 4;
		z += strspn(z, " ");
		if (strncmp(z, "DMA32", 5) != 0 && strncmp(z, "Normal", 6) != 0)
			continue;
		z += strcspn(z, " ");
		long v[11] = {0};
		for (int i = 0; i < 11; i++)
			v[i] = strtol(z, &z, 10);
		n += v[9] + 2 * v[10];
	}
	return n;
}

// RESERVE_STEP: the most hugetlb pages one write asks the pool for. The
// kernel takes them one by one inside the write: 10,000 pages (20 GiB, a
// whole idle host here) took one write 40-105 ms, a slow call the doctor
// rightly reports, over the faults that are the story. 1,024 pages took
// about 10 ms.
#define RESERVE_STEP 1024

// reserve adds n hugetlb pages to the pool; it returns how many it got.
static long reserve(long n)
{
	char v[32];
	if (n <= 0 || get(nr_path, v, sizeof v) < 0)
		return 0;
	long before = strtol(v, NULL, 10), at = before;
	for (long want = before + n; at < want;) {
		long to = at + (want - at < RESERVE_STEP ? want - at : RESERVE_STEP);
		snprintf(v, sizeof v, "%ld", to);
		put(nr_path, v);
		if (get(nr_path, v, sizeof v) < 0)
			break;
		long got = strtol(v, NULL, 10);
		if (got <= at)
			break; // the pool found no more
		at = got;
	}
	return at - before;
}

static void restore(void)
{
	if (orig_nr[0])
		put(nr_path, orig_nr);
}

// janitor waits for the main process to end, however it ends, then puts
// vm.nr_hugepages back.
static void janitor(void)
{
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	int pfd = syscall(SYS_pidfd_open, main_pid, 0);
	if (pfd >= 0) {
		struct pollfd p = {.fd = pfd, .events = POLLIN};
		while (poll(&p, 1, -1) < 0 && errno == EINTR)
			;
	} else {
		while (getppid() == main_pid)
			usleep(50000);
	}
	restore();
	_exit(0);
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

struct part {
	char *base;
	size_t len;
	long faults;
	double total, max; // seconds
	double *each;      // each fault's time, in order
};

// fault_part writes one byte in each 2 MiB of its part, timing each write:
// the first write is the fault that allocates the huge page.
static void *fault_part(void *arg)
{
	struct part *p = arg;
	for (size_t off = 0; off < p->len && !stop; off += HUGE) {
		double t0 = now();
		p->base[off] = 1;
		double d = now() - t0;
		p->each[p->faults] = d;
		p->total += d;
		if (d > p->max)
			p->max = d;
		p->faults++;
	}
	return NULL;
}

static int slower(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x < y) - (x > y);
}

// The 4 KiB pages fragment keeps: every other one of frag_n pages, given
// back further a round at a time (giveback), one kept in each 2 MiB;
// give_at is the next 2 MiB giveback takes a page from.
static char *frag;
static size_t frag_n, give_at;

// drop_cache writes back and drops the page cache (-f says why).
static int drop_cache(void)
{
	long cached = field("/proc/meminfo", "Cached"), before = field("/proc/meminfo", "MemFree");
	double t0 = now();
	sync(); // dirty pages are not dropped
	int ok = put("/proc/sys/vm/drop_caches", "1") == 0;
	fprintf(stderr, "thpcompact: page cache %ld MiB: %s in %.0f ms, MemFree %ld MiB now, %ld before\n",
		cached / 1024, ok ? "dropped" : "could not be dropped", (now() - t0) * 1e3,
		field("/proc/meminfo", "MemFree") / 1024, before / 1024);
	return ok ? 0 : -1;
}

// fragment leaves the host's free memory in scattered 4 KiB pages: it
// reserves all but free_mib of MemFree as hugetlb pages, faults 4 KiB pages
// until MemFree is down to keep_mib, gives every other one back, and
// reserves the 2 MiB blocks still free.
static int fragment(long *hugetlb, long *frag_pages)
{
	long memfree = field("/proc/meminfo", "MemFree"); // kB
	// Less page cache than the region could feed only some of its faults,
	// and dropping it is no quicker: drop_caches walks every inode the
	// host holds, and took 100-150 ms with 60-130 MiB of cache left, a
	// slow call of its own in a traced run. (The demo drops it before it
	// traces, -P.)
	long cached = field("/proc/meminfo", "Cached");
	if (cached > thp_mib * 1024) {
		drop_cache();
		memfree = field("/proc/meminfo", "MemFree");
	}
	long want = (memfree - free_mib * 1024) / 2048;
	// No more than the free 2 MiB blocks there are: a block the pool has
	// to compact or reclaim for would make this write stall, not the faults.
	long blocks = bigblocks();
	*hugetlb = reserve(want < blocks ? want : blocks);
	memfree = field("/proc/meminfo", "MemFree");
	size_t len = memfree > keep_mib * 1024 ? (size_t)(memfree - keep_mib * 1024) * 1024 : 0;
	len -= len % HUGE;
	if (len == 0)
		return 0;
	char *raw = mmap(NULL, len + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (raw == MAP_FAILED) {
		perror("thpcompact: mmap");
		return -1;
	}
	char *r = (char *)(((uintptr_t)raw + HUGE - 1) & ~(HUGE - 1));
	madvise(r, len, MADV_NOHUGEPAGE);
	// Not in the rounds' children: copying its page tables at each fork
	// and tearing them down at each exit took them 10-30 ms, as long as
	// their faults, and a round's life must be its faults.
	madvise(r, len + HUGE - (r - raw), MADV_DONTFORK);
	size_t n = 0;
	for (size_t off = 0; off < len && !stop; off += PAGE, n++) {
		r[off] = 1;
		// MemFree moves as the host does too: look again every 16 MiB.
		if (n % 4096 == 4095 && field("/proc/meminfo", "MemFree") <= keep_mib * 1024) {
			n++;
			break;
		}
	}
	n -= n % 512;
	for (size_t i = 0; i < n; i += 2)
		madvise(r + i * PAGE, PAGE, MADV_DONTNEED);
	frag = r;
	frag_n = n;
	*hugetlb += reserve(bigblocks());
	*frag_pages = n;
	return 0;
}

// giveback gives back pages more of the 4 KiB pages kept: one more odd
// page of each 2 MiB in turn, so that every 2 MiB stays as full as the
// others (compacting any of them migrates as much) and none is emptied
// (the last page of each stays). It returns how many it gave back.
static size_t give_lvl = 1;
static size_t giveback(size_t pages)
{
	size_t done = 0, blocks = frag_n / 512;
	while (done < pages && blocks > 0 && give_lvl < 511) {
		madvise(frag + (give_at * 512 + give_lvl) * PAGE, PAGE, MADV_DONTNEED);
		done++;
		if (++give_at == blocks) {
			give_at = 0;
			give_lvl += 2;
		}
	}
	return done;
}

int main(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "f:k:s:t:d:D:bP")) != -1) {
		switch (c) {
		case 'P': return drop_cache() < 0 ? 1 : 0;
		case 'f': free_mib = atol(optarg); break;
		case 'k': keep_mib = atol(optarg); break;
		case 's': thp_mib = atol(optarg); break;
		case 't': threads = atoi(optarg); break;
		case 'd': delay_s = atol(optarg); break;
		case 'D': dur_s = atol(optarg); break;
		case 'b': benign = 1; break;
		default:
			fprintf(stderr, "usage: thpcompact [-f FREE_MIB] [-k KEEP_MIB] [-s THP_MIB] [-t THREADS] [-d SECONDS] [-D SECONDS] [-b] | -P\n");
			return 2;
		}
	}
	if (threads < 1 || threads > 64 || thp_mib < 2)
		return 2;
	main_pid = getpid();
	double start = now();
	// The fragmenter: the victims, its children, are thpcompact.
	prctl(PR_SET_NAME, "thpfrag");
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	char enabled[128] = "?", defrag[128] = "?";
	get("/sys/kernel/mm/transparent_hugepage/enabled", enabled, sizeof enabled);
	get("/sys/kernel/mm/transparent_hugepage/defrag", defrag, sizeof defrag);
	enabled[strcspn(enabled, "\n")] = defrag[strcspn(defrag, "\n")] = 0;

	long hugetlb = 0, frag_pages = 0;
	if (!benign) {
		if (get(nr_path, orig_nr, sizeof orig_nr) < 0) {
			perror(nr_path);
			return 1;
		}
		orig_nr[strcspn(orig_nr, "\n")] = 0;
		pid_t j = fork();
		if (j < 0) {
			perror("thpcompact: fork");
			return 1;
		}
		if (j == 0)
			janitor();
		if (fragment(&hugetlb, &frag_pages) < 0) {
			restore();
			return 1;
		}
	}
	fprintf(stderr, "thpcompact: fragmented pid=%d hugetlb=%ld frag_pages=%ld memfree_kb=%ld enabled=\"%s\" defrag=\"%s\"\n",
		getpid(), hugetlb, frag_pages, field("/proc/meminfo", "MemFree"), enabled, defrag);
	while (!stop && now() < start + delay_s)
		usleep(100000);

	size_t len = (size_t)thp_mib << 20;
	len -= len % HUGE;
	// A round's figures, written by its child.
	struct round {
		long faults, huge_kb;
		double total, max, wall, stalled;
	} *res = mmap(NULL, sizeof(struct round), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (res == MAP_FAILED) {
		perror("thpcompact: mmap");
		restore();
		return 1;
	}
	long cs0 = field("/proc/vmstat", "compact_stall"), ok0 = field("/proc/vmstat", "compact_success"),
	     fail0 = field("/proc/vmstat", "compact_fail"), ta0 = field("/proc/vmstat", "thp_fault_alloc"),
	     tf0 = field("/proc/vmstat", "thp_fault_fallback"), as0 = allocstall();
	long faults = 0, huge_kb = 0, rounds = 0;
	double total = 0, stalled = 0, max = 0, wall = 0, deadline = now() + dur_s;
	pid_t victim = 0;
	if (dur_s > 0) {
		// The rounds and this process on one CPU: a round's huge pages,
		// freed as it ends, wait on the per-CPU free lists of the CPU it
		// ran on (which hold pages of THP's order since Linux 5.13), where
		// /proc/buddyinfo does not count them and the next round takes
		// them without compacting. On the same CPU, reserving them as
		// hugetlb pages takes them from that list.
		int cpu = sched_getcpu();
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		if (cpu >= 0)
			sched_setaffinity(0, sizeof one, &one);
	}
	if (dur_s > 0 && frag_n > 0) {
		// Rounds the pages allow: giveback's levels 1, 3, ... 509 of each
		// 2 MiB kept, a round's region at a time.
		long can = (long)(frag_n / 512 * 255 / (len / PAGE));
		every_ms = dur_s * 1000 / (can > 0 ? can : 1);
	}
	for (;;) {
		double began = now();
		// Each round is a process of its own that faults the region and
		// ends, as workers a job runner starts do: its life is its faults.
		memset(res, 0, sizeof *res);
		victim = fork();
		if (victim < 0) {
			perror("thpcompact: fork");
			break;
		}
		if (victim == 0) {
			prctl(PR_SET_NAME, "thpcompact");
			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			signal(SIGHUP, SIG_DFL);
			char *raw = mmap(NULL, len + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
			if (raw == MAP_FAILED)
				_exit(1);
			char *thp = (char *)(((uintptr_t)raw + HUGE - 1) & ~(HUGE - 1));
			if (madvise(thp, len, MADV_HUGEPAGE) < 0)
				perror("thpcompact: madvise(MADV_HUGEPAGE)");
			struct part parts[64];
			pthread_t tids[64];
			size_t chunks = len / HUGE, per = chunks / threads, extra = chunks % threads, at = 0;
			double *each = calloc(chunks ? chunks : 1, sizeof *each);
			if (!each)
				_exit(1);
			long st0 = field("/proc/vmstat", "compact_stall") + allocstall();
			double t0 = now();
			for (int i = 0; i < threads; i++) {
				size_t n = per + ((size_t)i < extra);
				parts[i] = (struct part){.base = thp + at * HUGE, .len = n * HUGE, .each = each + at};
				at += n;
				if (threads == 1)
					fault_part(&parts[0]);
				else
					pthread_create(&tids[i], NULL, fault_part, &parts[i]);
			}
			if (threads > 1)
				for (int i = 0; i < threads; i++)
					pthread_join(tids[i], NULL);
			res->wall = now() - t0;
			long stalls = field("/proc/vmstat", "compact_stall") + allocstall() - st0;
			size_t n = 0;
			for (int i = 0; i < threads; i++) {
				res->faults += parts[i].faults;
				res->total += parts[i].total;
				if (parts[i].max > res->max)
					res->max = parts[i].max;
				// The faults each part made, together (a stopped part made fewer).
				memmove(each + n, parts[i].each, parts[i].faults * sizeof *each);
				n += parts[i].faults;
			}
			// stall_fault_ms: the slowest faults, as many as the host
			// entered direct compaction or reclaim in the round.
			qsort(each, n, sizeof *each, slower);
			for (size_t i = 0; i < n && (long)i < stalls; i++)
				res->stalled += each[i];
			res->huge_kb = field("/proc/self/smaps_rollup", "AnonHugePages");
			_exit(0);
		}
		int st;
		while (waitpid(victim, &st, 0) < 0 && errno == EINTR)
			;
		faults += res->faults;
		total += res->total;
		stalled += res->stalled;
		wall += res->wall;
		huge_kb += res->huge_kb;
		if (res->max > max)
			max = res->max;
		rounds++;
		if (dur_s > 0)
			fprintf(stderr, "thpcompact: round %ld pid=%d at=%.2fs faults=%ld fault_ms=%.1f\n", rounds, (int)victim,
				now() - start, res->faults, res->total * 1e3);
		if (stop || benign || now() >= deadline)
			break;
		// The next round: as many scattered pages given back as the ended
		// one took, and the 2 MiB blocks free then taken again: those it
		// gave back, and those the kernel's background compaction
		// (kcompactd) made in the pause, right before the round.
		if (giveback(len / PAGE) < len / PAGE)
			break;
		while (!stop && now() < began + every_ms / 1e3)
			usleep(10000);
		if (stop)
			break;
		hugetlb += reserve(res->huge_kb / 2048);
		hugetlb += reserve(bigblocks());
	}
	long cs = field("/proc/vmstat", "compact_stall") - cs0, ok = field("/proc/vmstat", "compact_success") - ok0,
	     fail = field("/proc/vmstat", "compact_fail") - fail0, ta = field("/proc/vmstat", "thp_fault_alloc") - ta0,
	     tf = field("/proc/vmstat", "thp_fault_fallback") - tf0, as = allocstall() - as0;

	restore();
	printf("RESULT pid=%d threads=%d benign=%d rounds=%ld faults=%ld huge_pages=%ld fault_ms=%.3f stall_fault_ms=%.3f avg_fault_us=%.1f max_fault_us=%.1f "
	       "wall_ms=%.3f compact_stall=%ld compact_success=%ld compact_fail=%ld thp_fault_alloc=%ld "
	       "thp_fault_fallback=%ld allocstall=%ld hugetlb=%ld frag_pages=%ld\n",
	       (int)victim, threads, benign, rounds, faults, huge_kb / 2048, total * 1e3, stalled * 1e3, faults ? total * 1e6 / faults : 0, max * 1e6,
	       wall * 1e3, cs, ok, fail, ta, tf, as, hugetlb, frag_pages);
	fflush(stdout);
	return 0;
}
