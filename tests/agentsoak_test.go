package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// agentStats is what the soak watches of the agent from outside: the
// kernel's view of its memory and files, and what it says of itself.
type agentStats struct {
	at          time.Duration
	rssKiB      int
	fds         int
	goroutines  float64
	series      int // sysray_* samples in /metrics
	containers  int // distinct container labels of the syscall histograms
	pairs       int // distinct (container, syscall) histograms
	captures    int
	captureSize int64
}

func (s agentStats) String() string {
	return fmt.Sprintf("%5.0fs rss %d KiB, %d fds, %.0f goroutines, %d series (%d containers, %d histograms), %d captures (%d bytes)",
		s.at.Seconds(), s.rssKiB, s.fds, s.goroutines, s.series, s.containers, s.pairs, s.captures, s.captureSize)
}

func sampleAgent(t *testing.T, a *agentProc, dir string, at time.Duration) agentStats {
	t.Helper()
	pid := a.cmd.Process.Pid
	s := agentStats{at: at}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("the agent is gone: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			s.rssKiB, _ = strconv.Atoi(strings.Fields(v)[0])
		}
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	s.fds = len(fds)
	m := a.scrape(t)
	s.goroutines = m["go_goroutines{}"]
	ctrs, pairs := map[string]bool{}, map[string]bool{}
	for k := range m {
		if !strings.HasPrefix(k, "sysray_") {
			continue
		}
		s.series++
		if strings.HasPrefix(k, "sysray_syscall_duration_seconds_count{") {
			l := labelsOf(k)
			ctrs[l["namespace"]+"/"+l["pod"]+"/"+l["container"]] = true
			pairs[l["namespace"]+"/"+l["pod"]+"/"+l["container"]+"/"+l["syscall"]] = true
		}
	}
	s.containers, s.pairs = len(ctrs), len(pairs)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if info, err := e.Info(); err == nil {
			s.captures++
			s.captureSize += info.Size()
		}
	}
	return s
}

// labelsOf parses a scrape key's labels (values hold no commas or quotes
// here: container and syscall names).
func labelsOf(key string) map[string]string {
	out := map[string]string{}
	_, rest, _ := strings.Cut(key, "{")
	for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}

