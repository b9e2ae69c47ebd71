// Command fadvise reproduces glog's --drop_log_memory slowdown: several
// "containers" (one cgroup each) that each run a logger calling
// posix_fadvise(POSIX_FADV_DONTNEED) after every write. It runs the loggers
// for a set of writer counts and prints, per count, how fast each logger goes,
// what one fadvise costs and how the CPU splits between user and kernel.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sysray/sysray/scenarios/internal/scen"
)

type config struct {
	writers   []int
	duration  time.Duration
	dir       string
	writeSize int
	maxMB     int
	compare   bool
	cgroups   bool
	writer    string
}

func main() {
	os.Exit(run())
}

func run() int {
	var c config
	var writers string
	flag.StringVar(&writers, "writers", "4", "writer processes; a comma list runs each count in turn (e.g. 1,2,4,8)")
	flag.DurationVar(&c.duration, "d", 5*time.Second, "how long each run logs")
	flag.StringVar(&c.dir, "dir", os.TempDir(), "directory for the log files (a real disk filesystem, not tmpfs)")
	flag.IntVar(&c.writeSize, "write-size", 4096, "bytes of log lines per write")
	flag.IntVar(&c.maxMB, "max-mb", 64, "truncate each log at this size, like a rotation")
	flag.BoolVar(&c.compare, "compare", false, "also run each count without fadvise (--drop_log_memory=false)")
	flag.BoolVar(&c.cgroups, "cgroups", true, "put each writer in its own cgroup v2 leaf, like a container")
	flag.StringVar(&c.writer, "writer", "", "path of fadvise-writer (default: next to this binary)")
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		return 2
	}
	for _, f := range strings.Split(writers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 256 {
			fmt.Fprintf(os.Stderr, "bad -writers entry %q\n", f)
			return 2
		}
		c.writers = append(c.writers, n)
	}
	if c.writer == "" {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		c.writer = filepath.Join(filepath.Dir(exe), "fadvise-writer")
	}

	// Deferred calls also run while a panic unwinds.
	var cl scen.Cleanup
	defer cl.Run()
	ctx := scen.Interrupts()
	if err := setup(&c, &cl); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	fmt.Printf("dir=%s write_size=%d duration=%s cgroups=%s\n", c.dir, c.writeSize, c.duration, cgroupNote(&c))
	fmt.Printf("%-7s %7s %10s %9s %10s %10s %10s %8s %6s %6s %6s %6s %7s\n",
		"writers", "fadvise", "writes/s", "MB/s", "fadv_us", "fadv_p99", "fadv_max", "sys_us/w",
		"user%", "sys%", "runq%", "sleep%", "cg_sys%")
	var rows []row
	for _, n := range c.writers {
		modes := []bool{true}
		if c.compare {
			modes = append(modes, false)
		}
		for _, drop := range modes {
			r, err := runOnce(ctx, &c, n, drop)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			rows = append(rows, r)
			r.print()
		}
	}
	printResult(rows)
	if !cl.Run() {
		return 1
	}
	return 0
}

