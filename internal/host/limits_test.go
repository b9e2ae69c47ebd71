package host

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestLimitsFromTree(t *testing.T) {
	root := writeTree(t, map[string]string{
		"sys/vm/max_map_count":              "65530\n",
		"sys/vm/overcommit_memory":          "2\n",
		"sys/vm/overcommit_ratio":           "50\n",
		"sys/fs/inotify/max_user_watches":   "192536\n",
		"sys/fs/inotify/max_user_instances": "128\n",
		"sys/fs/file-max":                   "9223372036854775807\n",
		"sys/fs/nr_open":                    "1048576\n",
		"sys/net/ipv4/ip_local_port_range":  "32768\t60999\n",
		"sys/net/ipv4/tcp_fin_timeout":      "60\n",
		"sys/net/ipv4/tcp_tw_reuse":         "2\n",
		"meminfo":                           "MemTotal:       32871652 kB\nMemAvailable:   23637424 kB\nCommitLimit:    12342044 kB\nCommitted_AS:    1014316 kB\nHugePages_Total:       0\n",
	})
	old := procRoot
	procRoot = root
	defer func() { procRoot = old }()

	got := Limits()
	want := map[string]string{
		"vm.max_map_count":              "65530",
		"vm.overcommit_memory":          "2",
		"vm.overcommit_ratio":           "50",
		"fs.inotify.max_user_watches":   "192536",
		"fs.inotify.max_user_instances": "128",
		"fs.file-max":                   "9223372036854775807",
		"fs.nr_open":                    "1048576",
		"net.ipv4.ip_local_port_range":  "32768 60999",
		"net.ipv4.tcp_fin_timeout":      "60",
		"net.ipv4.tcp_tw_reuse":         "2",
		"mem_available":                 strconv.FormatUint(23637424*1024, 10),
		"commit_limit":                  strconv.FormatUint(12342044*1024, 10),
		"committed_as":                  strconv.FormatUint(1014316*1024, 10),
	}
	if len(got) != len(want) {
		t.Errorf("%d keys, want %d: %v", len(got), len(want), got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestMetaParse(t *testing.T) {
	meta := map[string]string{MetaMaxMapCount: "65530", MetaLocalPortRange: "50000 50063", MetaTCPTwReuse: ""}
	if n, ok := MetaUint(meta, MetaMaxMapCount); !ok || n != 65530 {
		t.Errorf("max_map_count %d %v", n, ok)
	}
	for _, k := range []string{MetaTCPTwReuse, MetaNrOpen, MetaLocalPortRange} {
		if n, ok := MetaUint(meta, k); ok {
			t.Errorf("%s: %d, want unknown", k, n)
		}
	}
	if lo, hi, ok := MetaPortRange(meta); !ok || lo != 50000 || hi != 50063 {
		t.Errorf("port range %d-%d %v", lo, hi, ok)
	}
	for _, v := range []string{"", "50000", "50063 50000", "1 70000", "a b"} {
		if lo, hi, ok := MetaPortRange(map[string]string{MetaLocalPortRange: v}); ok {
			t.Errorf("%q: %d-%d, want unknown", v, lo, hi)
		}
	}
}

// A fact that cannot be read is absent, not empty or zero: a reader must
// not take a missing limit for a limit of 0.
func TestLimitsMissing(t *testing.T) {
	root := writeTree(t, map[string]string{
		"sys/vm/max_map_count": "4096\n",
		"meminfo":              "MemTotal: 1 kB\n",
	})
	old := procRoot
	procRoot = root
	defer func() { procRoot = old }()
	got := Limits()
	if len(got) != 1 || got["vm.max_map_count"] != "4096" {
		t.Errorf("got %v, want only vm.max_map_count=4096", got)
	}
}

// Reads that do not come back in time are left out, and Limits returns
// after LimitsWait. A FIFO blocks its reader's open as a full audit
// backlog does.
func TestLimitsBounded(t *testing.T) {
	root := writeTree(t, map[string]string{"sys/vm/max_map_count": "65530\n"})
	fifo := filepath.Join(root, "sys/fs/nr_open")
	if err := os.MkdirAll(filepath.Dir(fifo), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := mkfifo(fifo); err != nil {
		t.Skip("no FIFO:", err)
	}
	old, oldWait := procRoot, LimitsWait
	procRoot, LimitsWait = root, 100*time.Millisecond
	defer func() {
		procRoot, LimitsWait = old, oldWait
		// Release the blocked reader.
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
	}()
	start := time.Now()
	got := Limits()
	if d := time.Since(start); d < LimitsWait || d > 10*LimitsWait {
		t.Errorf("returned after %v, want about %v", d, LimitsWait)
	}
	if _, ok := got["fs.nr_open"]; ok || got["vm.max_map_count"] != "65530" {
		t.Errorf("got %v", got)
	}
}

// On this host every limit is there, and reads as sysctl(8) shows it.
func TestLimitsLive(t *testing.T) {
	got := Limits()
	for _, k := range limitSysctls {
		v, ok := got[k]
		if !ok {
			if _, err := os.Stat(filepath.Join("/proc/sys", strings.ReplaceAll(k, ".", "/"))); err == nil {
				t.Errorf("%s missing", k)
			}
			continue
		}
		for _, f := range strings.Fields(v) {
			if _, err := strconv.ParseInt(f, 10, 64); err != nil {
				t.Errorf("%s = %q: not numbers", k, v)
			}
		}
	}
	for _, f := range meminfoKeys {
		if n, err := strconv.ParseUint(got[f.key], 10, 64); err != nil || n == 0 {
			t.Errorf("%s = %q", f.key, got[f.key])
		}
	}
	facts := Facts()
	if facts["vm.max_map_count"] == "" || facts["kernel"] == "" || facts["vsyscall_mode"] == "" {
		t.Errorf("Facts lacks limits or its own keys: %v", facts)
	}
}

func mkfifo(path string) error { return unix.Mkfifo(path, 0o644) }
