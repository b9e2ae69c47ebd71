package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

const (
	nrWrite  = 1
	nrUnlink = 87
	nrRename = 82
	nrFsync2 = 74
)

// slept is a call of lat ns that slept d ns at the given frames.
func slept(tid uint32, t uint64, nr uint32, lat, d uint64, preempt bool, fns ...string) event.Event {
	e := sys(tid, t, nr, 0, lat)
	e.Syscall.Sleeps = []event.Sleep{{Duration: d, Preempted: preempt,
		Stack: frames(append([]string{"__traceiter_sched_switch+0x41", "__schedule+0x618", "schedule+0x23"}, fns...)...)}}
	return e
}

var discardStack = []string{"schedule_timeout+0x77", "io_schedule_timeout+0x51", "wait_for_completion_io_timeout+0x7f",
	"submit_bio_wait+0x74", "blkdev_issue_discard+0x7e", "ext4_free_blocks+0x93f", "ext4_ext_truncate+0x91"}

var throttleStack = []string{"io_schedule_timeout+0x51", "balance_dirty_pages+0x5d2",
	"balance_dirty_pages_ratelimited_flags+0x27b", "generic_perform_write+0x15c", "ext4_buffered_write_iter+0x6c"}

func TestBlockedIO(t *testing.T) {
	tests := []struct {
		name  string
		evs   []event.Event
		sev   Severity
		words []string // nil: no blocked-in-kernel-io finding
	}{
		{"an unlink waiting for a discard, a sliver of the process's time", []event.Event{
			sys(5, 0, 0, 0, 1000),
			slept(5, 500_000_000, nrUnlink, 40_000_000, 38_000_000, false, discardStack...),
			sys(5, 2_000_000_000, 0, 0, 1000),
		}, Info, []string{"1 unlink waited for a discard", "38.00ms"}},
		{"a writer throttled most of its time", []event.Event{
			sys(5, 0, 0, 0, 1000),
			slept(5, 100_000_000, nrWrite, 200_000_000, 190_000_000, false, throttleStack...),
			slept(5, 400_000_000, nrWrite, 200_000_000, 190_000_000, false, throttleStack...),
			slept(5, 700_000_000, nrWrite, 200_000_000, 190_000_000, false, throttleStack...),
			sys(5, 1_000_000_000, 0, 0, 1000),
		}, Warning, []string{"3 write waited for dirty-page throttling", "57% of the time"}},
		{"one stall, most of a short process's life, is a one-off", []event.Event{
			sys(5, 0, 0, 0, 1000),
			slept(5, 10_000_000, nrUnlink, 185_000_000, 184_000_000, false, discardStack...),
			sys(5, 220_000_000, 0, 0, 1000),
		}, Info, []string{"1 unlink waited for a discard"}},
		{"fsync waits for the device by design", []event.Event{
			slept(5, 100, nrFsync2, 300_000_000, 290_000_000, false, "folio_wait_writeback+0x2a", "__filemap_fdatawait_range+0x7c"),
		}, 0, nil},
		{"mostly waiting for something else", []event.Event{
			func() event.Event {
				e := slept(5, 100, nrRename, 100_000_000, 20_000_000, false, discardStack...)
				e.Syscall.Sleeps = append(e.Syscall.Sleeps, event.Sleep{Duration: 79_000_000,
					Stack: frames("schedule+0x23", "rwsem_down_write_slowpath+0x2a", "down_write+0x30", "lock_rename+0x2a")})
				return e
			}(),
		}, 0, nil},
		{"writeback waited for in reclaim at a memory limit is cgroup-limit's", []event.Event{
			slept(5, 100, nrWrite, 60_000_000, 59_000_000, false, "folio_wait_writeback+0x2a", "shrink_folio_list+0x5a",
				"shrink_lruvec+0x1a", "try_to_free_mem_cgroup_pages+0x10f", "try_charge_memcg+0x1b3", "__mem_cgroup_charge+0x3a"),
		}, 0, nil},
		{"an O_SYNC write asked to wait", []event.Event{
			slept(5, 100, nrWrite, 60_000_000, 59_000_000, false, "folio_wait_writeback+0x2a", "__filemap_fdatawait_range+0x7c",
				"file_write_and_wait_range+0x8f", "ext4_sync_file+0x226", "vfs_fsync_range+0x3a", "ext4_buffered_write_iter+0xa2"),
		}, 0, nil},
		{"preempted inside the discard path is the CPU queue", []event.Event{
			slept(5, 100, nrUnlink, 40_000_000, 39_000_000, true, discardStack...),
		}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := findings(tt.evs)
			f := byID(fs, "blocked-in-kernel-io")
			if tt.words == nil {
				if f != nil {
					t.Fatalf("unexpected finding: %s", f.Title)
				}
				return
			}
			if f == nil {
				t.Fatalf("no blocked-in-kernel-io finding in %v", fs)
			}
			if f.Severity != tt.sev {
				t.Errorf("severity %s, want %s: %s", f.Severity, tt.sev, f.Summary)
			}
			for _, w := range tt.words {
				if !strings.Contains(f.Title+" "+f.Summary, w) {
					t.Errorf("%q missing from:\n%s\n%s", w, f.Title, f.Summary)
				}
			}
			// The same calls are not also slow-syscall's.
			for _, o := range fs {
				if o.ID == "slow-syscall" {
					t.Errorf("also reported as slow-syscall: %s", o.Title)
				}
			}
		})
	}
}