// setup makes the log directory and the cgroup parent, both removed at the end.
func setup(c *config, cl *scen.Cleanup) error {
	if _, err := os.Stat(c.writer); err != nil {
		return fmt.Errorf("writer binary: %w (run make -C scenarios)", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(c.dir, &st); err != nil {
		return err
	}
	if st.Type == unix.TMPFS_MAGIC {
		// tmpfs has no backing device: DONTNEED does nothing there.
		fmt.Fprintf(os.Stderr, "warning: %s is tmpfs; posix_fadvise(DONTNEED) is a no-op on it\n", c.dir)
	}
	// Named after our pid so that a later run can tell a killed run's
	// leftovers (up to -max-mb per writer) from a live run's.
	for _, d := range staleDirs(c.dir) {
		if os.RemoveAll(d) == nil {
			fmt.Fprintf(os.Stderr, "removed %s, left by a killed run\n", d)
		}
	}
	dir := filepath.Join(c.dir, fmt.Sprintf("sysray-fadvise-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	cl.Add("remove "+dir, func() error { return os.RemoveAll(dir) })
	c.dir = dir
	if !c.cgroups {
		return nil
	}
	root, err := scen.V2Root()
	if err != nil {
		return fmt.Errorf("%w (use -cgroups=false to run without)", err)
	}
	for _, d := range scen.RemoveStale(root, "sysray-fadvise-") {
		fmt.Fprintf(os.Stderr, "removed %s, left by a killed run\n", d)
	}
	return scen.MakeGroup(cl, groupParent())
}

// staleDirs lists log directories of runs whose process is gone.
func staleDirs(parent string) []string {
	ents, _ := os.ReadDir(parent)
	var stale []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "sysray-fadvise-")
		if !ok || !e.IsDir() {
			continue
		}
		if pid, err := strconv.Atoi(rest); err == nil && pid > 0 && syscall.Kill(pid, 0) == syscall.ESRCH {
			stale = append(stale, filepath.Join(parent, e.Name()))
		}
	}
	return stale
}

func cgroupNote(c *config) string {
	if !c.cgroups {
		return "off"
	}
	return filepath.Join(groupParent(), "wN")
}

// writerStats is what fadvise-writer prints in its WRITER line.
type writerStats struct {
	seconds                         float64
	writes, bytes, calls            float64
	fadvNsTotal, fadvNsMax, fadvP99 float64
	utimeUs, stimeUs, runDelayUs    float64
	cgUserUs, cgSystemUs            float64
}

type row struct {
	writers int
	drop    bool
	ws      []writerStats
}

// runOnce starts n writers, each in its own fresh cgroup, releases them at
// the same moment and collects their reports.
func runOnce(ctx context.Context, c *config, n int, drop bool) (row, error) {
	r := row{writers: n, drop: drop, ws: make([]writerStats, n)}
	var cl scen.Cleanup
	defer cl.Run()

	type result struct {
		i   int
		st  writerStats
		err error
	}
	done := make(chan result, n)
	var cmds []*exec.Cmd
	var starts []io.Closer
	pending := 0 // writers started and not yet reported
	groups := make([]string, n)
	fds := make([]int, n)
	if c.cgroups {
		for i := range groups {
			groups[i] = filepath.Join(groupParent(), fmt.Sprintf("w%d", i))
			if err := scen.MakeGroup(&cl, groups[i]); err != nil {
				return r, err
			}
			fd, err := unix.Open(groups[i], unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return r, err
			}
			defer unix.Close(fd)
			fds[i] = fd
		}
	}
	// Registered after the groups so that it runs before their removal
	// (Cleanup is LIFO): a group with a live process cannot be removed.
	cl.Add("stop writers", func() error {
		for _, cmd := range cmds {
			cmd.Process.Kill() // harmless for one already reaped
		}
		for ; pending > 0; pending-- {
			<-done
		}
		return nil
	})
	for i := 0; i < n; i++ {
		args := []string{"-w", "-f", filepath.Join(c.dir, fmt.Sprintf("w%d.log", i)),
			"-d", strconv.FormatFloat(c.duration.Seconds(), 'f', 3, 64),
			"-s", strconv.Itoa(c.writeSize), "-m", strconv.Itoa(c.maxMB)}
		if !drop {
			args = append(args, "-D")
		}
		cmd := exec.Command(c.writer, args...)
		cmd.Stderr = os.Stderr
		// Writers must not outlive us, whatever kills us.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if c.cgroups {
			// clone3(CLONE_INTO_CGROUP): the writer is born in its group,
			// so none of its work is charged elsewhere.
			cmd.SysProcAttr.UseCgroupFD = true
			cmd.SysProcAttr.CgroupFD = fds[i]
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return r, err
		}
		start, err := cmd.StdinPipe()
		if err != nil {
			return r, err
		}
		if err := cmd.Start(); err != nil {
			return r, fmt.Errorf("start %s: %w", c.writer, err)
		}
		cmds = append(cmds, cmd)
		starts = append(starts, start)
		pending++
		go func(i int) {
			b, _ := io.ReadAll(out)
			err := cmd.Wait()
			st, perr := parseWriter(string(b))
			if err == nil {
				err = perr
			}
			done <- result{i, st, err}
		}(i)
	}
	for _, s := range starts {
		s.Close() // EOF on stdin: go
	}
	for range cmds {
		select {
		case res := <-done:
			pending--
			if res.err != nil {
				return r, fmt.Errorf("writer %d: %w", res.i, res.err)
			}
			if groups[res.i] != "" {
				res.st.cgUserUs, res.st.cgSystemUs = cgroupCPU(groups[res.i])
			}
			r.ws[res.i] = res.st
		case <-ctx.Done():
			return r, errors.New("interrupted")
		}
	}
	return r, nil
}

func groupParent() string {
	root, _ := scen.V2Root()
	return filepath.Join(root, fmt.Sprintf("sysray-fadvise-%d", os.Getpid()))
}

func parseWriter(out string) (writerStats, error) {
	var st writerStats
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "WRITER" {
			continue
		}
		kv := map[string]float64{}
		for _, p := range f[1:] {
			k, v, _ := strings.Cut(p, "=")
			kv[k], _ = strconv.ParseFloat(v, 64)
		}
		st = writerStats{
			seconds: kv["seconds"], writes: kv["writes"], bytes: kv["bytes"], calls: kv["fadvise_calls"],
			fadvNsTotal: kv["fadvise_ns_total"], fadvNsMax: kv["fadvise_ns_max"], fadvP99: kv["fadvise_ns_p99"],
			utimeUs: kv["utime_us"], stimeUs: kv["stime_us"], runDelayUs: kv["run_delay_us"],
		}
		return st, nil
	}
	return st, errors.New("no WRITER line in its output")
}

