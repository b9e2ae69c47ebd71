package agent

import (
	"os"
	"strings"
)

// BPFStatsOn reports whether the kernel times BPF programs
// (kernel.bpf_stats_enabled): it costs every program two clock reads a run,
// so it is off unless an operator turns it on.
func BPFStatsOn() bool {
	b, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled")
	return err == nil && strings.TrimSpace(string(b)) == "1"
}
