// Command blockedio reproduces calls that do not ask for I/O but wait for
// it, each on a file system it sets up so the host's own mounts do not
// matter, and puts everything back afterwards:
//
//	blockedio [-mode discard|dirty] [-op unlink|truncate|otrunc|rename]
//	          [-procs N] [-mb MB] [-n ITER] [-d DURATION]
//
// discard: a 2 GiB ext4 image without a journal, loop-mounted with
// `discard` (as many cloud images mount their root), where freeing blocks
// sends the device a discard inside the call. dirty: vm.dirty_bytes
// lowered to 4 MiB (and restored), so plain write() calls are throttled in
// balance_dirty_pages.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sysray/sysray/scenarios/internal/scen"
)

func main() {
	mode := flag.String("mode", "discard", "discard or dirty")
	op := flag.String("op", "unlink", "discard: the call that frees the blocks (unlink, truncate, otrunc, rename)")
	procs := flag.Int("procs", 1, "worker processes")
	mb := flag.Int("mb", 64, "MiB per file (discard) or per pass (dirty)")
	iters := flag.Int("n", 8, "iterations per worker (without -d)")
	dur := flag.Duration("d", 0, "run for this long instead of -n iterations")
	flag.Parse()
	var c scen.Cleanup
	ctx := scen.Interrupts()
	code := run(&c, *mode, *op, *procs, *mb, *iters, *dur, ctx.Done())
	if !c.Run() {
		code = 1
	}
	os.Exit(code)
}

func run(c *scen.Cleanup, mode, op string, procs, mb, iters int, dur time.Duration, stop <-chan struct{}) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "blockedio:", err)
		return 1
	}
	worker := filepath.Join(filepath.Dir(self), "blockedio-worker")
	work, err := os.MkdirTemp("/var/tmp", "sysray-blockedio-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "blockedio:", err)
		return 1
	}
	c.Add("remove "+work, func() error { return os.RemoveAll(work) })
	dir := work
	switch mode {
	case "discard":
		img, mnt := filepath.Join(work, "fs.img"), filepath.Join(work, "mnt")
		if err := sh("truncate", "-s", "2G", img); err != nil {
			return fail(err)
		}
		if err := sh("mkfs.ext4", "-q", "-F", "-O", "^has_journal", img); err != nil {
			return fail(err)
		}
		if err := os.Mkdir(mnt, 0o755); err != nil {
			return fail(err)
		}
		if err := sh("mount", "-o", "loop,discard", img, mnt); err != nil {
			return fail(err)
		}
		c.Add("unmount "+mnt, func() error { return sh("umount", mnt) })
		dir = mnt
	case "dirty":
		// Writing a ratio puts the byte limit back to 0 (unused), so the
		// ratios are what is restored.
		for _, k := range []string{"dirty_ratio", "dirty_background_ratio", "dirty_bytes", "dirty_background_bytes"} {
			old, err := os.ReadFile("/proc/sys/vm/" + k)
			if err != nil {
				return fail(err)
			}
			v := strings.TrimSpace(string(old))
			if n, _ := strconv.Atoi(v); n == 0 {
				continue
			}
			path := "/proc/sys/vm/" + k
			c.Add("restore vm."+k, func() error { return scen.WriteFile(path, v) })
		}
		// With limits this small a writer is past them at once and paced
		// to writeback; its 8 MiB writes then take tens of ms each.
		if err := scen.WriteFile("/proc/sys/vm/dirty_background_bytes", "2097152"); err != nil {
			return fail(err)
		}
		if err := scen.WriteFile("/proc/sys/vm/dirty_bytes", "4194304"); err != nil {
			return fail(err)
		}
	default:
		return fail(fmt.Errorf("unknown -mode %q", mode))
	}
	args := []string{"-m", map[string]string{"discard": "free", "dirty": "dirty"}[mode], "-o", op, "-D", dir,
		"-s", strconv.Itoa(mb), "-n", strconv.Itoa(iters)}
	if dur > 0 {
		args = append(args, "-d", fmt.Sprint(dur.Seconds()))
	}
	var wg sync.WaitGroup
	failed := 0
	var mu sync.Mutex
	var cmds []*exec.Cmd
	for range procs {
		cmd := exec.Command(worker, args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			return fail(err)
		}
		cmds = append(cmds, cmd)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cmd.Wait(); err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-stop:
		for _, cmd := range cmds {
			cmd.Process.Kill()
		}
		<-done
	}
	fmt.Printf("RESULT mode=%s op=%s procs=%d failed=%d\n", mode, op, procs, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

func sh(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "blockedio:", err)
	return 1
}