// cgroupCPU reads the group's own account of user and system time, the view
// a container dashboard has.
func cgroupCPU(dir string) (user, system float64) {
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		f, _ := strconv.ParseFloat(v, 64)
		switch k {
		case "user_usec":
			user = f
		case "system_usec":
			system = f
		}
	}
	return user, system
}

// summary averages the writers of one row.
type summary struct {
	writesPerS, mbPerS, fadvUs, fadvP99Us, fadvMaxUs, userPct, sysPct, runqPct, sleepPct, cgSysPct, sysUsPerWrite float64
}

func (r row) summary() summary {
	var s summary
	var calls, ns, wall, user, sys, runq, cgUser, cgSys, writes float64
	for _, w := range r.ws {
		s.writesPerS += w.writes / w.seconds
		s.mbPerS += w.bytes / w.seconds / 1e6
		writes += w.writes
		calls += w.calls
		ns += w.fadvNsTotal
		s.fadvP99Us = max(s.fadvP99Us, w.fadvP99/1e3)
		s.fadvMaxUs = max(s.fadvMaxUs, w.fadvNsMax/1e3)
		wall += w.seconds * 1e6
		user += w.utimeUs
		sys += w.stimeUs
		runq += w.runDelayUs
		cgUser += w.cgUserUs
		cgSys += w.cgSystemUs
	}
	n := float64(len(r.ws))
	s.writesPerS /= n
	if calls > 0 {
		s.fadvUs = ns / calls / 1e3
	}
	if wall > 0 {
		// Shares of each writer's wall time: on CPU in user space, on CPU in
		// the kernel, and runnable but waiting for a CPU.
		s.userPct = 100 * user / wall
		s.sysPct = 100 * sys / wall
		s.runqPct = 100 * runq / wall
		// The rest is time blocked: writeback and I/O queues.
		s.sleepPct = max(0, 100-s.userPct-s.sysPct-s.runqPct)
	}
	if writes > 0 {
		// Kernel CPU per logged write, write() and fadvise together: what
		// each log line costs the shared kernel, queueing aside.
		s.sysUsPerWrite = sys / writes
	}
	if cgUser+cgSys > 0 {
		s.cgSysPct = 100 * cgSys / (cgUser + cgSys)
	}
	return s
}

func (r row) print() {
	s := r.summary()
	mode := "on"
	if !r.drop {
		mode = "off"
	}
	fmt.Printf("%-7d %7s %10.0f %9.1f %10.2f %10.0f %10.0f %8.2f %6.1f %6.1f %6.1f %6.1f %7.1f\n",
		r.writers, mode, s.writesPerS, s.mbPerS, s.fadvUs, s.fadvP99Us, s.fadvMaxUs, s.sysUsPerWrite,
		s.userPct, s.sysPct, s.runqPct, s.sleepPct, s.cgSysPct)
}

// printResult prints one line per run list, comma lists in -writers order.
func printResult(rows []row) {
	var ws, drop, wps, fadv, sysw, user, sys []string
	for _, r := range rows {
		s := r.summary()
		ws = append(ws, strconv.Itoa(r.writers))
		if r.drop {
			drop = append(drop, "1")
		} else {
			drop = append(drop, "0")
		}
		wps = append(wps, fmt.Sprintf("%.0f", s.writesPerS))
		fadv = append(fadv, fmt.Sprintf("%.2f", s.fadvUs))
		sysw = append(sysw, fmt.Sprintf("%.2f", s.sysUsPerWrite))
		user = append(user, fmt.Sprintf("%.1f", s.userPct))
		sys = append(sys, fmt.Sprintf("%.1f", s.sysPct))
	}
	j := func(s []string) string { return strings.Join(s, ",") }
	fmt.Printf("RESULT writers=%s fadvise=%s writes_per_s=%s fadvise_us=%s sys_us_per_write=%s user_pct=%s sys_pct=%s\n",
		j(ws), j(drop), j(wps), j(fadv), j(sysw), j(user), j(sys))
}
