package proc

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/sysray/sysray/internal/redact"
)

// Root is where proc is mounted; tests may point it elsewhere.
var Root = "/proc"

// Snapshot reads every process in /proc. Processes that vanish while it reads
// are skipped.
func Snapshot() ([]Info, error) {
	ents, err := os.ReadDir(Root)
	if err != nil {
		return nil, err
	}
	var out []Info
	for _, ent := range ents {
		pid, err := strconv.ParseUint(ent.Name(), 10, 32)
		if err != nil {
			continue
		}
		if info, ok := Read(uint32(pid)); ok {
			out = append(out, info)
		}
	}
	return out, nil
}

// Read reads one process; ok is false when it is gone.
func Read(pid uint32) (Info, bool) {
	dir := filepath.Join(Root, strconv.FormatUint(uint64(pid), 10))
	stat, err := ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return Info{}, false
	}
	info := Info{PID: pid}
	if !parseStat(stat, &info) {
		return Info{}, false
	}
	if cmd, err := ReadFile(filepath.Join(dir, "cmdline")); err == nil {
		info.Cmdline = redact.Argv(splitNul(cmd))
	}
	info.Exe, _ = os.Readlink(filepath.Join(dir, "exe"))
	info.Cgroup = cgroupID(filepath.Join(dir, "cgroup"))
	if ents, err := os.ReadDir(filepath.Join(dir, "task")); err == nil {
		for _, e := range ents {
			if tid, err := strconv.ParseUint(e.Name(), 10, 32); err == nil {
				info.Threads = append(info.Threads, uint32(tid))
			}
		}
	}
	return info, true
}

// parseStat reads comm, the parent and the start time from
// /proc/PID/stat into info; false if it is not one.
func parseStat(stat []byte, info *Info) bool {
	// comm is in parentheses and may itself contain ") ".
	open, close := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if open < 0 || close < open {
		return false
	}
	info.Comm = string(stat[open+1 : close])
	fields := strings.Fields(string(stat[close+1:]))
	if len(fields) > 19 {
		ppid, _ := strconv.ParseUint(fields[1], 10, 32)
		info.PPID = uint32(ppid)
		ticks, _ := strconv.ParseUint(fields[19], 10, 64)
		info.Start = ticks * 1e9 / clockTicks
	}
	return true
}

// USER_HZ is 100 on every Linux architecture sysray supports.
const clockTicks = 100

func splitNul(b []byte) []string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil
	}
	var out []string
	for _, p := range bytes.Split(b, []byte{0}) {
		out = append(out, string(p))
	}
	return out
}

var (
	v2once  sync.Once
	v2mount string
)

// CgroupV2Mount returns where the unified (v2) hierarchy is mounted:
// /sys/fs/cgroup on pure v2 hosts, /sys/fs/cgroup/unified on hybrid ones.
func CgroupV2Mount() string {
	v2once.Do(func() {
		f, err := os.Open(filepath.Join(Root, "self", "mountinfo"))
		if err != nil {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// "... mountpoint opts - fstype source superopts"
			line := sc.Text()
			pre, post, ok := strings.Cut(line, " - ")
			if !ok || !strings.HasPrefix(post, "cgroup2 ") {
				continue
			}
			if f := strings.Fields(pre); len(f) > 4 {
				v2mount = f[4]
				return
			}
		}
	})
	return v2mount
}

// CgroupID returns the cgroup v2 id of a path inside the v2 hierarchy (as in
// /proc/PID/cgroup "0::/path"): the inode of its directory, which is what
// the kernel's bpf_get_current_cgroup_id returns.
func CgroupID(path string) uint64 {
	mnt := CgroupV2Mount()
	if mnt == "" {
		return 0
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(mnt, path), &st); err != nil {
		return 0
	}
	return st.Ino
}

func cgroupID(file string) uint64 {
	b, err := ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return CgroupID(rest)
		}
	}
	return 0
}

// Descendants returns the processes of snap below roots (children,
// grandchildren…), not the roots themselves.
func Descendants(snap []Info, roots []uint32) []uint32 {
	kids := map[uint32][]uint32{}
	for _, p := range snap {
		if p.PPID != p.PID {
			kids[p.PPID] = append(kids[p.PPID], p.PID)
		}
	}
	seen := map[uint32]bool{}
	for _, r := range roots {
		seen[r] = true
	}
	var out []uint32
	queue := append([]uint32(nil), roots...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, k := range kids[p] {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
				queue = append(queue, k)
			}
		}
	}
	return out
}
