package tests

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// The live tests change the host to make trouble (audit rules and the
// backlog, sysctls, cgroups, mounts, network namespaces and nftables
// rules) and must put it back, even when a test fails half-way: the next
// test, and the next run on a developer's machine, must find the host as
// it was. TestMain reads this state before and after the tests and fails
// the run on any difference, naming it.

// sysctls the tests and scenarios set, and a few a careless test could.
var watchedSysctls = []string{
	"vm/dirty_bytes", "vm/dirty_background_bytes", "vm/dirty_ratio", "vm/dirty_background_ratio",
	"vm/max_map_count", "vm/overcommit_memory", "vm/overcommit_ratio",
	"fs/inotify/max_user_watches", "fs/inotify/max_user_instances", "fs/inotify/max_queued_events",
	"user/max_inotify_watches", "user/max_inotify_instances",
	"net/ipv4/ip_local_port_range", "net/ipv4/tcp_tw_reuse",
	"kernel/kptr_restrict", "kernel/bpf_stats_enabled", "kernel/perf_event_paranoid",
	"kernel/threads-max", "kernel/core_pattern", "fs/file-max",
	"vm/nr_hugepages",
}

// cgroup subtrees systemd manages on its own schedule (timers start and
// end services there): a difference in them is not a test's.
var systemdCgroups = []string{"system.slice", "user.slice", "init.scope"}

// hostState reads what the live tests may change, as "what: value" lines.
// auditBin, if not empty, is scenarios/bin/audit, which reads the audit
// configuration and counts its rules.
func hostState(auditBin string) []string {
	var out []string
	for _, s := range watchedSysctls {
		b, err := os.ReadFile("/proc/sys/" + s)
		if err != nil {
			continue // not on this kernel
		}
		out = append(out, fmt.Sprintf("sysctl %s: %s", strings.ReplaceAll(s, "/", "."), strings.Join(strings.Fields(string(b)), " ")))
	}
	if auditBin != "" {
		b, err := exec.Command(auditBin, "status").Output()
		if err != nil {
			out = append(out, fmt.Sprintf("audit: unreadable (%v)", err))
		}
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(l, "RESULT ") {
				continue
			}
			for _, kv := range strings.Fields(l)[1:] {
				// Counters move with every audited call; the configuration
				// and the rules are what a test sets.
				if k, _, _ := strings.Cut(kv, "="); k != "lost" && k != "backlog" {
					out = append(out, "audit "+kv)
				}
			}
		}
	}
	if f, err := os.Open("/proc/self/mountinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// mount ID, parent, major:minor, root, mount point, options... - fstype source
			fields := strings.Fields(sc.Text())
			if len(fields) < 5 {
				continue
			}
			fstype := ""
			if i := slices.Index(fields, "-"); i > 0 && i+1 < len(fields) {
				fstype = fields[i+1]
			}
			out = append(out, fmt.Sprintf("mount %s (%s)", fields[4], fstype))
		}
		f.Close()
	}
	filepath.WalkDir("/sys/fs/cgroup", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel("/sys/fs/cgroup", path)
		if slices.Contains(systemdCgroups, strings.Split(rel, "/")[0]) {
			return filepath.SkipDir
		}
		if rel != "." {
			out = append(out, "cgroup /"+rel)
		}
		return nil
	})
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			out = append(out, "netns "+e.Name())
		}
	}
	if ents, err := os.ReadDir("/sys/class/net"); err == nil {
		for _, e := range ents {
			out = append(out, "link "+e.Name())
		}
	}
	if nft, err := exec.LookPath("nft"); err == nil {
		if b, err := exec.Command(nft, "list", "tables").Output(); err == nil {
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				if l != "" {
					out = append(out, "nft "+l)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// hostChanges lists what is in one state and not the other.
func hostChanges(before, after []string) []string {
	var diff []string
	for _, l := range before {
		// A cgroup gone by the end was removed by whoever made it (a
		// service or a container that ended, a job runner's per-command
		// cgroup); the tests remove only the cgroups they make, so a
		// cgroup they leave behind shows as a "+".
		if !slices.Contains(after, l) && !strings.HasPrefix(l, "cgroup ") {
			diff = append(diff, "- "+l)
		}
	}
	for _, l := range after {
		if !slices.Contains(before, l) {
			diff = append(diff, "+ "+l)
		}
	}
	return diff
}
