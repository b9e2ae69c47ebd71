package host

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// procRoot is where proc is mounted; tests point it at a fake tree.
var procRoot = "/proc"

// The kernel limits whose exhaustion makes a syscall fail with an errno that
// names another resource: mmap's ENOMEM at vm.max_map_count or the commit
// limit with memory free, inotify_add_watch's ENOSPC and inotify_init1's
// EMFILE at the per-user inotify limits, connect's EADDRNOTAVAIL with the
// local port range held in TIME_WAIT, open's ENFILE and EMFILE at the
// system and per-process descriptor ceilings. Each is a meta key of the
// capture header, named as sysctl(8) names it (docs/capture-format.md).
const (
	MetaMaxMapCount      = "vm.max_map_count"
	MetaOvercommitMemory = "vm.overcommit_memory"
	MetaOvercommitRatio  = "vm.overcommit_ratio"
	MetaInotifyWatches   = "fs.inotify.max_user_watches"
	MetaInotifyInstances = "fs.inotify.max_user_instances"
	MetaFileMax          = "fs.file-max"
	MetaNrOpen           = "fs.nr_open"
	MetaLocalPortRange   = "net.ipv4.ip_local_port_range"
	MetaTCPFinTimeout    = "net.ipv4.tcp_fin_timeout"
	MetaTCPTwReuse       = "net.ipv4.tcp_tw_reuse"
	MetaMemAvailable     = "mem_available" // bytes
	MetaCommitLimit      = "commit_limit"  // bytes
	MetaCommittedAS      = "committed_as"  // bytes
)

var limitSysctls = []string{
	MetaMaxMapCount, MetaOvercommitMemory, MetaOvercommitRatio,
	MetaInotifyWatches, MetaInotifyInstances, MetaFileMax, MetaNrOpen,
	MetaLocalPortRange, MetaTCPFinTimeout, MetaTCPTwReuse,
}

// The /proc/meminfo fields stored, in bytes, under their meta keys: the
// memory a process could still get (MemAvailable), and, under strict
// overcommit (vm.overcommit_memory=2), the commit limit and how much of it
// is committed, which is what mmap's ENOMEM then answers to.
var meminfoKeys = []struct{ field, key string }{
	{"MemAvailable", MetaMemAvailable},
	{"CommitLimit", MetaCommitLimit},
	{"Committed_AS", MetaCommittedAS},
}

// LimitsWait bounds how long Limits waits for its reads. Opening a file is
// an audited syscall: with the audit backlog full, each open waits for room
// (hundreds of ms), and a capture's header must not wait that long for
// facts that only explain some findings.
var LimitsWait = 250 * time.Millisecond

// Limits reads the limits above: sysctl values with their whitespace made
// single spaces ("32768 60999"), meminfo fields in bytes. The net.* values
// are those of the caller's network namespace (the host's when sysray runs
// on the host); a process in another namespace has its own. A value that
// cannot be read, or is not read within LimitsWait, is left out. The reads
// run concurrently; one still blocked when Limits returns ends on its own.
func Limits() map[string]string {
	type kv struct{ k, v string }
	ch := make(chan kv, len(limitSysctls)+len(meminfoKeys))
	for _, name := range limitSysctls {
		go func() {
			v, _ := Sysctl(name)
			ch <- kv{name, v}
		}()
	}
	go func() {
		m := readMeminfo()
		for _, f := range meminfoKeys {
			v := ""
			if n, ok := m[f.field]; ok {
				v = strconv.FormatUint(n, 10)
			}
			ch <- kv{f.key, v}
		}
	}()
	out := make(map[string]string, cap(ch))
	timeout := time.NewTimer(LimitsWait)
	defer timeout.Stop()
	for range cap(ch) {
		select {
		case r := <-ch:
			if r.v != "" {
				out[r.k] = r.v
			}
		case <-timeout.C:
			return out
		}
	}
	return out
}

// Sysctl reads one sysctl by its dotted name, as Limits stores it, for a
// reader that wants the value in force now (a live detector at the time of
// the errno). It is one open, which waits when the audit backlog is full.
func Sysctl(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "sys", strings.ReplaceAll(name, ".", "/")))
	if err != nil {
		return "", err
	}
	return strings.Join(strings.Fields(string(b)), " "), nil
}

// MetaUint parses a single-number limit from a capture's meta (or Limits);
// ok is false when the key is absent or not a number: unknown, not 0.
func MetaUint(meta map[string]string, key string) (n uint64, ok bool) {
	n, err := strconv.ParseUint(meta[key], 10, 64)
	return n, err == nil
}

// MetaPortRange parses net.ipv4.ip_local_port_range from a capture's meta:
// the lowest and highest port connect picks from.
func MetaPortRange(meta map[string]string) (lo, hi uint16, ok bool) {
	a, b, found := strings.Cut(meta[MetaLocalPortRange], " ")
	l, err1 := strconv.ParseUint(a, 10, 16)
	h, err2 := strconv.ParseUint(b, 10, 16)
	if !found || err1 != nil || err2 != nil || l > h {
		return 0, 0, false
	}
	return uint16(l), uint16(h), true
}

// readMeminfo returns /proc/meminfo's fields in bytes (those given in kB
// converted; the counts of huge pages as they are).
func readMeminfo() map[string]uint64 {
	b, err := os.ReadFile(filepath.Join(procRoot, "meminfo"))
	if err != nil {
		return nil
	}
	m := make(map[string]uint64)
	for line := range bytes.Lines(b) {
		name, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		f := strings.Fields(string(rest))
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && f[1] == "kB" {
			n *= 1024
		}
		m[string(name)] = n
	}
	return m
}
