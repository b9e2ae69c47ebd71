// Command audit reproduces the audit backlog stall: with an audit rule on
// accept4 and an audit daemon that does not keep up, the kernel's audit queue
// fills past backlog_limit and every audited syscall sleeps at exit, in
// audit_log_start, for up to backlog_wait_time. A non-blocking accept4 then
// takes hundreds of milliseconds.
//
// It drives NETLINK_AUDIT directly (no auditd, no auditctl), registers
// itself as the audit daemon and then reads the records slowly or not at
// all, while audit-acceptor times its accept4 calls. Everything it changes is
// put back on exit, on SIGINT/SIGTERM/SIGHUP and on panic; "audit restore"
// repairs what a killed run left behind.
package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sysray/sysray/scenarios/internal/scen"
)

// stateFile records what a run changed, for "audit restore" after a crash.
const stateFile = "/run/sysray-scenario-audit.json"

type savedState struct {
	Pid    int      `json:"pid"`
	Status status   `json:"status"`
	Rules  int      `json:"rules"`
	Added  [][]byte `json:"added"`
}

func main() {
	cmd := "run"
	args := os.Args[1:]
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "run":
		err = runCmd(args)
	case "status":
		err = statusCmd(args)
	case "restore":
		err = restoreCmd(args)
	case "reader":
		err = readerCmd(args)
	case "sick":
		err = sickCmd(args)
	case "fill":
		err = fillCmd(args)
	default:
		fmt.Fprintf(os.Stderr, "usage: audit [run|sick|status|restore] [flags]\n")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "audit %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

type runConfig struct {
	mode         string
	duration     time.Duration
	backlogLimit uint
	waitTime     time.Duration
	hz           int
	scope        string
	interval     time.Duration
	rcvbuf       int
	quota        time.Duration
	period       time.Duration
	work         time.Duration
	acceptor     string
	panicTest    bool
}

func runCmd(args []string) (err error) {
	var c runConfig
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	fs.StringVar(&c.mode, "mode", "stall", "how the registered daemon consumes records: stall (never reads), throttle (reads from a CPU-limited cgroup), drain (keeps up)")
	fs.DurationVar(&c.duration, "d", 8*time.Second, "how long the server accepts connections")
	fs.UintVar(&c.backlogLimit, "backlog-limit", 16, "audit backlog_limit while the scenario runs")
	fs.DurationVar(&c.waitTime, "wait", time.Second, "audit backlog_wait_time: the longest one record may sleep on a full backlog (kernel default 60s)")
	fs.IntVar(&c.hz, "hz", 0, "kernel HZ, to convert -wait to jiffies (default: from the kernel config)")
	fs.StringVar(&c.scope, "scope", "pid", "pid: audit only the server's accept4; all: every process's accept4, as in the story (stalls other servers on this host too)")
	fs.DurationVar(&c.interval, "interval", 10*time.Millisecond, "client connects every interval")
	fs.IntVar(&c.rcvbuf, "rcvbuf", 0, "SO_RCVBUF of the daemon socket in bytes (0: kernel default)")
	fs.DurationVar(&c.quota, "quota", 50*time.Millisecond, "throttle: CPU quota of the reader per period")
	fs.DurationVar(&c.period, "period", 100*time.Millisecond, "throttle: CPU quota period")
	fs.DurationVar(&c.work, "work", time.Millisecond, "throttle: CPU the reader burns per record, like an agent analysing it")
	fs.StringVar(&c.acceptor, "acceptor", "", "path of audit-acceptor (default: next to this binary)")
	fs.BoolVar(&c.panicTest, "panic-test", false, "panic once audit is set up, to check that the restore still runs")
	fs.Parse(args)
	if fs.NArg() != 0 || (c.mode != "stall" && c.mode != "throttle" && c.mode != "drain") ||
		(c.scope != "pid" && c.scope != "all") {
		fs.Usage()
		os.Exit(2)
	}
	if c.acceptor == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		c.acceptor = filepath.Join(filepath.Dir(exe), "audit-acceptor")
	}
	if c.hz == 0 {
		if c.hz, err = kernelHZ(); err != nil {
			return fmt.Errorf("%w; pass -hz", err)
		}
	}

	// Deferred calls also run while a panic unwinds, so this restores on
	// panics too (-panic-test).
	var cl scen.Cleanup
	defer func() {
		if !cl.Run() {
			err = errors.Join(err, fmt.Errorf("restore incomplete: run %q", os.Args[0]+" restore"))
		}
	}()
	ctx := scen.Interrupts()
	return run(ctx.Done(), &c, &cl)
}