// The agent over time, as a busy node runs it: a container created and
// removed every second, one that crashes every minute, for ten minutes
// (SYSRAY_SOAK, e.g. 2m, shortens it while developing). The agent runs
// with its defaults (duty cycling, the doctor, the flight recorder) but a
// small capture directory and a one-minute grace, so that both limits are
// reached within the run. Throughout: its RSS stays under 150 MiB; the
// series stay within the bounds docs/agent.md gives; the capture
// directory stays under its caps; after the first minute its open files
// and goroutines do not grow. Every crash leaves a capture named after
// its container.
func TestAgentSoak(t *testing.T) {
	requireBPF(t)
	if _, err := exec.LookPath("containerd"); err != nil && os.Getenv("SYSRAY_REQUIRE_BPF") != "1" {
		t.Skip("containerd not installed (tests/containers/setup.sh installs it)")
	}
	soak := 10 * time.Minute
	if v := os.Getenv("SYSRAY_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute {
			t.Fatalf("SYSRAY_SOAK=%q: want a duration of a minute or more", v)
		}
		soak = d
	}
	if out, err := exec.Command("bash", "containers/setup.sh").CombinedOutput(); err != nil {
		t.Fatalf("setup.sh: %v\n%s", err, out)
	}
	const (
		maxContainers = 20
		maxSyscalls   = 10
		capFiles      = 5
		capBytes      = 8 << 20
		maxRSSKiB     = 150 << 10
	)
	dir := filepath.Join(t.TempDir(), "captures")
	a := startAgent(t, "--syscalls", "duty", "--interval", "5s", "--grace", "1m",
		"--max-containers", strconv.Itoa(maxContainers), "--max-syscalls", strconv.Itoa(maxSyscalls),
		"--capture-dir", dir, "--capture-max-files", strconv.Itoa(capFiles), "--capture-max-bytes", strconv.Itoa(capBytes))

	// The agent's log, read as it comes (its channel drops lines when full).
	var logs []string
	logDone := make(chan struct{})
	stopLogs := make(chan struct{})
	go func() {
		defer close(logDone)
		for {
			select {
			case l, ok := <-a.logs:
				if !ok {
					return
				}
				logs = append(logs, l)
			case <-stopLogs:
				return
			}
		}
	}()

	crasher := scenario(t, "crasher")
	var crashed []string
	var samples []agentStats
	start := time.Now()
	var prev string
	defer func() {
		if prev != "" {
			exec.Command("bash", "containers/teardown.sh", prev).Run()
		}
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 0; time.Since(start) < soak; i++ {
		<-tick.C
		// One container a second, each living a second: a shell that
		// makes a few calls and sleeps.
		name := fmt.Sprintf("soak-%d-%d", os.Getpid(), i)
		if out, err := exec.Command("bash", "containers/setup.sh", "run", name, name+"-pod", "soak", name,
			"--", "sh", "-c", "echo $$ > /tmp/pid; ls / > /dev/null; exec sleep 5").CombinedOutput(); err != nil {
			t.Fatalf("setup.sh run: %v\n%s", err, out)
		}
		if prev != "" {
			if out, err := exec.Command("bash", "containers/teardown.sh", prev).CombinedOutput(); err != nil {
				t.Fatalf("teardown.sh: %v\n%s", err, out)
			}
		}
		prev = name
		if i%60 == 30 {
			c := fmt.Sprintf("crash-%d", i/60)
			inContainer(t, c, crasher)
			crashed = append(crashed, c)
		}
		if i%10 == 0 {
			s := sampleAgent(t, a, dir, time.Since(start))
			samples = append(samples, s)
			t.Log(s)
		}
	}
	// The last crash's window, and its capture.
	time.Sleep(15 * time.Second)
	last := sampleAgent(t, a, dir, time.Since(start))
	samples = append(samples, last)
	t.Log(last)
	close(stopLogs)
	<-logDone
	code, rest := a.stop(t)
	logs = append(logs, rest...)
	if code != 0 {
		t.Errorf("the agent exited %d", code)
	}

	var base agentStats
	for _, s := range samples {
		if s.at >= time.Minute && base.at == 0 {
			base = s
		}
		if s.rssKiB > maxRSSKiB {
			t.Errorf("RSS %d KiB over %d at %s", s.rssKiB, maxRSSKiB, s.at)
		}
		// docs/agent.md: at most max-containers with series of their own,
		// plus host and other; at most max-syscalls each, plus other.
		if s.containers > maxContainers+2 || s.pairs > (maxContainers+2)*(maxSyscalls+1) {
			t.Errorf("at %s: %d containers and %d histograms, over the bound", s.at, s.containers, s.pairs)
		}
		if s.captures > capFiles || s.captureSize > capBytes {
			t.Errorf("at %s: the capture directory holds %d files, %d bytes, over its caps", s.at, s.captures, s.captureSize)
		}
	}
	// Leaks: what a minute of churn needed, the rest must not add to.
	if last.fds > base.fds+4 || last.goroutines > base.goroutines+4 {
		t.Errorf("leak: %d fds and %.0f goroutines at the end, %d and %.0f after a minute", last.fds, last.goroutines, base.fds, base.goroutines)
	}
	// Series come and go with containers: a minute's grace, not the run.
	if last.containers > maxContainers+2 {
		t.Errorf("%d containers with series at the end", last.containers)
	}
	for _, c := range crashed {
		found := false
		for _, l := range logs {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "wrote a flight capture" {
				name, _ := m["name"].(string)
				found = found || strings.Contains(name, "-fatal-signal-"+c+".")
			}
		}
		if !found {
			t.Errorf("the crash in %s left no flight capture", c)
		}
	}
	if len(crashed) == 0 {
		t.Error("no crash in the soak")
	}
}
