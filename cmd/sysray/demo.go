package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sysray/sysray/internal/checkup"
	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/doctor/render"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/session"
)

// A demo is one bundled reproduction of a real debugging story (scenarios/),
// run under the doctor.
type demo struct {
	name, story string
	argv        []string    // relative to the scenarios' bin directory
	expect      []doctor.ID // the findings one of which must come first
	// prepare, when set, runs to its end before the doctor starts,
	// untraced: it sets the host up as the story found it (argv[0] relative
	// to the bin directory, as argv's).
	prepare []string
}

var demos = []demo{
	{name: "vsyscall-crash", story: "A container's entrypoint dies silently: its old libc reads the legacy vsyscall page, which this kernel refuses.",
		argv: []string{"vsyscall-crash"}, expect: []doctor.ID{doctor.LegacyVsyscall}},
	{name: "vsyscall", story: "An old libc calls time() through the legacy vsyscall page: each call is emulated in a page fault.",
		argv: []string{"vsyscall-bench", "-m", "vdso,vsyscall", "-d", "1"}, expect: []doctor.ID{doctor.LegacyVsyscall}},
	{name: "fadvise", story: "One, then two, then four loggers, each in its own cgroup, call posix_fadvise(DONTNEED) after every write, as glog does.",
		argv: []string{"fadvise", "-writers", "1,2,4", "-d", "1500ms"}, expect: []doctor.ID{doctor.KernelContention, doctor.KernelHotspot}},
	{name: "audit", story: "An audit rule on accept4 and an audit daemon that stopped reading: non-blocking accept4 sleeps.",
		argv: []string{"audit", "-d", "4s"}, expect: []doctor.ID{doctor.AuditBacklogStall}},
	// -F: the story (003) has no fork. With map32's fork after every 100
	// threads the forks' growth is a second, true and costlier finding
	// that comes first once they reach 50 ms (a slow phase of the VM);
	// variants failed-syscall-retry/map32-forks and
	// latency-grows-with-count/thread-stacks check that shape.
	{name: "map32", story: "Thread stacks allocated with MAP_32BIT, as old glibc did, until the low 2 GiB are full.",
		argv: []string{"map32", "-n", "1500", "-F"}, expect: []doctor.ID{doctor.FailedRetry}},
	{name: "refused", story: "A current glibc program under a container runtime's seccomp profile that predates clone3 and faccessat2 and answers EPERM: glibc cannot fall back.",
		argv: []string{"seccomp-run", "-a", "eperm", "--", "newlibc"}, expect: []doctor.ID{doctor.SyscallRefused}},
	{name: "mmaplock", story: "Two threads change one page's protection while a sibling maps 512 MiB with MAP_POPULATE: all queue on the process's mmap lock.",
		argv: []string{"mmaplock", "-w", "mprotect"}, expect: []doctor.ID{doctor.MmapLockContention}},
	{name: "fdleak", story: "A server that never closes the connections it accepts reaches its descriptor limit: accept4 fails with EMFILE in a busy loop.",
		argv: []string{"fdleak", "-k", "accept", "-l", "128", "-d", "2"}, expect: []doctor.ID{doctor.FDExhaustion}},
	{name: "memcg", story: "A container with a 32 MiB memory limit writes and reads back 128 MiB files: its reads and writes sleep in its own cgroup's reclaim.",
		// Both name the one cause, a limit under the working set: the time
		// in reclaim (cgroup-limit) and the file read back from disk each
		// pass (page-cache-thrash), whichever cost more in the run.
		argv: []string{"cgrun", "-m", "32", "--", "cgwork", "file", "-s", "128", "-d", "2"}, expect: []doctor.ID{doctor.CgroupLimit, doctor.PageCacheThrash}},
	{name: "writeback", story: "A writer on a host whose dirty-page limits are small (vm.dirty_bytes 4 MiB) writes 8 MiB at a time: each write() sleeps until writeback catches up.",
		argv: []string{"blockedio", "-mode", "dirty", "-mb", "64", "-n", "8"}, expect: []doctor.ID{doctor.BlockedIO}},
	{name: "hotcall", story: "One process calls getppid about a million times a second: the syscall's fixed cost is the program's time.",
		argv: []string{"hotcall", "-s", "getppid", "-d", "2"}, expect: []doctor.ID{doctor.HotSyscall}},
	{name: "mapcount", story: "A process maps small regions until mmap says \"Cannot allocate memory\" with gigabytes free, and retries: it holds as many mappings as vm.max_map_count allows.",
		argv: []string{"mapcount", "-d", "1"}, expect: []doctor.ID{doctor.MapCountLimit}},
	{name: "inotify", story: "A file watcher adds watches until inotify_add_watch says \"No space left on device\" on a nearly empty disk: its user holds fs.inotify.max_user_watches watches.",
		argv: []string{"inotifyfill", "-N", "-r", "50"}, expect: []doctor.ID{doctor.InotifyWatchLimit}},
	{name: "ports", story: "A client opens a connection per request and closes it first, until connect says \"Cannot assign requested address\": every port of its local range is in TIME_WAIT.",
		argv: []string{"portexhaust", "-d", "1"}, expect: []doctor.ID{doctor.PortRangeExhausted}},
	{name: "addrinuse", story: "A server restarts while the old one still listens on its port: bind says \"Address already in use\", it retries, then gives up.",
		argv: []string{"addrinuse", "-b", "100"}, expect: []doctor.ID{doctor.PortInUse}},
	{name: "memlock", story: "A program locks its buffers in memory under a 64 KiB RLIMIT_MEMLOCK, as a container's default ulimit may set it: mlock says \"Cannot allocate memory\" with gigabytes free.",
		argv: []string{"memlock", "-m", "mlock", "-d", "1"}, expect: []doctor.ID{doctor.MemlockLimit}},
	{name: "textbusy", story: "A deploy copies a new build over the binary a server is running: open says \"Text file busy\", it retries, then gives up.",
		argv: []string{"textbusy", "-b", "100"}, expect: []doctor.ID{doctor.TextBusy}},
	{name: "rofs", story: "A program writes its log into a directory mounted read-only in its own mount namespace: open says \"Read-only file system\", it retries, then gives up.",
		argv: []string{"rofs", "-b", "100"}, expect: []doctor.ID{doctor.ReadOnlyFS}},
	{name: "synloss", story: "A client connects to a server whose firewall drops each connection's first SYN: every connect waits a whole second for the kernel to send it again.",
		argv: []string{"synloss", "-n", "4"}, expect: []doctor.ID{doctor.ConnectRetransmit}},
	{name: "nagle", story: "A client writes each request's header and body in two writes on a socket without TCP_NODELAY: every reply waits for the server's delayed ACK.",
		argv: []string{"nagle", "-n", "40"}, expect: []doctor.ID{doctor.NagleDelayedAck}},
	{name: "resolver", story: "A service's name server never answers: each getaddrinfo waits out the resolver's timeout (options timeout:1 attempts:1) before it fails.",
		argv: []string{"resolver", "-n", "4"}, expect: []doctor.ID{doctor.DNSTimeout}},
	{name: "ndots", story: "A service looks its API's name up for every request under a Kubernetes-style resolv.conf (search corp.test svc.test, ndots:5): each lookup is first answered \"no such name\" at both search domains.",
		argv: []string{"resolver", "-n", "30", "-m", "search", "-S", "corp.test svc.test", "-o", "ndots:5", "-N", "api.sysray.test", "-c", "unspec"}, expect: []doctor.ID{doctor.DNSNXDomain}},
	{name: "lockconvoy", story: "Eight threads take one pthread mutex around 20 µs of work each: they run one at a time, most of their life asleep in futex waiting for the lock.",
		argv: []string{"lockconvoy", "-t", "8", "-d", "3"}, expect: []doctor.ID{doctor.LockConvoy}},
	{name: "thrash", story: "A reader maps a 96 MiB file and reads it pass after pass in a memory cgroup of 32 MiB: every pass reads the file from disk again.",
		argv: []string{"thrash", "-n", "8"}, expect: []doctor.ID{doctor.PageCacheThrash}},
	{name: "thrashread", story: "A log scanner read()s a 96 MiB file from start to end again and again in a memory cgroup of 32 MiB: no page faults, but every read waits for the disk.",
		argv: []string{"thrash", "-m", "read", "-d", "5"}, expect: []doctor.ID{doctor.PageCacheThrash}},
	{name: "cpuwait", story: "A loop that sleeps 1 ms and measures how late it wakes shares its CPU with three busier processes at nice -10: it waits milliseconds for the CPU at every wake-up.",
		argv: []string{"cpuwait", "-d", "3"}, expect: []doctor.ID{doctor.CPUWait}},
	{name: "compaction", story: "A process faults in a region it advised MADV_HUGEPAGE while the host's free memory is scattered 4 KiB pages: each fault compacts memory for a 2 MiB page first (THP defrag=madvise).",
		// -P first: a host whose memory is page cache has it written back
		// and dropped before the doctor starts. Dropped by the traced
		// command, 13 GiB of it took one write 2.5 s, a slow call that
		// came before the story.
		argv: []string{"thpcompact"}, expect: []doctor.ID{doctor.CompactionStall}, prepare: []string{"thpcompact", "-P"}},
}