func run(stop <-chan struct{}, c *runConfig, cl *scen.Cleanup) error {
	if _, err := os.Stat(c.acceptor); err != nil {
		return fmt.Errorf("acceptor binary: %w (run make -C scenarios)", err)
	}
	ctl, err := dial()
	if err != nil {
		return err
	}
	cl.Add("close control socket", func() error { ctl.close(); return nil })
	saved, err := ctl.getStatus()
	if err != nil {
		return fmt.Errorf("AUDIT_GET: %w", err)
	}
	rules, err := ctl.listRules()
	if err != nil {
		return fmt.Errorf("AUDIT_LIST_RULES: %w", err)
	}
	fmt.Printf("audit before: %s rules=%d\n", fmtStatus(saved), len(rules))
	if saved.Enabled == 2 {
		return errors.New("audit configuration is locked (enabled=2) until reboot")
	}
	if saved.Pid != 0 {
		return fmt.Errorf("an audit daemon (pid %d) is registered; not taking its place", saved.Pid)
	}

	// Registered before the restore step so that it runs after it
	// (Cleanup is LIFO): the acceptor may be asleep in a stalled accept4,
	// which only restoring ends early.
	acc := &acceptor{}
	cl.Add("stop acceptor", func() error { acc.stop(); return nil })

	// From here on the machine is being changed.
	st := savedState{Pid: os.Getpid(), Status: saved, Rules: len(rules)}
	if err := writeState(st); err != nil {
		return err
	}
	daemon, err := dial()
	if err != nil {
		return err
	}
	var added [][]byte
	var counts map[uint16]int
	cl.Add("restore audit", func() error {
		err := restore(saved, added, ctl, daemon)
		daemon.close()
		if err == nil {
			os.Remove(stateFile)
		}
		return err
	})

	if c.rcvbuf > 0 {
		// SO_RCVBUFFORCE: root may go below the usual minimum.
		if err := unix.SetsockoptInt(daemon.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, c.rcvbuf); err != nil {
			return fmt.Errorf("SO_RCVBUFFORCE: %w", err)
		}
	}
	wait := uint32((c.waitTime.Nanoseconds()*int64(c.hz) + 999999999) / 1e9)
	set := status{
		Mask: unix.AUDIT_STATUS_ENABLED | unix.AUDIT_STATUS_FAILURE |
			unix.AUDIT_STATUS_BACKLOG_LIMIT | unix.AUDIT_STATUS_BACKLOG_WAIT_TIME,
		Enabled: 1,
		// printk on loss; AUDIT_FAIL_PANIC would take the machine down.
		Failure:         unix.AUDIT_FAIL_PRINTK,
		BacklogLimit:    uint32(c.backlogLimit),
		BacklogWaitTime: wait,
	}
	if err := ctl.setStatus(set); err != nil {
		return fmt.Errorf("AUDIT_SET enable: %w", err)
	}

	// Only now start the server: a process forked before audit was ever
	// enabled gets no audit context and is never audited. With -scope pid
	// the rule names its pid, so it comes next.
	accPid, port, err := acc.start(c)
	if err != nil {
		return err
	}
	rulePid := accPid
	if c.scope == "all" {
		rulePid = 0
	}
	rule := accept4Rule(rulePid)
	added = [][]byte{rule}
	st.Added = added
	if err := writeState(st); err != nil {
		return err
	}
	if err := ctl.do(unix.AUDIT_ADD_RULE, rule); err != nil {
		return fmt.Errorf("AUDIT_ADD_RULE: %w", err)
	}
	// The kernel takes the sending socket as the daemon's: records are
	// queued for it, and the queue only drains as fast as it reads.
	if err := daemon.setStatus(status{Mask: unix.AUDIT_STATUS_PID, Pid: uint32(os.Getpid())}); err != nil {
		return fmt.Errorf("AUDIT_SET pid: %w", err)
	}
	scopeNote := fmt.Sprintf("pid=%d", accPid)
	if rulePid == 0 {
		scopeNote = "all processes"
	}
	fmt.Printf("audit set: enabled=1 failure=1 backlog_limit=%d backlog_wait_time=%d (%s at HZ=%d) daemon pid=%d mode=%s\n",
		c.backlogLimit, wait, c.waitTime, c.hz, os.Getpid(), c.mode)
	fmt.Printf("rule: -a always,exit -F arch=b64 -S accept4 (%s); server 127.0.0.1:%d\n", scopeNote, port)

	switch c.mode {
	case "drain":
		stopDrain := drain(daemon)
		cl.Add("stop reading", func() error { counts = stopDrain(); return nil })
	case "throttle":
		if err := startReader(c, cl, daemon); err != nil {
			return err
		}
	}

	before, err := ctl.getStatus()
	if err != nil {
		return err
	}
	if c.panicTest {
		panic("-panic-test")
	}
	stats, err := acc.serve(stop)
	if err != nil {
		return err
	}
	after, err := ctl.getStatus()
	if err != nil {
		return err
	}
	lost := after.Lost - before.Lost
	waited := (after.BacklogWaitTimeActual - before.BacklogWaitTimeActual) * 1000 / uint32(c.hz)
	fmt.Printf("audit during: pid=%d backlog=%d lost=+%d backlog_wait_time_actual=+%d ms\n", after.Pid, after.Backlog, lost, waited)

	if !cl.Run() {
		return errors.New("restore failed")
	}
	if counts != nil {
		fmt.Printf("daemon read:%s\n", fmtCounts(counts))
	}
	now, err := restoredStatus()
	if err != nil {
		return err
	}
	restored := "yes"
	if !sameConfig(now.status, saved) || now.rules != len(rules) {
		restored = "no"
	}
	fmt.Printf("audit after: %s rules=%d restored=%s\n", fmtStatus(now.status), now.rules, restored)
	fmt.Printf("RESULT mode=%s backlog_limit=%d wait_ms=%d %s lost=%d waited_ms=%d restored=%s\n",
		c.mode, c.backlogLimit, c.waitTime.Milliseconds(), stats, lost, waited, restored)
	if restored != "yes" {
		return errors.New("audit state differs from before the run")
	}
	return nil
}

