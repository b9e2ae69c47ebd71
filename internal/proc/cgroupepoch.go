package proc

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// CgroupEpoch tells the memory cgroups made after it was taken from those
// already there. kernfs numbers its nodes, cgroupfs's inode numbers, in
// the order it makes them (idr_alloc_cyclic; when the 32-bit counter wraps
// a generation in the high bits goes up), so a directory numbered above
// every directory at the epoch was made after it, and its counters
// (memory.stat's refaults) hold only what happened since. Inode times
// cannot tell: kernfs sets them when the inode is instantiated, and a
// reclaimed inode comes back younger.
type CgroupEpoch struct {
	root string // the memory hierarchy's mount, as ReadMemFacts picks it
	max  uint64 // the highest directory number at the epoch
}

// epochDirs bounds the walk: a host with more cgroups than this gets no
// epoch, and every cgroup counts as older than the trace (today's answer
// without one: the counters are read from the first look on).
const epochDirs = 200_000

// TakeCgroupEpoch walks the memory hierarchy once. It returns nil where
// there is none or the walk fails part way: nil says every cgroup is old.
func TakeCgroupEpoch() *CgroupEpoch {
	root := memRoot()
	if root == "" {
		return nil
	}
	e := &CgroupEpoch{root: root}
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != root && os.IsNotExist(err) {
				return nil // removed while walked: it was there, and numbered lower than what comes
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if n++; n > epochDirs {
			return fs.SkipAll
		}
		info, err := d.Info()
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			e.max = max(e.max, st.Ino)
		}
		return nil
	})
	if err != nil || n > epochDirs || e.max == 0 {
		return nil
	}
	return e
}

// Newer says whether the memory cgroup at path cg (as in MemFacts.Cgroup)
// was made after the epoch. False when unknown: gone, or no epoch.
func (e *CgroupEpoch) Newer(cg string) bool {
	if e == nil || cg == "" {
		return false
	}
	st, err := os.Stat(filepath.Join(e.root, cg))
	if err != nil {
		return false
	}
	s, ok := st.Sys().(*syscall.Stat_t)
	return ok && s.Ino > e.max
}

// memRoot is where ReadMemFacts reads memory cgroups: cgroup v1's memory
// controller where mounted, else the v2 mount.
func memRoot() string {
	if _, err := os.Stat("/sys/fs/cgroup/memory/cgroup.procs"); err == nil {
		return "/sys/fs/cgroup/memory"
	}
	return CgroupV2Mount()
}
