package doctor

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
)

// The kernel stacks of a reader's fault waits, as the kernel took them.
var (
	fileFaultStack = kframes("__schedule+0x618", "schedule+0x23", "io_schedule+0x3f", "folio_wait_bit_common+0x110",
		"filemap_fault+0x739", "__do_fault+0x34", "do_fault+0x319", "__handle_mm_fault+0x7fc", "handle_mm_fault+0xd0",
		"exc_page_fault+0x176", "asm_exc_page_fault+0x22")
	swapStack = kframes("__schedule+0x618", "schedule+0x23", "io_schedule+0x3f", "folio_wait_bit_common+0x110",
		"swap_read_folio+0x40", "do_swap_page+0x300", "__handle_mm_fault+0x7fc", "handle_mm_fault+0xd0",
		"exc_page_fault+0x176", "asm_exc_page_fault+0x22")
	faultLockStack = kframes("__schedule+0x618", "schedule+0x23", "rwsem_down_read_slowpath+0x2a0",
		"down_read_killable+0x50", "lock_mm_and_find_vma+0x40", "do_user_addr_fault+0x1a0", "exc_page_fault+0x176",
		"asm_exc_page_fault+0x22")
)

func kframes(names ...string) []event.Frame {
	out := make([]event.Frame, len(names))
	for i, n := range names {
		out[i] = event.Frame{Addr: 0xffffffff81000000 + uint64(i), Name: n}
	}
	return out
}

// thrashRun is n windows of one reader (pid), 250 ms apart, each asleep
// sleep ns at stack on a 96 MiB mapping of /var/tmp/data, in a cgroup of
// 32 MiB whose refault counter grows by refaults a window.
func thrashRun(pid uint32, n int, sleep uint64, stack []event.Frame, refaults uint64, mem event.MemFacts) []event.Event {
	var evs []event.Event
	for i := range n {
		t := uint64(1e9) + uint64(i)*250*ms
		m := mem
		m.RefaultFile = 1000 + uint64(i)*refaults
		evs = append(evs, event.Event{Kind: event.KindFaultWait, Time: t, PID: pid, TID: pid, Comm: "reader",
			FaultWait: event.FaultWait{Start: t - 250*ms, Duration: sleep, Count: 20, MajFaults: 3, MinFaults: 900,
				Lo: 0x7f0000000000, Hi: 0x7f0005000000,
				Places: []event.FaultPlace{{Duration: sleep, Count: 20, Addr: 0x7f0000100000, Stack: stack,
					Map: event.Mapping{Start: 0x7f0000000000, End: 0x7f0006000000, Path: "/var/tmp/data", Inode: 12}}},
				Mem: m}})
	}
	return evs
}

var limited = event.MemFacts{Read: true, Cgroup: "/jobs/reader", Max: 32 << 20, Current: 32 << 20}