// acceptor runs audit-acceptor, held at its start line until the rule and
// the daemon are in place.
type acceptor struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan error
	goW   io.Closer
	wait  func() error
}

func (a *acceptor) start(c *runConfig) (pid, port int, err error) {
	a.cmd = exec.Command(c.acceptor, "-w", "-d", strconv.FormatFloat(c.duration.Seconds(), 'f', 3, 64),
		"-i", strconv.FormatFloat(float64(c.interval)/1e6, 'f', 3, 64))
	a.cmd.Stderr = os.Stderr
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := a.cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	if a.goW, err = a.cmd.StdinPipe(); err != nil {
		return 0, 0, err
	}
	if err := a.cmd.Start(); err != nil {
		return 0, 0, err
	}
	a.lines = make(chan string, 64)
	a.done = make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			a.lines <- sc.Text()
		}
		close(a.lines)
		a.done <- a.cmd.Wait()
	}()
	a.wait = sync.OnceValue(func() error {
		for range a.lines {
		}
		return <-a.done
	})
	ready, ok := <-a.lines
	if !ok || !strings.HasPrefix(ready, "READY ") {
		return 0, 0, fmt.Errorf("acceptor did not start (%q)", ready)
	}
	_, err = fmt.Sscanf(ready, "READY %d %d", &pid, &port)
	return pid, port, err
}

// serve releases the acceptor, echoes its report and returns its STATS.
func (a *acceptor) serve(stop <-chan struct{}) (string, error) {
	a.goW.Close()
	var stats string
	for {
		select {
		case line, ok := <-a.lines:
			if !ok {
				if err := a.wait(); err != nil {
					return "", fmt.Errorf("acceptor: %w", err)
				}
				if stats == "" {
					return "", errors.New("acceptor printed no STATS line")
				}
				return stats, nil
			}
			fmt.Println(line)
			if s, ok := strings.CutPrefix(line, "STATS "); ok {
				stats = s
			}
		case <-stop:
			return "", errors.New("interrupted")
		}
	}
}