func newDemo() *cobra.Command {
	var dir string
	var asJSON, withVariants bool
	cmd := &cobra.Command{
		Use:   "demo [NAME|all]",
		Short: "Run the bundled reproductions of real incidents under the doctor",
		Long: "Builds scenarios/ and runs each reproduction live under `sysray doctor`, printing its findings.\n" +
			"Names: " + demoNames() + ".\n\n" +
			"With --variants, runs the variants suite instead (scenarios/variants): the same mechanisms in other\n" +
			"shapes, each with the finding it must produce. NAME is then a variant, a detector or a glob.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			want := "all"
			if len(args) == 1 {
				want = args[0]
			}
			if withVariants {
				return runVariants(want, dir, asJSON)
			}
			var run []demo
			for _, d := range demos {
				if want == "all" || want == d.name {
					run = append(run, d)
				}
			}
			if len(run) == 0 {
				return fmt.Errorf("no demo named %q; there are: %s", want, demoNames())
			}
			bin := filepath.Join(dir, "bin")
			if err := buildScenarios(dir); err != nil {
				return err
			}
			var missed []string
			results := map[string]*doctor.Report{}
			for _, d := range run {
				if len(d.prepare) > 0 {
					prep := append([]string{filepath.Join(bin, d.prepare[0])}, d.prepare[1:]...)
					if !asJSON {
						if _, err := fmt.Printf("\n$ %s    # untraced: the host as the story found it\n", strings.Join(prep, " ")); err != nil {
							return err
						}
					}
					c := exec.Command(prep[0], prep[1:]...)
					c.Stdout, c.Stderr = os.Stderr, os.Stderr
					if err := c.Run(); err != nil {
						return fmt.Errorf("demo %s: preparing the host (%s): %w", d.name, strings.Join(prep, " "), err)
					}
				}
				argv := append([]string{filepath.Join(bin, d.argv[0])}, d.argv[1:]...)
				if !asJSON {
					// Stop at once if no one can read what the demos say.
					if _, err := fmt.Printf("\n==== demo %s: %s\n$ sysray doctor -- %s\n\n", d.name, d.story, strings.Join(argv, " ")); err != nil {
						return err
					}
				}
				sel := session.Selection{Stacks: true, Slow: time.Duration(event.DefaultSlow)}
				// The reports own stdout; the scenarios' own output goes to stderr.
				rep, _, err := checkup.Live(&sel, argv, os.Stderr)
				if err != nil {
					return fmt.Errorf("demo %s: %w", d.name, err)
				}
				results[d.name] = rep
				if !asJSON {
					if err := render.Text(os.Stdout, rep, false); err != nil {
						return err
					}
				}
				if len(rep.Findings) == 0 || !slices.Contains(d.expect, rep.Findings[0].ID) {
					missed = append(missed, d.name)
				}
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(results); err != nil {
					return err
				}
			}
			if len(missed) > 0 {
				return fmt.Errorf("the expected finding did not come first in: %s", strings.Join(missed, ", "))
			}
			if !asJSON {
				_, err := fmt.Printf("\nsysray demo: every story found (%d of %d).\n", len(run), len(run))
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "scenarios", "scenarios", "directory of the bundled scenarios (built with make)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the reports as one JSON document, by demo name")
	cmd.Flags().BoolVar(&withVariants, "variants", false, "run the variants suite (docs/doctor.md) instead of the demos")
	return cmd
}

func demoNames() string {
	var n []string
	for _, d := range demos {
		n = append(n, d.name)
	}
	return strings.Join(n, ", ")
}

func buildScenarios(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "Makefile")); err != nil {
		return fmt.Errorf("no scenarios in %s (run sysray demo from a sysray checkout, or pass --scenarios DIR)", dir)
	}
	mk := exec.Command("make", "-s", "-C", dir)
	mk.Stdout, mk.Stderr = os.Stderr, os.Stderr
	if err := mk.Run(); err != nil {
		return fmt.Errorf("building the scenarios: %w", err)
	}
	return nil
}
