package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sysray/sysray/scenarios/internal/scen"
)

// sickCmd makes the host's audit backlog full and keeps it full for -d: the
// host someone starts sysray on to find out why it is slow. An audit rule
// names one syscall (openat by default), a registered audit daemon never
// reads, and filler processes keep making audited calls, so the backlog
// stays at its limit and every audited call on the host sleeps in
// audit_log_start. It prints a SICK line once the backlog is full, holds
// for -d, then restores like run.
func sickCmd(args []string) (err error) {
	fs := flag.NewFlagSet("sick", flag.ExitOnError)
	rule := fs.String("rule", "openat", "the syscall the audit rule names (openat, accept4, connect, execve, ppoll)")
	d := fs.Duration("d", 10*time.Second, "how long the host stays sick once the backlog is full (at most 60s)")
	limit := fs.Uint("backlog-limit", 8, "audit backlog_limit while sick")
	wait := fs.Duration("wait", time.Second, "audit backlog_wait_time: the longest one record may sleep (kernel default 60s)")
	hz := fs.Int("hz", 0, "kernel HZ (default: from the kernel config)")
	scope := fs.String("scope", "fillers", "fillers: the rule covers only the fillers (-F ppid=this process) and the -exe programs; all: every process on the host, as in the story")
	var exes []string
	fs.Func("exe", "also audit every process running this program (-F exe=PATH); repeatable", func(s string) error {
		exes = append(exes, s)
		return nil
	})
	fillers := fs.Int("fillers", 1, "processes that keep making audited calls, so the backlog stays full")
	every := fs.Duration("fill-every", 100*time.Millisecond, "each filler makes one audited call this often (a busy host: less)")
	rcvbuf := fs.Int("rcvbuf", 4096, "SO_RCVBUF of the daemon socket in bytes: small, so it fills at once")
	fs.Parse(args)
	nr, ok := syscallNumbers[*rule]
	if fs.NArg() != 0 || !ok || (*scope != "fillers" && *scope != "all") || *fillers < 1 || *d > time.Minute {
		fs.Usage()
		os.Exit(2)
	}
	for _, e := range exes {
		if _, err := os.Stat(e); err != nil {
			return fmt.Errorf("-exe: %w", err)
		}
	}
	if *hz == 0 {
		if *hz, err = kernelHZ(); err != nil {
			return fmt.Errorf("%w; pass -hz", err)
		}
	}
	var cl scen.Cleanup
	defer func() {
		if !cl.Run() {
			err = errors.Join(err, fmt.Errorf("restore incomplete: run %q", os.Args[0]+" restore"))
		}
	}()
	ctx := scen.Interrupts()
	return sick(ctx.Done(), &cl, sickConfig{rule: *rule, nr: nr, d: *d, limit: uint32(*limit), wait: *wait, hz: *hz,
		all: *scope == "all", exes: exes, fillers: *fillers, every: *every, rcvbuf: *rcvbuf})
}

// The syscalls a rule may name here (x86_64).
var syscallNumbers = map[string]int{"openat": unix.SYS_OPENAT, "accept4": unix.SYS_ACCEPT4,
	"connect": unix.SYS_CONNECT, "execve": unix.SYS_EXECVE, "ppoll": unix.SYS_PPOLL}

type sickConfig struct {
	rule    string
	nr      int
	d       time.Duration
	limit   uint32
	wait    time.Duration
	hz      int
	all     bool
	exes    []string
	fillers int
	every   time.Duration
	rcvbuf  int
}