func TestPageCacheThrash(t *testing.T) {
	host := event.MemFacts{Read: true, Cgroup: "/", Host: true, Max: event.NoLimit, High: event.NoLimit}
	v2 := limited
	v2.High = event.NoLimit
	two := append(thrashRun(7, 8, 100*ms, fileFaultStack, 4000, limited), thrashRun(8, 8, 100*ms, fileFaultStack, 4000, limited)...)
	// The last window read as the process left its cgroup (an older
	// writer): the cgroup it lived in still counts.
	leaving := thrashRun(7, 8, 100*ms, fileFaultStack, 4000, limited)
	leaving[7].FaultWait.Mem = host
	// Little sleep, much reclaim inside the faults: both are time lost.
	reclaiming := thrashRun(7, 8, 10*ms, fileFaultStack, 4000, limited)
	for i := range 8 {
		reclaiming = append(reclaiming, event.Event{Kind: event.KindReclaim, Time: 1e9 + uint64(i)*250*ms + ms, PID: 7, TID: 7,
			Reclaim: event.Reclaim{Duration: 100 * ms, Pages: 4000, Nr: -1}})
	}
	tests := []struct {
		name  string
		evs   []event.Event
		sev   Severity
		words []string // nil: no finding
	}{
		{"pass after pass under a limit", thrashRun(7, 8, 100*ms, fileFaultStack, 4000, limited), Warning,
			[]string{"reader[7]", "/var/tmp/data", "96.0 MiB", "32.0 MiB", "/jobs/reader", "28000 pages", "memory.limit_in_bytes", "800.00ms asleep in 160 page faults"}},
		{"memory.max on cgroup v2", thrashRun(7, 8, 100*ms, fileFaultStack, 4000, v2), Warning, []string{"(memory.max;"}},
		{"two readers of one file", two, Warning, []string{"2 processes", "reader[7]", "reader[8]"}},
		{"the last read outside the cgroup", leaving, Warning, []string{"/jobs/reader"}},
		{"reclaim inside faults", reclaiming, Warning, []string{"800.00ms reclaiming"}},
		{"a cold read: nothing read twice", thrashRun(7, 8, 100*ms, fileFaultStack, 0, limited), Info, []string{"a first read"}},
		{"a few refaults", thrashRun(7, 8, 100*ms, fileFaultStack, 30, limited), Info, []string{"a first read"}},
		{"no limit: the host's counters", thrashRun(7, 8, 100*ms, fileFaultStack, 4000, host), Info, []string{"on the host"}},
		{"a small share of the time", thrashRun(7, 8, 20*ms, fileFaultStack, 4000, limited), Info, []string{"/var/tmp/data"}},
		{"felt by no one", thrashRun(7, 8, 10*ms, fileFaultStack, 4000, limited), Info, nil},
		{"anonymous memory swapped in", thrashRun(7, 8, 100*ms, swapStack, 4000, limited), Info, nil},
		{"the mmap lock", thrashRun(7, 8, 100*ms, faultLockStack, 4000, limited), Info, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := byID(findings(tt.evs), PageCacheThrash)
			if tt.words == nil {
				if f != nil {
					t.Fatalf("want none, got %s %s: %s", f.Severity, f.Title, f.Summary)
				}
				return
			}
			if f == nil {
				t.Fatal("no finding")
			}
			if f.Severity != tt.sev {
				t.Errorf("severity %v, want %v: %s", f.Severity, tt.sev, f.Title)
			}
			text := f.Title + " " + f.Summary
			for _, w := range tt.words {
				if !strings.Contains(text, w) {
					t.Errorf("%q missing from %s", w, text)
				}
			}
			if !strings.HasSuffix(f.Key, "/var/tmp/data") {
				t.Errorf("key %q", f.Key)
			}
		})
	}
}

// A memory cgroup made during the trace counts from zero: its reader
// refaulted for seconds of fast reads before the first slow one, the
// doctor's first look. What was read from disk is still compared with the
// refaults over the span /proc/PID/io covers, the first look on; with the
// cgroup made earlier, the refaults are that span's too.
func TestPageCacheThrashCgroupMadeDuringTrace(t *testing.T) {
	for _, made := range []bool{true, false} {
		// Disk reads: 4 refaults a page read from disk over the span. Born,
		// the count is 1,000 more than the span's.
		fake := &fakeReads{mem: limited, grow: 4000, made: made, disk: 1000 * 4096}
		f := readFindings(t, fake, readRun(nrPread, fileFd, 60*ms, 10*ms, readWaitStack), nil)
		if f == nil {
			t.Fatal("no finding")
		}
		want, are := uint64(28000), "between the first and last reads"
		if made {
			want, are = 29000, "made during the trace"
		}
		if got := f.Evidence["refaulted_pages"]; got != want {
			t.Errorf("made %v: refaulted_pages = %v, want %d", made, got, want)
		}
		if s, _ := f.Evidence["refaulted_pages_are"].(string); !strings.Contains(s, are) {
			t.Errorf("made %v: refaulted_pages_are %q, want %q in it", made, s, are)
		}
		if got := f.Evidence["refaulted_share_of_read_from_disk"]; got != 4.0 {
			t.Errorf("made %v: share %v, want 4 (the span's refaults over the span's disk reads)", made, got)
		}
	}
}

