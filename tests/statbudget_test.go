package tests

// stat's budgeted timing against a record of the same run: the clock times
// only some calls, and the percentiles it reads from them must stay within
// the error stat states (docs/stat.md), for fast calls that are sampled and
// slow ones that are not.

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

type statRow struct {
	Name    string  `json:"name"`
	Calls   uint64  `json:"calls"`
	Timed   uint64  `json:"timed"`
	P50     uint64  `json:"p50_ns"`
	P99     uint64  `json:"p99_ns"`
	P50Rank float64 `json:"p50_rank_error"`
	P99Rank float64 `json:"p99_rank_error"`
}

func TestStatBudgetAgainstRecord(t *testing.T) {
	requireBPF(t)
	t.Run("pid", func(t *testing.T) { budgetAgainstRecord(t, false) })
	// Stat of the whole host counts on its fast path (bpf/fast.h), whose
	// timing must hold as well. Its rows are by process there: the
	// process's reads and sleeps are checked together.
	t.Run("host", func(t *testing.T) { budgetAgainstRecord(t, true) })
}

func budgetAgainstRecord(t *testing.T, host bool) {
	dir := t.TempDir()
	target := exec.Command(prog("latmix"), "3")
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	defer target.Process.Kill()
	pid := target.Process.Pid

	// stat attaches first, then record, while the program waits for the
	// signal. The order matters: each tracer's programs run in the other's
	// timed window, in the order they attached, and stat's window (from the
	// end of its entry program to the start of its exit one) should hold
	// only record's cheap entry program, not its exit program, which now
	// and then hands the kernel's ring a batch.
	out := filepath.Join(dir, "stat.json")
	var st *exec.Cmd
	if host {
		st, _ = startHost(t, "", "stat", "--json", "-o", out, "--by", "process", "-e", "read,clock_nanosleep")
	} else {
		st = startAttached(t, "stat", "--json", "-o", out, "-p", strconv.Itoa(pid))
	}
	capFile := filepath.Join(dir, "run.sysray")
	rec := startAttached(t, "record", "-w", capFile, "-p", strconv.Itoa(pid))
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if err := target.Wait(); err != nil {
		t.Fatalf("latmix: %v", err)
	}
	// Both end by themselves once their process has exited; stat of the
	// host on Ctrl-C.
	if host {
		if err := st.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*exec.Cmd{st, rec} {
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("sysray %v: %v", c.Args[1:], err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("sysray %v still running 20 s after its process exited", c.Args[1:])
		}
	}

	var doc struct{ Rows []statRow }
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("stat --json: %v\n%s", err, b)
	}
	rows := map[string]statRow{}
	for _, r := range doc.Rows {
		name := r.Name
		if host {
			if !strings.HasSuffix(name, "["+strconv.Itoa(pid)+"]") {
				continue
			}
			name = "read+clock_nanosleep"
		}
		rows[name] = r
	}
	exact := map[string][]uint64{}
	for _, e := range parseJSON(t, runOut(t, "read", "--json", capFile).stdout) {
		if e.PID == uint32(pid) && e.Syscall != nil && !e.Syscall.Unfinished {
			name := e.Syscall.Name
			if host {
				name = "read+clock_nanosleep"
			}
			exact[name] = append(exact[name], e.Syscall.LatencyNS)
		}
	}

	names := []string{"read", "clock_nanosleep"}
	if host {
		names = []string{"read+clock_nanosleep"}
	}
	for _, name := range names {
		r, lats := rows[name], exact[name]
		sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
		// Both tracers saw every call after the signal, and only those.
		if r.Calls != uint64(len(lats)) || r.Calls < 500 {
			t.Fatalf("%s: stat counted %d calls, the record holds %d", name, r.Calls, len(lats))
		}
		t.Logf("%s: %d calls, %d timed; p50 %d (exact %d, %d..%d), p99 %d (exact %d, %d..%d)", name,
			r.Calls, r.Timed, r.P50, quantile(lats, 0.5), quantile(lats, 0.5-r.P50Rank), quantile(lats, 0.5+r.P50Rank),
			r.P99, quantile(lats, 0.99), quantile(lats, 0.99-r.P99Rank), quantile(lats, 0.99+r.P99Rank))
		for _, q := range []struct {
			q    float64
			got  uint64
			rank float64
		}{{0.5, r.P50, r.P50Rank}, {0.99, r.P99, r.P99Rank}} {
			// Within 12.5% of the latency at a rank within the stated
			// error of q. Both tracers' programs run inside each other's
			// timed window (whichever attached first stamps the entry
			// first), which adds a few hundred ns to every call both
			// measure: slack for that, not for the method.
			const bucket, slack = 0.125, 200
			lo := float64(quantile(lats, q.q-q.rank))*(1-bucket) - slack
			hi := float64(quantile(lats, q.q+q.rank))*(1+bucket) + slack
			if float64(q.got) < lo || float64(q.got) > hi {
				t.Errorf("%s p%g = %d ns, outside [%.0f, %.0f]: the record's exact values bracketed by the stated error",
					name, 100*q.q, q.got, lo, hi)
			}
		}
	}
	// The reads came thousands a second, far past the budget: most were
	// counted, not timed. Every sleep was timed (a few per tick at most).
	if host {
		if r := rows[names[0]]; r.Timed*2 > r.Calls || r.P50Rank == 0 {
			t.Errorf("%d of %d calls timed, rank error %g: budgeted timing did not sample", r.Timed, r.Calls, r.P50Rank)
		}
		return
	}
	if r := rows["read"]; r.Timed*4 > r.Calls || r.P50Rank == 0 {
		t.Errorf("read: %d of %d calls timed, rank error %g: budgeted timing did not sample", r.Timed, r.Calls, r.P50Rank)
	}
	if r := rows["clock_nanosleep"]; r.Timed != r.Calls {
		t.Errorf("clock_nanosleep: %d of %d calls timed; a thread's sleeps are within its budget", r.Timed, r.Calls)
	}
}

// quantile is the exact latency at rank q of sorted values, the rank
// stat.Hist.Quantile reads (the ⌊q(n−1)⌋+1-th smallest). The two must
// agree: in a sleep's tail, one rank apart can be a millisecond apart
// (CI: p99 of 1,038 sleeps, 2.9 ms at one rank, 4.1 ms at the next).
func quantile(sorted []uint64, q float64) uint64 {
	q = math.Max(0, math.Min(1, q))
	return sorted[int(q*float64(len(sorted)-1))]
}

// startAttached starts sysray with args (some -p) and returns once it says
// it is attached.
func startAttached(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	c := exec.Command(sysray, args...)
	stderr, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill() })
	attached := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var all strings.Builder
		said := false
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
			if !said && strings.Contains(sc.Text(), "attached to pid") {
				said = true
				attached <- ""
			}
		}
		if !said {
			attached <- all.String()
		}
	}()
	select {
	case s := <-attached:
		if s != "" {
			t.Fatalf("sysray %v ended before attaching: %s", args, s)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("sysray %v did not attach in 30 s", args)
	}
	return c
}