// Live, the file's mount and its options explain a discard, and the dirty
// limits in force when the writer was throttled explain that.
func TestBlockedIOExplains(t *testing.T) {
	b := newBlockedIO(event.ArchAMD64, true, nil)
	b.pidMounts = func(uint32) []mount {
		return []mount{{"/", "ext4", "/dev/vda", "rw,relatime"}, {"/scratch", "ext4", "/dev/loop0", "rw,relatime,rw,discard"}}
	}
	limits := map[string]string{"vm/dirty_bytes": "4194304", "vm/dirty_ratio": "0"}
	b.sysctl = func(k string) string { return limits[k] }
	un := slept(5, 100, nrUnlink, 40_000_000, 38_000_000, false, discardStack...)
	un.Syscall.Data[0] = []byte("/scratch/w5")
	wr := slept(5, 200, nrWrite, 40_000_000, 38_000_000, false, throttleStack...)
	b.Observe(&un)
	b.Observe(&wr)
	b.pidMounts = func(uint32) []mount { return nil } // unmounted since: the cache holds
	un2 := un
	un2.Time = 300
	b.Observe(&un2)
	limits["vm/dirty_bytes"] = "0" // put back by the job
	env := &Env{Host: host, threads: map[uint32]*lifetime{}, cgroups: map[uint32]uint64{}}
	var discard, dirty *Finding
	for _, f := range b.Findings(env) {
		switch f.Evidence["cause"] {
		case "discard":
			discard = &f
		case "dirty-throttle":
			dirty = &f
		}
	}
	if discard == nil || !strings.Contains(discard.Title, "2 unlink waited for a discard on /scratch (ext4 on /dev/loop0)") ||
		!strings.Contains(discard.Summary, "mounted with `discard`") || !strings.Contains(discard.Fix, "fstrim") {
		t.Errorf("discard finding: %+v", discard)
	}
	if dirty == nil || !strings.Contains(dirty.Summary, "vm.dirty_bytes=4194304") {
		t.Errorf("dirty finding: %+v", dirty)
	}
}

// On a host where opening a file stalls, the detector reads nothing.
func TestBlockedIOReadsNothingWhenReadsStall(t *testing.T) {
	b := newBlockedIO(event.ArchAMD64, true, func() bool { return false })
	b.pidMounts = func(uint32) []mount { t.Error("read the mounts on a sick host"); return nil }
	b.mounts = func() []mount { t.Error("read the host's mounts on a sick host"); return nil }
	b.sysctl = func(string) string { t.Error("read a sysctl on a sick host"); return "" }
	un := slept(5, 100, nrUnlink, 40_000_000, 38_000_000, false, discardStack...)
	un.Syscall.Data[0] = []byte("/scratch/w5")
	wr := slept(5, 200, nrWrite, 40_000_000, 38_000_000, false, throttleStack...)
	b.Observe(&un)
	b.Observe(&wr)
	if fs := b.Findings(&Env{Host: host, threads: map[uint32]*lifetime{}, cgroups: map[uint32]uint64{}}); len(fs) != 2 {
		t.Errorf("%d findings, want the discard and the throttling from the events alone", len(fs))
	}
}

// A call whose file could not be found (its fd closed before the event was
// read) joins the group of the one mount mounted with discard.
func TestBlockedIOMergesUnresolved(t *testing.T) {
	b := newBlockedIO(event.ArchAMD64, true, nil)
	scratch := mount{"/scratch", "ext4", "/dev/loop0", "rw,discard"}
	b.pidMounts = func(uint32) []mount { return []mount{{"/", "ext4", "/dev/vda", "rw"}, scratch} }
	b.mounts = func() []mount { return []mount{{"/", "ext4", "/dev/vda", "rw"}, scratch} }
	const nrFtruncate = 77
	un := slept(999999, 100, nrUnlink, 40_000_000, 38_000_000, false, discardStack...)
	un.Syscall.Data[0] = []byte("/scratch/w5")
	tr := slept(999999, 200, nrFtruncate, 30_000_000, 29_000_000, false, discardStack...)
	tr.Syscall.Args[0] = 12345 // no such fd
	b.Observe(&un)
	b.Observe(&tr)
	fs := b.Findings(&Env{Host: host, threads: map[uint32]*lifetime{}, cgroups: map[uint32]uint64{}})
	if len(fs) != 1 || !strings.Contains(fs[0].Title, "waited for a discard on /scratch") || fs[0].Evidence["count"] != uint64(2) {
		for _, f := range fs {
			t.Log(f.Title)
		}
		t.Fatalf("%d findings, want one for both calls on /scratch", len(fs))
	}
}

// An *at call's relative name is resolved against its directory
// descriptor, not the cwd: rm -rf unlinks each entry relative to the
// directory it holds open, and its files were once named in rm's cwd.
func TestBlockedIOFileAtDirfd(t *testing.T) {
	const nrUnlinkat = 263
	dir := t.TempDir()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b := newBlockedIO(event.ArchAMD64, true, nil)
	pid := uint32(os.Getpid())
	sc := event.Syscall{Nr: nrUnlinkat}
	sc.Args[0] = uint64(d.Fd())
	sc.Data[1] = []byte("libLLVM.so.1")
	if got, want := b.file(pid, &sc, "unlinkat"), filepath.Join(dir, "libLLVM.so.1"); got != want {
		t.Errorf("unlinkat(%d, %q) names %q, want %q", d.Fd(), sc.Data[1], got, want)
	}
	sc.Args[0] = uint64(0xffffff9c) // AT_FDCWD
	cwd, _ := os.Getwd()
	if got, want := b.file(pid, &sc, "unlinkat"), filepath.Join(cwd, "libLLVM.so.1"); got != want {
		t.Errorf("unlinkat(AT_FDCWD, %q) names %q, want %q", sc.Data[1], got, want)
	}
}