// The evidence carries the exact sums of the windows.
func TestPageCacheThrashEvidence(t *testing.T) {
	f := byID(findings(thrashRun(7, 8, 100*ms, fileFaultStack, 4000, limited)), PageCacheThrash)
	if f == nil {
		t.Fatal("no finding")
	}
	for k, want := range map[string]any{"fault_sleep_ns": uint64(800 * ms), "fault_sleeps": uint64(160), "major_faults": uint64(24),
		"minor_faults": uint64(7200), "refaulted_pages": uint64(28000), "limit_bytes": uint64(32 << 20),
		"mapping_bytes": uint64(96 << 20), "file": "/var/tmp/data", "cgroup": "/jobs/reader"} {
		if got := f.Evidence[k]; got != want {
			t.Errorf("%s = %v, want %v", k, got, want)
		}
	}
	if len(f.Procs) != 1 || f.Procs[0].PID != 7 {
		t.Errorf("procs %v", f.Procs)
	}
}

// The kernel stacks of read calls: waiting for a file page the read
// brought in, and reclaiming room for it at the cgroup's limit.
var (
	readWaitStack = kframes("__schedule+0x618", "schedule+0x23", "io_schedule+0x3f", "folio_wait_bit_common+0x110",
		"filemap_get_pages+0x749", "filemap_read+0xda", "vfs_read+0x23a", "__x64_sys_pread64+0xa3", "do_syscall_64+0x71",
		"entry_SYSCALL_64_after_hwframe+0x76")
	readReclaimStack = kframes("__schedule+0x618", "__cond_resched+0x35", "shrink_node+0x203", "do_try_to_free_pages+0xbd",
		"try_to_free_mem_cgroup_pages+0x101", "try_charge_memcg+0x1b0", "charge_memcg+0x2f", "__mem_cgroup_charge+0x2c",
		"filemap_add_folio+0x7a", "page_cache_ra_order+0x214", "filemap_readahead.isra.0+0x75", "filemap_get_pages+0x2e8",
		"filemap_read+0xda", "vfs_read+0x23a", "__x64_sys_pread64+0xa3")
	sockReadStack = kframes("__schedule+0x618", "schedule+0x23", "schedule_timeout+0xc1", "wait_woken+0x40",
		"sk_wait_data+0x120", "tcp_recvmsg_locked+0x200", "tcp_recvmsg+0x80", "inet_recvmsg+0x50", "sock_read_iter+0x90",
		"vfs_read+0x23a", "ksys_read+0x66")
)

const (
	nrReadT  = 0
	nrPread  = 17
	nrReadv  = 19
	sockFd   = 5
	fileFd   = 3
	dataPath = "/var/tmp/data"
)

// fakeReads is the host as the detector reads it: fd 3 is the data file
// (96 MiB), fd 5 a socket, and the memory cgroup's refault counter grows
// by grow at each read of it.
type fakeReads struct {
	mem  event.MemFacts
	grow uint64
	n    uint64
	// disk: bytes read from storage between reads of /proc/PID/io; 0: as
	// many as the refaults (every page read from disk a refault).
	disk, nio uint64
	// made: the memory cgroup was made during the trace.
	made bool
	// now: the counter as read apart from a process (the watch, the
	// report); gone: the cgroup is no longer there to read.
	now  uint64
	gone bool
}

func (f *fakeReads) refaults(string) (uint64, bool) {
	if f.gone || f.now == 0 {
		return 0, false
	}
	return f.now, true
}

func (f *fakeReads) diskRead(uint32) (uint64, bool) {
	step := f.disk
	if step == 0 {
		step = f.grow * 4096
	}
	n := 5000 + f.nio*step
	f.nio++
	return n, true
}

func (*fakeReads) can() bool          { return true }
func (f *fakeReads) born(string) bool { return f.made }
func (f *fakeReads) memFacts(uint32) (event.MemFacts, bool) {
	m := f.mem
	m.RefaultFile = 1000 + f.n*f.grow
	f.n++
	return m, true
}
func (*fakeReads) fdPath(_ uint32, fd int32) string {
	if fd == fileFd {
		return dataPath
	}
	return "socket:[4242]"
}
func (*fakeReads) size(string) uint64 { return 96 << 20 }
func (*fakeReads) openFiles(uint32) []string {
	return []string{"/dev/null", "socket:[4242]", dataPath, "/proc/self/status"}
}

