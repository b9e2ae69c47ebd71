package agent

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
)

// BPFStatsOn reports whether the kernel times BPF programs
// (kernel.bpf_stats_enabled): it costs every program two clock reads a run,
// so it is off unless an operator turns it on.
func BPFStatsOn() bool {
	b, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled")
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// OwnBPFRunTime sums the run time of the BPF programs this process holds,
// by program name. The programs are found through this process's own file
// descriptors (their fdinfo names the program id), so another sysray on the
// host, with programs of the same names, is not counted.
func OwnBPFRunTime() (map[string]time.Duration, error) {
	fds, err := os.ReadDir("/proc/self/fdinfo")
	if err != nil {
		return nil, err
	}
	ids := map[ebpf.ProgramID]bool{}
	for _, fd := range fds {
		if id, ok := progID(filepath.Join("/proc/self/fdinfo", fd.Name())); ok {
			ids[id] = true
		}
	}
	out := map[string]time.Duration{}
	for id := range ids {
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // unloaded since
		}
		info, ierr := p.Info()
		st, serr := p.Stats()
		p.Close()
		if ierr != nil || serr != nil {
			continue
		}
		out[info.Name] += st.Runtime
	}
	return out, nil
}

// progID reads the program id from a BPF program's or link's fdinfo.
func progID(path string) (ebpf.ProgramID, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "prog_id:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			return ebpf.ProgramID(n), err == nil && n > 0
		}
	}
	return 0, false
}
