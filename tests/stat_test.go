package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/proc"
)

type statDoc struct {
	Rows []struct {
		Name   string `json:"name"`
		Calls  uint64 `json:"calls"`
		Errors uint64 `json:"errors"`
		P50NS  uint64 `json:"p50_ns"`
		P99NS  uint64 `json:"p99_ns"`
		MaxNS  uint64 `json:"max_ns"`
	} `json:"rows"`
	Drops uint64 `json:"drops"`
}

func runStat(t *testing.T, args ...string) statDoc {
	t.Helper()
	out := filepath.Join(t.TempDir(), "stat.json")
	r := run(t, append([]string{"stat", "--json", "-o", out}, args...)...)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("stat wrote nothing: %v (exit %d, %s)", err, r.code, r.stderr)
	}
	var d statDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("bad stat JSON: %v\n%s", err, b)
	}
	return d
}

// Counting in the kernel gives exactly strace -c's counts.
func TestStatCountsMatchStrace(t *testing.T) {
	requireBPF(t)
	for _, cmd := range [][]string{
		{prog("getppid"), "20000"},
		{prog("openat"), filepath.Join(t.TempDir(), "f")},
		{prog("mmapfail")},
		{prog("segv")},
	} {
		t.Run(filepath.Base(cmd[0]), func(t *testing.T) {
			want := straceCounts(t, cmd...)
			d := runStat(t, append([]string{"--"}, cmd...)...)
			if d.Drops != 0 {
				t.Fatalf("%d syscalls not counted", d.Drops)
			}
			got := counts{}
			for _, r := range d.Rows {
				got[r.Name] = [2]uint64{r.Calls, r.Errors}
			}
			sameCounts(t, "stat", got, want)
		})
	}
}

// Percentiles from the kernel's histogram against a known latency: a
// process that sleeps 50 ms at a time.
func TestStatPercentiles(t *testing.T) {
	requireBPF(t)
	d := runStat(t, "-e", "clock_nanosleep,nanosleep", "--duration", "1200ms", "--", prog("sleeper"), "50")
	for _, r := range d.Rows {
		if r.Name != "clock_nanosleep" && r.Name != "nanosleep" {
			continue
		}
		if r.Calls < 15 {
			t.Fatalf("%d sleeps of 50 ms in 1.2 s", r.Calls)
		}
		// 50 ms plus timer slack and scheduling, within the 12.5% bucket error.
		lo, hi := uint64(50*time.Millisecond)*7/8, uint64(50*time.Millisecond)*5/4
		if r.P50NS < lo || r.P50NS > hi {
			t.Errorf("p50 %d ns, want 50 ms within the histogram's error", r.P50NS)
		}
		if r.MaxNS < uint64(50*time.Millisecond) {
			t.Errorf("max %d ns is below the 50 ms every call sleeps", r.MaxNS)
		}
		return
	}
	t.Fatalf("no nanosleep row: %+v", d.Rows)
}

// A process that moves to another cgroup is counted in the new one from
// then on: the kernel side caches each task's cgroup id between moves.
func TestStatFollowsCgroupMove(t *testing.T) {
	requireBPF(t)
	// Docker-style scopes, so --by container names them. (The host's own
	// cgroup would not do: on hybrid hosts a process in it is looked up by
	// pid, and the pid has moved.)
	var ids, dirs [2]string
	for i := range ids {
		// Apart in their first 12 characters, the short id names show.
		ids[i] = fmt.Sprintf("%02x%014x", 0xa0+i, time.Now().UnixNano()&(1<<56-1)) + strings.Repeat("5a", 24)
		dirs[i] = filepath.Join(proc.CgroupV2Mount(), "sysray-test", "docker-"+ids[i]+".scope")
		if err := os.MkdirAll(dirs[i], 0o755); err != nil {
			t.Fatalf("creating cgroup: %v", err)
		}
	}
	t.Cleanup(func() {
		for _, d := range dirs {
			os.Remove(d)
		}
		os.Remove(filepath.Dir(dirs[0]))
	})
	d := runStat(t, "--by", "container", "-e", "getppid", "--", prog("cgmove"), dirs[0], dirs[1], "3000", "5000")
	got := map[string]uint64{}
	for _, r := range d.Rows {
		got[r.Name] += r.Calls
	}
	var in [2]uint64
	for name, n := range got {
		for i, id := range ids {
			if strings.Contains(name, id[:12]) {
				in[i] += n
			}
		}
	}
	if in[0] != 3000 || in[1] != 5000 {
		t.Fatalf("getppid by cgroup: %v; want 3000 in %s and 5000 in %s", got, ids[0][:12], ids[1][:12])
	}
}

// Budgeted timing keeps most calls' counts in their thread until they are
// read (bpf/stat.h, PEND_SLOTS): a read must take them from threads that
// are still alive, not only from those that exited. Four threads each make
// exactly 30,000 getppid calls (far past the timing budget), then block;
// stat -p is stopped while they live.
func TestStatCountsLiveThreads(t *testing.T) {
	requireBPF(t)
	const perThread, threads = 30000, 4
	target := exec.Command(prog("burst"), strconv.Itoa(perThread), strconv.Itoa(threads))
	stdout, err := target.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		target.Process.Kill()
		target.Wait()
	}()
	out := filepath.Join(t.TempDir(), "stat.json")
	st := startAttached(t, "stat", "--json", "-o", out, "-p", strconv.Itoa(target.Process.Pid))
	if err := target.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "done\n" {
		t.Fatalf("burst said %q: %v", line, err)
	}
	if err := st.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := st.Wait(); err != nil {
		t.Fatalf("sysray stat: %v", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var d statDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("bad stat JSON: %v\n%s", err, b)
	}
	var got uint64
	for _, r := range d.Rows {
		if r.Name == "getppid" {
			got = r.Calls
		}
	}
	if got != perThread*threads || d.Drops != 0 {
		t.Errorf("stat counted %d getppid calls (%d dropped), want exactly %d", got, d.Drops, perThread*threads)
	}
}
