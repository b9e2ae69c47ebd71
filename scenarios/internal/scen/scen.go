// Package scen holds what the scenario orchestrators share: undoing global
// changes on every way out, and finding and creating cgroups.
package scen

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Cleanup is a stack of undo steps. Scenarios change machine-wide state
// (audit, cgroups), so the steps must run exactly once whether the run ends
// normally, fails half-way, panics or is interrupted.
type Cleanup struct {
	mu    sync.Mutex
	steps []step
}

type step struct {
	name string
	fn   func() error
}

// Add pushes an undo step; steps run last-in first-out.
func (c *Cleanup) Add(name string, fn func() error) {
	c.mu.Lock()
	c.steps = append(c.steps, step{name, fn})
	c.mu.Unlock()
}

// Run runs and forgets every pending step, reporting failures on stderr. It
// returns false if any step failed. Calling it again is harmless.
func (c *Cleanup) Run() bool {
	c.mu.Lock()
	steps := c.steps
	c.steps = nil
	c.mu.Unlock()
	ok := true
	for i := len(steps) - 1; i >= 0; i-- {
		if err := steps[i].fn(); err != nil {
			fmt.Fprintf(os.Stderr, "cleanup: %s: %v\n", steps[i].name, err)
			ok = false
		}
	}
	return ok
}

// Interrupts returns a context cancelled by SIGINT, SIGTERM or SIGHUP. The
// signals stay caught afterwards so that a second Ctrl-C cannot kill the
// process while it is putting the machine back.
func Interrupts() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		first := true
		for s := range ch {
			if first {
				fmt.Fprintf(os.Stderr, "%v: stopping and restoring\n", s)
				first = false
			} else {
				fmt.Fprintf(os.Stderr, "%v: still restoring, please wait\n", s)
			}
			cancel()
		}
	}()
	return ctx
}

// Mount is one cgroup hierarchy from /proc/self/mountinfo.
type Mount struct {
	Path    string
	Version int    // 1 or 2
	Options string // super options, for v1 the controllers
}

// Mounts lists the cgroup hierarchies this process can see.
func Mounts() ([]Mount, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var ms []Mount
	for _, line := range strings.Split(string(b), "\n") {
		// mountinfo: id parent maj:min root mountpoint opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		switch qf[0] {
		case "cgroup2":
			ms = append(ms, Mount{Path: unescape(pf[4]), Version: 2, Options: qf[2]})
		case "cgroup":
			ms = append(ms, Mount{Path: unescape(pf[4]), Version: 1, Options: qf[2]})
		}
	}
	return ms, nil
}

// unescape undoes mountinfo's octal escapes (\040 for space and so on).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// V2Root is where the unified hierarchy is mounted: /sys/fs/cgroup on pure
// v2 hosts, /sys/fs/cgroup/unified on hybrid ones.
func V2Root() (string, error) {
	ms, err := Mounts()
	if err != nil {
		return "", err
	}
	for _, m := range ms {
		if m.Version == 2 {
			return m.Path, nil
		}
	}
	return "", fmt.Errorf("no cgroup2 mount in /proc/self/mountinfo")
}

// V1Root is where a v1 hierarchy carrying controller is mounted.
func V1Root(controller string) (string, error) {
	ms, err := Mounts()
	if err != nil {
		return "", err
	}
	for _, m := range ms {
		if m.Version != 1 {
			continue
		}
		for _, o := range strings.Split(m.Options, ",") {
			if o == controller {
				return m.Path, nil
			}
		}
	}
	return "", fmt.Errorf("no cgroup v1 hierarchy with the %s controller", controller)
}

// V2Controllers lists the controllers available at the v2 root.
func V2Controllers(root string) []string {
	b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

// MakeGroup creates dir and registers its removal. Removal retries briefly:
// a cgroup stays busy for a moment after its last process has been reaped.
func MakeGroup(c *Cleanup, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	c.Add("rmdir "+dir, func() error { return RemoveGroup(dir) })
	return nil
}

// RemoveGroup removes a cgroup directory, waiting up to a second for it to
// empty.
func RemoveGroup(dir string) error {
	var err error
	for i := 0; i < 100; i++ {
		err = syscall.Rmdir(dir)
		if err == nil || err == syscall.ENOENT {
			return nil
		}
		if err != syscall.EBUSY {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("rmdir %s: %w", dir, err)
}

// WriteFile writes a control file, saying which file refused.
func WriteFile(path, value string) error {
	if err := os.WriteFile(path, []byte(value), 0); err != nil {
		return fmt.Errorf("write %q to %s: %w", value, path, err)
	}
	return nil
}

// RemoveStale removes cgroups named prefix+PID under root (and their
// children) left behind by a run that was killed before it could clean up:
// those whose PID is gone and that hold no processes. It reports what it
// removed.
func RemoveStale(root, prefix string) []string {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() {
			continue
		}
		pid, err := strconv.Atoi(rest)
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		dir := filepath.Join(root, e.Name())
		kids, _ := os.ReadDir(dir)
		for _, k := range kids {
			if k.IsDir() {
				syscall.Rmdir(filepath.Join(dir, k.Name()))
			}
		}
		if syscall.Rmdir(dir) == nil {
			removed = append(removed, dir)
		}
	}
	return removed
}