func (a *acceptor) stop() {
	if a.cmd == nil || a.cmd.Process == nil {
		return
	}
	a.cmd.Process.Kill()
	a.wait()
}

func fmtCounts(counts map[uint16]int) string {
	names := map[uint16]string{
		unix.AUDIT_SYSCALL: "SYSCALL", unix.AUDIT_PROCTITLE: "PROCTITLE", unix.AUDIT_SOCKADDR: "SOCKADDR",
		unix.AUDIT_EOE: "EOE", unix.AUDIT_CONFIG_CHANGE: "CONFIG_CHANGE", unix.AUDIT_REPLACE: "REPLACE",
	}
	var keys []int
	for k := range counts {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	var b strings.Builder
	for _, k := range keys {
		name, ok := names[uint16(k)]
		if !ok {
			name = strconv.Itoa(k)
		}
		fmt.Fprintf(&b, " %s=%d", name, counts[uint16(k)])
	}
	return b.String()
}

// drain reads everything the kernel sends the daemon socket until the
// returned function is called; that returns how many records of each type
// it read.
func drain(d *conn) (stop func() map[uint16]int) {
	d.setTimeout(50 * time.Millisecond)
	counts := map[uint16]int{}
	var wg sync.WaitGroup
	quit := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-quit:
				return
			default:
			}
			ms, _ := d.recv()
			for _, m := range ms {
				counts[m.typ]++
			}
		}
	}()
	var once sync.Once
	return func() map[uint16]int {
		once.Do(func() { close(quit); wg.Wait() })
		return counts
	}
}

// restore puts audit back as saved. The daemon socket is drained meanwhile:
// kauditd may be blocked sending to it, and unregistering makes the kernel
// send it an AUDIT_REPLACE probe that would block us too.
func restore(saved status, added [][]byte, ctl, daemon *conn) error {
	var errs []error
	if daemon != nil {
		stop := drain(daemon)
		defer stop()
	}
	for _, r := range added {
		if err := ctl.do(unix.AUDIT_DEL_RULE, r); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("AUDIT_DEL_RULE: %w", err))
		}
	}
	cur, err := ctl.getStatus()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if cur.Pid != 0 && cur.Pid != saved.Pid {
		if err := ctl.setStatus(status{Mask: unix.AUDIT_STATUS_PID, Pid: 0}); err != nil {
			errs = append(errs, fmt.Errorf("unregister daemon pid %d: %w", cur.Pid, err))
		}
	}
	set := saved
	set.Mask = unix.AUDIT_STATUS_ENABLED | unix.AUDIT_STATUS_FAILURE | unix.AUDIT_STATUS_RATE_LIMIT |
		unix.AUDIT_STATUS_BACKLOG_LIMIT | unix.AUDIT_STATUS_BACKLOG_WAIT_TIME
	if err := ctl.setStatus(set); err != nil {
		errs = append(errs, fmt.Errorf("AUDIT_SET: %w", err))
	}
	return errors.Join(errs...)
}

type current struct {
	status status
	rules  int
}

// restoredStatus looks again on a fresh socket, as an outsider would.
func restoredStatus() (current, error) {
	c, err := dial()
	if err != nil {
		return current{}, err
	}
	defer c.close()
	s, err := c.getStatus()
	if err != nil {
		return current{}, err
	}
	r, err := c.listRules()
	return current{s, len(r)}, err
}

// sameConfig compares what a run sets; lost and backlog are counters.
func sameConfig(a, b status) bool {
	return a.Enabled == b.Enabled && a.Failure == b.Failure && a.Pid == b.Pid &&
		a.RateLimit == b.RateLimit && a.BacklogLimit == b.BacklogLimit &&
		a.BacklogWaitTime == b.BacklogWaitTime
}

func fmtStatus(s status) string {
	return fmt.Sprintf("enabled=%d failure=%d pid=%d rate_limit=%d backlog_limit=%d backlog_wait_time=%d lost=%d backlog=%d",
		s.Enabled, s.Failure, s.Pid, s.RateLimit, s.BacklogLimit, s.BacklogWaitTime, s.Lost, s.Backlog)
}

func writeState(st savedState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return os.WriteFile(stateFile, b, 0o600)
}

