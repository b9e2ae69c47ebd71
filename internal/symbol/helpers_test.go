package symbol

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// need skips the test unless the tools are installed.
func need(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			unavailable(t, tool+" is not installed")
		}
	}
}

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "not root")
	}
}

// unavailable skips a test this machine cannot run, or fails it under
// SYSRAY_REQUIRE_BPF=1: CI sets that where it runs as root and installs
// every compiler these tests build with (.ci/run), so a skip there could
// only hide a test that never ran.
func unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("SYSRAY_REQUIRE_BPF") == "1" {
		t.Fatalf("cannot run: %s, but SYSRAY_REQUIRE_BPF=1", why)
	}
	t.Skip(why)
}

// run runs a command in dir and fails the test on error.
func run(t testing.TB, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func sh(t testing.TB, dir, script string) {
	t.Helper()
	run(t, dir, nil, "sh", "-ec", script)
}

func write(t testing.TB, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// child is a test program that printed the addresses of its functions on
// one line and now waits to be killed.
type child struct {
	pid   uint32
	addrs []uint64
	cmd   *exec.Cmd
}

func start(t testing.TB, name string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{pid: uint32(cmd.Process.Pid), cmd: cmd}
	t.Cleanup(c.stop)
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		for _, f := range strings.Fields(s) {
			a, err := strconv.ParseUint(strings.TrimPrefix(f, "0x"), 16, 64)
			if err != nil {
				t.Fatalf("%s printed %q", name, s)
			}
			c.addrs = append(c.addrs, a)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s printed nothing", name)
	}
	if len(c.addrs) == 0 {
		t.Fatalf("%s printed no addresses", name)
	}
	return c
}

func (c *child) stop() {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	}
}

// targetC prints: target_static target_global anon-exec-page [lib_answer].
const targetC = `#include <stdio.h>
#include <unistd.h>
#include <sys/mman.h>
#ifdef WITH_LIB
extern int lib_answer(int);
#endif
__attribute__((noinline)) static int target_static(int x) { return x * 3 + 1; }
__attribute__((noinline)) int target_global(int x) { return x + target_static(x); }
int main(void) {
	void *jit = mmap(0, 4096, PROT_READ|PROT_WRITE|PROT_EXEC, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
	printf("%lx %lx %lx", (unsigned long)&target_static, (unsigned long)&target_global, (unsigned long)jit);
#ifdef WITH_LIB
	printf(" %lx", (unsigned long)&lib_answer);
#endif
	printf("\n");
	fflush(stdout);
	for (;;) pause();
}
`

const libC = `__attribute__((noinline)) int lib_answer(int x) { return x * 42; }
static int lib_hidden(int x) { return x - 1; }
int lib_other(int x) { return lib_hidden(x) + 1; }
`

// buildC compiles targetC into dir/name.
func buildC(t testing.TB, dir, name string, flags ...string) string {
	t.Helper()
	need(t, "gcc")
	src := filepath.Join(dir, "target.c")
	if _, err := os.Stat(src); err != nil {
		write(t, src, targetC)
	}
	out := filepath.Join(dir, name)
	run(t, dir, nil, "gcc", append([]string{"-O0", "-o", out, src}, flags...)...)
	return out
}