// readRun is 8 slow read calls of one reader (pid 7), 250 ms apart, each
// asleep sleep ns at stack (nr on fd), with reclaim ns of memory-cgroup
// reclaim inside it.
func readRun(nr uint32, fd uint64, sleep, reclaim uint64, stack []event.Frame) []event.Event {
	var evs []event.Event
	for i := range 8 {
		t := uint64(1e9) + uint64(i)*250*ms
		e := sys(7, t, nr, 128<<10, sleep+reclaim, fd, 0x7f0000000000, 128<<10, uint64(i)<<17)
		e.Comm = "reader"
		e.Syscall.Sleeps = []event.Sleep{{Duration: sleep, Count: 4, Stack: stack}}
		if reclaim > 0 {
			e.Syscall.Sleeps = append(e.Syscall.Sleeps, event.Sleep{Duration: reclaim, Count: 1, Stack: readReclaimStack})
			evs = append(evs, event.Event{Kind: event.KindReclaim, Time: t - ms, PID: 7, TID: 7, Comm: "reader",
				Reclaim: event.Reclaim{Duration: reclaim, Pages: 32, Nr: int32(nr)}})
		}
		evs = append(evs, e)
	}
	return evs
}

// reclaimOnly keeps evs' reclaim events: a run whose read calls were
// neither slow nor sampled.
func reclaimOnly(evs []event.Event) []event.Event {
	var out []event.Event
	for _, e := range evs {
		if e.Kind == event.KindReclaim {
			out = append(out, e)
		}
	}
	return out
}

// thrashDoctor is a doctor whose page-cache-thrash detector reads the
// host from fake, and that detector, its watch's clock stopped: a test
// ticks it.
func thrashDoctor(t *testing.T, fake *fakeReads) (*Doctor, *thrash) {
	t.Helper()
	saved := thrashHostReads
	thrashHostReads = func(*Host) thrashReads { return fake }
	defer func() { thrashHostReads = saved }()
	d := New(host, nil)
	for _, det := range d.detectors {
		if x, ok := det.(*thrash); ok {
			x.watchEvery = 0
			return d, x
		}
	}
	t.Fatal("no page-cache-thrash detector")
	return nil, nil
}

// readFindings runs the doctor over evs with the host read from fake, and
// the kernel's exact counts cells when given.
func readFindings(t *testing.T, fake *fakeReads, evs []event.Event, cells []stat.Cell) *Finding {
	t.Helper()
	d, _ := thrashDoctor(t, fake)
	for i := range evs {
		d.Observe(&evs[i])
	}
	if cells != nil {
		d.Counts(cells)
	}
	return byID(checked(d.Report()).Findings, PageCacheThrash)
}