// statusCmd prints the audit status and rule count.
func statusCmd(args []string) error {
	if len(args) != 0 {
		return errors.New("status takes no arguments")
	}
	cur, err := restoredStatus()
	if err != nil {
		return err
	}
	s := cur.status
	fmt.Printf("enabled=%d failure=%d pid=%d rate_limit=%d backlog_limit=%d backlog_wait_time=%d backlog_wait_time_actual=%d lost=%d backlog=%d rules=%d\n",
		s.Enabled, s.Failure, s.Pid, s.RateLimit, s.BacklogLimit, s.BacklogWaitTime, s.BacklogWaitTimeActual, s.Lost, s.Backlog, cur.rules)
	if _, err := os.Stat(stateFile); err == nil {
		fmt.Printf("note: %s exists: a run did not finish restoring; run \"audit restore\"\n", stateFile)
	}
	fmt.Printf("RESULT enabled=%d pid=%d backlog=%d backlog_limit=%d backlog_wait_time=%d lost=%d rules=%d\n",
		s.Enabled, s.Pid, s.Backlog, s.BacklogLimit, s.BacklogWaitTime, s.Lost, cur.rules)
	return nil
}

// restoreCmd repairs a machine a run left changed: the saved state if the
// run got far enough to write it, else audit disabled with no rules.
func restoreCmd(args []string) error {
	if len(args) != 0 {
		return errors.New("restore takes no arguments")
	}
	ctl, err := dial()
	if err != nil {
		return err
	}
	defer ctl.close()
	var st savedState
	b, err := os.ReadFile(stateFile)
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: %w", stateFile, err)
		}
		// No record: disabled, no rules, kernel defaults.
		st.Status = status{Enabled: 0, Failure: unix.AUDIT_FAIL_PRINTK, BacklogLimit: 64}
		hz, herr := kernelHZ()
		if herr != nil {
			return fmt.Errorf("%w: cannot tell the default backlog_wait_time", herr)
		}
		st.Status.BacklogWaitTime = uint32(60 * hz)
		if st.Added, err = ctl.listRules(); err != nil {
			return err
		}
		fmt.Printf("no %s: resetting to disabled, no rules, defaults\n", stateFile)
	} else {
		fmt.Printf("restoring what run pid %d saved\n", st.Pid)
		if st.Pid != 0 && syscall.Kill(st.Pid, 0) == nil {
			return fmt.Errorf("run pid %d is still alive; stop it first (it restores on SIGTERM)", st.Pid)
		}
	}
	cur, err := ctl.getStatus()
	if err != nil {
		return err
	}
	if cur.Pid != 0 && syscall.Kill(int(cur.Pid), 0) == nil && int(cur.Pid) != st.Pid {
		fmt.Printf("warning: audit daemon pid %d is alive; only it can unregister itself\n", cur.Pid)
	}
	if err := restore(st.Status, st.Added, ctl, nil); err != nil {
		return err
	}
	os.Remove(stateFile)
	// A killed throttle run also leaves its CPU cgroup.
	for _, ver := range []int{2, 1} {
		root, err := scen.V2Root()
		if ver == 1 {
			root, err = scen.V1Root("cpu")
		}
		if err == nil {
			for _, d := range scen.RemoveStale(root, "sysray-audit-") {
				fmt.Printf("removed %s\n", d)
			}
		}
	}
	return statusCmd(nil)
}

// startReader runs "audit reader" on the daemon socket inside a cgroup
// whose CPU quota is too small for the work it does per record: the
// CPU-throttled security agent of the story.
func startReader(c *runConfig, cl *scen.Cleanup, daemon *conn) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	fd, err := unix.Dup(daemon.fd)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "audit-daemon-socket")
	defer f.Close()
	cmd := exec.Command(exe, "reader", "-work", c.work.String())
	cmd.ExtraFiles = []*os.File{f} // fd 3
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	goPipe, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	group, join, err := cpuGroup(c, cl)
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	// After the cgroup's removal step, so it runs before it.
	cl.Add("stop reader", func() error {
		cmd.Process.Kill()
		cmd.Wait()
		return nil
	})
	if err := join(cmd.Process.Pid); err != nil {
		return err
	}
	goPipe.Close()
	fmt.Printf("reader pid=%d in %s: quota %s per %s, %s of CPU per record\n",
		cmd.Process.Pid, group, c.quota, c.period, c.work)
	return nil
}