func sick(stop <-chan struct{}, cl *scen.Cleanup, c sickConfig) error {
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
	// Stopped after the restore (Cleanup is LIFO): a filler asleep in
	// audit_log_start only dies once it wakes, and restoring wakes it.
	var procs []*exec.Cmd
	cl.Add("stop fillers", func() error {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
		return nil
	})

	st := savedState{Pid: os.Getpid(), Status: saved, Rules: len(rules)}
	if err := writeState(st); err != nil {
		return err
	}
	daemon, err := dial()
	if err != nil {
		return err
	}
	var added [][]byte
	cl.Add("restore audit", func() error {
		err := restore(saved, added, ctl, daemon)
		daemon.close()
		if err == nil {
			os.Remove(stateFile)
		}
		return err
	})
	if c.rcvbuf > 0 {
		if err := unix.SetsockoptInt(daemon.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, c.rcvbuf); err != nil {
			return fmt.Errorf("SO_RCVBUFFORCE: %w", err)
		}
	}
	wait := uint32((c.wait.Nanoseconds()*int64(c.hz) + 999999999) / 1e9)
	set := status{
		Mask: unix.AUDIT_STATUS_ENABLED | unix.AUDIT_STATUS_FAILURE |
			unix.AUDIT_STATUS_BACKLOG_LIMIT | unix.AUDIT_STATUS_BACKLOG_WAIT_TIME,
		Enabled:         1,
		Failure:         unix.AUDIT_FAIL_PRINTK,
		BacklogLimit:    c.limit,
		BacklogWaitTime: wait,
	}
	if err := ctl.setStatus(set); err != nil {
		return fmt.Errorf("AUDIT_SET enable: %w", err)
	}

	// The rules: the fillers (children of this process, forked after audit
	// was enabled so that they have an audit context), the -exe programs,
	// or everyone.
	var want [][]byte
	var names []string
	if c.all {
		want = append(want, syscallRule(c.nr))
		names = append(names, fmt.Sprintf("-a always,exit -F arch=b64 -S %s", c.rule))
	} else {
		want = append(want, syscallRule(c.nr, ruleField{field: unix.AUDIT_PPID, value: uint32(os.Getpid())}))
		names = append(names, fmt.Sprintf("-a always,exit -F arch=b64 -S %s -F ppid=%d", c.rule, os.Getpid()))
		for _, e := range c.exes {
			want = append(want, syscallRule(c.nr, ruleField{field: unix.AUDIT_EXE, str: e}))
			names = append(names, fmt.Sprintf("-a always,exit -F arch=b64 -S %s -F exe=%s", c.rule, e))
		}
	}
	for i, r := range want {
		added = append(added, r)
		st.Added = added
		if err := writeState(st); err != nil {
			return err
		}
		if err := ctl.do(unix.AUDIT_ADD_RULE, r); err != nil {
			added = added[:len(added)-1]
			return fmt.Errorf("AUDIT_ADD_RULE %s: %w", names[i], err)
		}
	}
	if err := daemon.setStatus(status{Mask: unix.AUDIT_STATUS_PID, Pid: uint32(os.Getpid())}); err != nil {
		return fmt.Errorf("AUDIT_SET pid: %w", err)
	}
	fmt.Printf("audit set: enabled=1 failure=1 backlog_limit=%d backlog_wait_time=%d (%s at HZ=%d) daemon pid=%d (never reads)\n",
		c.limit, wait, c.wait, c.hz, os.Getpid())
	for _, n := range names {
		fmt.Printf("rule: %s\n", n)
	}

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	for range c.fillers {
		p := exec.Command(exe, "fill", "-rule", c.rule, "-every", c.every.String())
		p.Stderr = os.Stderr
		p.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := p.Start(); err != nil {
			return err
		}
		procs = append(procs, p)
	}

	// Sick once the backlog is at its limit.
	deadline := time.Now().Add(10 * time.Second)
	var now status
	for {
		if now, err = ctl.getStatus(); err != nil {
			return err
		}
		if now.Backlog >= c.limit {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the backlog did not fill in 10s (backlog=%d of %d)", now.Backlog, c.limit)
		}
		select {
		case <-stop:
			return errors.New("interrupted")
		case <-time.After(20 * time.Millisecond):
		}
	}
	var pids []string
	for _, p := range procs {
		pids = append(pids, fmt.Sprint(p.Process.Pid))
	}
	fmt.Printf("SICK backlog=%d backlog_limit=%d lost=%d backlog_wait_time=%d daemon=%d fillers=%s for=%s\n",
		now.Backlog, now.BacklogLimit, now.Lost, now.BacklogWaitTime, now.Pid, strings.Join(pids, ","), c.d)
	os.Stdout.Sync()
	start := now
	select {
	case <-stop:
		fmt.Println("interrupted: restoring")
	case <-time.After(c.d):
	}
	end, err := ctl.getStatus()
	if err != nil {
		return err
	}
	lost := end.Lost - start.Lost
	waited := uint64(end.BacklogWaitTimeActual-start.BacklogWaitTimeActual) * 1000 / uint64(c.hz)
	fmt.Printf("audit during: backlog=%d lost=+%d backlog_wait_time_actual=+%d ms\n", end.Backlog, lost, waited)
	if !cl.Run() {
		return errors.New("restore failed")
	}
	after, err := restoredStatus()
	if err != nil {
		return err
	}
	restored := "yes"
	if !sameConfig(after.status, saved) || after.rules != len(rules) {
		restored = "no"
	}
	fmt.Printf("audit after: %s rules=%d restored=%s\n", fmtStatus(after.status), after.rules, restored)
	fmt.Printf("RESULT mode=sick rule=%s backlog_limit=%d wait_ms=%d lost=%d waited_ms=%d restored=%s\n",
		c.rule, c.limit, c.wait.Milliseconds(), lost, waited, restored)
	if restored != "yes" {
		return errors.New("audit state differs from before the run")
	}
	return nil
}

// fillCmd keeps making the audited call (a child of "audit sick"): each one
// queues a few records, so the backlog refills as soon as kauditd gives up
// on the daemon and drops what it held.
func fillCmd(args []string) error {
	fs := flag.NewFlagSet("fill", flag.ExitOnError)
	rule := fs.String("rule", "openat", "the audited syscall")
	every := fs.Duration("every", 100*time.Millisecond, "one call this often")
	fs.Parse(args)
	for {
		switch *rule {
		case "openat":
			if fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
				unix.Close(fd)
			}
		case "accept4":
			unix.Accept4(-1, unix.SOCK_NONBLOCK)
		case "connect":
			unix.Connect(-1, &unix.SockaddrInet4{})
		case "execve":
			unix.Exec("/nonexistent", nil, nil)
		case "ppoll":
			// A wait by design that does not wait (no descriptors, a
			// zero timeout): the only sleep is the audit backlog's, at exit.
			unix.Ppoll(nil, &unix.Timespec{}, nil)
		}
		// Once the backlog is full, each call also sleeps in the kernel.
		time.Sleep(*every)
	}
}