func TestPageCacheThrashRead(t *testing.T) {
	host := event.MemFacts{Read: true, Cgroup: "/", Host: true, Max: event.NoLimit, High: event.NoLimit}
	// The kernel's exact count: 6,144 pread64 calls taking 1.6 s in the
	// kernel, of which 100 ms waiting for a CPU.
	exact := []stat.Cell{{Key: stat.Key{PID: 7, Nr: nrPread}, Count: 6144, Total: 1600 * ms, Runq: 100 * ms}}
	// A reader blocked on a socket most of its time: its read calls' time
	// is not the file's.
	sock := readRun(nrPread, fileFd, 20*ms, 0, readWaitStack)
	for i := range 8 {
		e := sys(7, uint64(1e9)+uint64(i)*250*ms+100*ms, nrReadT, 100, 200*ms, sockFd, 0x7f0000000000, 4096)
		e.Comm = "reader"
		e.Syscall.Sleeps = []event.Sleep{{Duration: 200 * ms, Count: 1, Stack: sockReadStack}}
		sock = append(sock, e)
	}
	tests := []struct {
		name     string
		evs      []event.Event
		mem      event.MemFacts
		refaults uint64
		cells    []stat.Cell
		sev      Severity
		words    []string // nil: no finding
	}{
		{"pass after pass under a limit", readRun(nrPread, fileFd, 60*ms, 10*ms, readWaitStack), limited, 4000, exact, Warning,
			[]string{"reader[7]", dataPath, "96.0 MiB", "32.0 MiB", "/jobs/reader", "28000 pages", "in pread64", "took 1.50s in the kernel",
				"480.00ms of it seen asleep", "80.00ms reclaiming"}},
		{"read(), no exact counts (a capture)", readRun(nrReadT, fileFd, 120*ms, 0, readWaitStack), limited, 4000, nil, Warning,
			[]string{"in read", "took 960.00ms in the kernel"}},
		{"readv", readRun(nrReadv, fileFd, 120*ms, 0, readWaitStack), limited, 4000, nil, Warning, []string{"in readv"}},
		{"a cold read: nothing read twice", readRun(nrPread, fileFd, 60*ms, 0, readWaitStack), limited, 0, exact, Info,
			[]string{"a first read"}},
		{"a few refaults: one pass under the limit", readRun(nrPread, fileFd, 60*ms, 0, readWaitStack), limited, 30, exact, Info,
			[]string{"a first read"}},
		{"no limit: the host's counters", readRun(nrPread, fileFd, 60*ms, 0, readWaitStack), host, 4000, exact, Info,
			[]string{"on the host"}},
		{"a socket's reads are not the file's", sock, limited, 4000, []stat.Cell{{Key: stat.Key{PID: 7, Nr: nrPread}, Count: 100,
			Total: 200 * ms}, {Key: stat.Key{PID: 7, Nr: nrReadT}, Count: 8, Total: 1600 * ms}}, Info, []string{dataPath}},
		{"felt by no one", readRun(nrPread, fileFd, 10*ms, 0, readWaitStack), limited, 4000,
			[]stat.Cell{{Key: stat.Key{PID: 7, Nr: nrPread}, Count: 6144, Total: 90 * ms, Runq: 10 * ms}}, Info, nil},
		{"refaults a few percent of what was read from disk: files read once", readRun(nrPread, fileFd, 60*ms, 0, readWaitStack),
			limited, 4000, exact, Info, []string{"a first read", "28000 evicted pages", "3% of the"}},
		{"reclaim alone is cgroup-limit's: a cold read under the limit", readRun(nrPread, fileFd, 0, 60*ms, readWaitStack), limited, 0, exact, Info, nil},
		// A device fast enough that no read waits past the slow bar: the
		// device's reads, all refaults, and the kernel's exact read time.
		{"a fast device: no wait seen", readRun(nrPread, fileFd, 0, 60*ms, readWaitStack), limited, 4000, exact, Warning,
			[]string{"none slow enough to carry its stack", "100% of it pages the cgroup had read before", "took 1.50s in the kernel"}},
		// The same, with no read kept as an event (none slow, none
		// sampled): the file is the one the reader held open.
		{"a fast device: no read kept", reclaimOnly(readRun(nrPread, fileFd, 0, 60*ms, readWaitStack)), limited, 4000, exact, Warning,
			[]string{"none slow enough to carry its stack", dataPath, "96.0 MiB"}},
		{"a socket's waits", readRun(nrReadT, sockFd, 200*ms, 0, sockReadStack), limited, 4000, exact, Info, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeReads{mem: tt.mem, grow: tt.refaults}
			if strings.HasPrefix(tt.name, "refaults a few percent") {
				fake.disk = 32 * tt.refaults * 4096
			}
			f := readFindings(t, fake, tt.evs, tt.cells)
			if tt.words == nil {
				if f != nil {
					t.Fatalf("want none, got %s %s: %s", f.Severity, f.Title, f.Summary)
				}
				return
			}
			if f == nil {
				t.Fatal("no finding")
			}
			if f.Severity != tt.sev {
				t.Errorf("severity %v, want %v: %s", f.Severity, tt.sev, f.Title)
			}
			text := f.Title + " " + f.Summary
			for _, w := range tt.words {
				if !strings.Contains(text, w) {
					t.Errorf("%q missing from %s", w, text)
				}
			}
			if !strings.HasSuffix(f.Key, dataPath) {
				t.Errorf("key %q", f.Key)
			}
		})
	}
}