// cpuGroup makes a cgroup with a CPU quota: cpu.max on a v2 hierarchy that
// has the cpu controller, else cpu.cfs_quota_us on v1 (hybrid hosts bind
// cpu to v1).
func cpuGroup(c *runConfig, cl *scen.Cleanup) (string, func(pid int) error, error) {
	name := fmt.Sprintf("sysray-audit-%d", os.Getpid())
	quotaUs, periodUs := c.quota.Microseconds(), c.period.Microseconds()
	if root, err := scen.V2Root(); err == nil && hasString(scen.V2Controllers(root), "cpu") {
		sub, _ := os.ReadFile(filepath.Join(root, "cgroup.subtree_control"))
		if hasString(strings.Fields(string(sub)), "cpu") {
			dir := filepath.Join(root, name)
			if err := scen.MakeGroup(cl, dir); err != nil {
				return "", nil, err
			}
			if err := scen.WriteFile(filepath.Join(dir, "cpu.max"), fmt.Sprintf("%d %d", quotaUs, periodUs)); err != nil {
				return "", nil, err
			}
			return dir, func(pid int) error {
				return scen.WriteFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid))
			}, nil
		}
	}
	root, err := scen.V1Root("cpu")
	if err != nil {
		return "", nil, fmt.Errorf("no cgroup with the cpu controller for -mode throttle: %w", err)
	}
	dir := filepath.Join(root, name)
	if err := scen.MakeGroup(cl, dir); err != nil {
		return "", nil, err
	}
	if err := scen.WriteFile(filepath.Join(dir, "cpu.cfs_period_us"), strconv.FormatInt(periodUs, 10)); err != nil {
		return "", nil, err
	}
	if err := scen.WriteFile(filepath.Join(dir, "cpu.cfs_quota_us"), strconv.FormatInt(quotaUs, 10)); err != nil {
		return "", nil, err
	}
	return dir, func(pid int) error {
		return scen.WriteFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid))
	}, nil
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// readerCmd is the throttled agent: read a record from fd 3, burn CPU on
// it, repeat. It starts when stdin closes, once it is in its cgroup.
func readerCmd(args []string) error {
	fs := flag.NewFlagSet("reader", flag.ExitOnError)
	work := fs.Duration("work", time.Millisecond, "CPU per record")
	fs.Parse(args)
	io.Copy(io.Discard, os.Stdin)
	// Count the work in loop turns measured against this thread's CPU
	// clock, not in wall time: a throttled agent is slow because it is
	// kept off the CPU, and the loop must not make syscalls of its own.
	runtime.LockOSThread()
	turns := uint64(1 << 20)
	t0 := threadCPU()
	spin(turns)
	perTurn := float64(threadCPU()-t0) / float64(turns)
	n := uint64(float64(work.Nanoseconds()) / max(perTurn, 0.01))
	c := &conn{fd: 3}
	for {
		ms, err := c.recv()
		if err != nil {
			// ENOBUFS: the kernel dropped records for us; carry on
			// like auditd does.
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENOBUFS) {
				continue
			}
			return err
		}
		for range ms {
			spin(n)
		}
	}
}

var spinSink uint64

// spin does n turns of work the compiler cannot drop.
func spin(n uint64) {
	x := spinSink | 1
	for i := uint64(0); i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	spinSink = x
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// kernelHZ reads CONFIG_HZ: audit's backlog_wait_time is in jiffies.
func kernelHZ() (int, error) {
	var uts unix.Utsname
	unix.Uname(&uts)
	paths := []string{"/proc/config.gz", "/boot/config-" + unix.ByteSliceToString(uts.Release[:])}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		var r io.Reader = f
		if strings.HasSuffix(p, ".gz") {
			zr, err := gzip.NewReader(f)
			if err != nil {
				f.Close()
				continue
			}
			r = zr
		}
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "CONFIG_HZ="); ok {
				f.Close()
				return strconv.Atoi(v)
			}
		}
		f.Close()
	}
	return 0, errors.New("kernel config not found in /proc/config.gz or /boot")
}