// The evidence carries the exact sums: the stacks' waits, the reclaim
// passes, the kernel's count of the calls and their time.
func TestPageCacheThrashReadEvidence(t *testing.T) {
	exact := []stat.Cell{{Key: stat.Key{PID: 7, Nr: nrPread}, Count: 6144, Total: 1600 * ms, Runq: 100 * ms}}
	f := readFindings(t, &fakeReads{mem: limited, grow: 4000}, readRun(nrPread, fileFd, 60*ms, 10*ms, readWaitStack), exact)
	if f == nil {
		t.Fatal("no finding")
	}
	for k, want := range map[string]any{"read_wait_ns": uint64(480 * ms), "read_waits": uint64(32), "reclaim_in_reads_ns": uint64(80 * ms),
		"read_time_ns": uint64(1500 * ms), "read_calls": uint64(6144), "time_lost_ns": uint64(1500 * ms),
		"refaulted_pages": uint64(28000), "limit_bytes": uint64(32 << 20), "file_bytes": uint64(96 << 20),
		"working_set_bytes": uint64(96 << 20), "traced_bytes_read": uint64(8 << 17), "file": dataPath, "cgroup": "/jobs/reader"} {
		if got := f.Evidence[k]; got != want {
			t.Errorf("%s = %v, want %v", k, got, want)
		}
	}
	if calls, _ := f.Evidence["traced_read_calls"].(map[string]uint64); calls["pread64"] != 8 {
		t.Errorf("traced_read_calls %v", f.Evidence["traced_read_calls"])
	}
	if !strings.Contains(f.Fix, "raise memory.limit_in_bytes to more than the working set (96.0 MiB here") {
		t.Errorf("fix: %s", f.Fix)
	}
}

// A reader of a mapping that also reads files from the cache: its reads
// never waited for a page, and their time is not the mapping's loss.
func TestPageCacheThrashMappingWithCachedReads(t *testing.T) {
	evs := thrashRun(7, 8, 100*ms, fileFaultStack, 4000, limited)
	for i := range 8 {
		e := sys(7, uint64(1e9)+uint64(i)*250*ms+ms, nrPread, 128<<10, 50*ms, fileFd, 0x7f0000000000, 128<<10, 0)
		e.Comm = "reader"
		evs = append(evs, e)
	}
	exact := []stat.Cell{{Key: stat.Key{PID: 7, Nr: nrPread}, Count: 6144, Total: 1600 * ms}}
	f := readFindings(t, &fakeReads{mem: limited, grow: 4000}, evs, exact)
	if f == nil {
		t.Fatal("no finding")
	}
	if got := f.Evidence["time_lost_ns"]; got != uint64(800*ms) {
		t.Errorf("time_lost_ns %v, want the faults' 800 ms", got)
	}
	if !strings.Contains(f.Title, "lost in page faults") {
		t.Errorf("title %s", f.Title)
	}
}

// The reader's memory cgroup was last read with its last event, which may
// trail its end by passes (on a fast device few events cross over), and
// the cgroup is removed before the report. The watch read it on its own
// clock after that last event: its read counts.
func TestThrashWatchOutlivesTheCgroup(t *testing.T) {
	fake := &fakeReads{mem: limited, now: 61000}
	d, th := thrashDoctor(t, fake)
	evs := thrashRun(7, 8, 100*ms, fileFaultStack, 4000, limited)
	for i := range evs {
		d.Observe(&evs[i])
	}
	if th.watch == nil {
		t.Fatal("no watch on the reader's limited cgroup")
	}
	th.watch.tick()
	fake.gone = true
	th.watch.tick() // gone: the last read stays
	f := byID(checked(d.Report()).Findings, PageCacheThrash)
	if f == nil {
		t.Fatal("no finding")
	}
	// From the first read (1,000) to the watch's last (61,000), not to
	// the last event's (29,000).
	if got := f.Evidence["refaulted_pages"]; got != uint64(60000) {
		t.Errorf("refaulted_pages = %v, want 60000", got)
	}
}

// A process in no limited cgroup (the host's counters) is not watched.
func TestThrashWatchOnlyLimited(t *testing.T) {
	fake := &fakeReads{mem: event.MemFacts{Read: true, Cgroup: "/", Host: true, Max: event.NoLimit, High: event.NoLimit}, now: 61000}
	d, th := thrashDoctor(t, fake)
	evs := thrashRun(7, 8, 100*ms, fileFaultStack, 4000, fake.mem)
	for i := range evs {
		d.Observe(&evs[i])
	}
	if th.watch != nil {
		t.Error("the host's counters are watched")
	}
}
