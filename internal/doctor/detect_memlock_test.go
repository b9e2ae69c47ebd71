package doctor

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

const (
	mlNrMlock       = 149
	mlNrMlockall    = 151
	mlNrMunlock     = 150
	mlNrMremap      = 25
	mlNrIoUringSetp = 425
	mlNrWrite       = 1
	mlEAGAIN        = -11
	mlEPERM         = -1
	mlMapLocked     = 0x2000
)

// mlRun feeds events to a doctor whose memlock-limit reads facts with read
// (nil: offline, a capture) on a host whose header says meta.
func mlRun(t *testing.T, meta map[string]string, evs []event.Event, read func(uint32) *memlockFacts) []Finding {
	t.Helper()
	h := host
	h.Meta = meta
	d := New(h, nil)
	found := false
	for _, det := range d.detectors {
		if x, ok := det.(*memlock); ok {
			x.read, found = read, true
		}
	}
	if !found {
		t.Fatal("memlock-limit is not registered in New")
	}
	for i := range evs {
		d.Observe(&evs[i])
	}
	return checked(d.Report()).Findings
}

// mlLimited is a process with RLIMIT_MEMLOCK 64 KiB holding lck bytes
// locked, on a host with 20 GiB available.
func mlLimited(reads *int, soft int64, lck uint64) func(uint32) *memlockFacts {
	return func(uint32) *memlockFacts {
		*reads++
		return &memlockFacts{Soft: soft, Hard: soft, Limits: true, VmLck: lck, VmSize: 2 << 20, Status: true, Available: 20 << 30}
	}
}

// mlockLoop: n mlock calls of 256 KiB, one a millisecond, each failing
// with ENOMEM.
func mlockLoop(pid uint32, n int) []event.Event {
	var evs []event.Event
	for i := range uint64(n) {
		evs = append(evs, sys(pid, 1e9+i*1e6, mlNrMlock, enomem, 2000, 0x7f0000000000, 256<<10))
	}
	return evs
}

// A process retrying a 256 KiB mlock with 48 KiB locked against a 64 KiB
// limit: a warning that names the limit, what it held, what it asked,
// that memory is free, and the fix; read once, since the read found it at
// the limit; not map-count-limit's or memory-refused's.
func TestMemlockMeasured(t *testing.T) {
	reads := 0
	fs := mlRun(t, nil, mlockLoop(7, 50), mlLimited(&reads, 64<<10, 48<<10))
	f := byID(fs, MemlockLimit)
	if f == nil {
		t.Fatalf("no memlock-limit finding: %+v", fs)
	}
	if f.Severity != Warning || f.Evidence["failures"] != uint64(50) || f.Evidence["basis"] != "measured" ||
		f.Evidence["requested_bytes"] != uint64(256<<10) || f.Evidence["vm_lck"] != uint64(48<<10) {
		t.Errorf("severity %v, evidence %+v", f.Severity, f.Evidence)
	}
	wantWords(t, f, "RLIMIT_MEMLOCK (64 KiB)", "64 KiB soft, 64 KiB hard", "48 KiB locked (VmLck)", "256 KiB more",
		"20.0 GiB available", "not short", "ENOMEM", "kept retrying")
	for _, w := range []string{"ulimit -l", "LimitMEMLOCK=", "--ulimit memlock=", "CAP_IPC_LOCK"} {
		if !strings.Contains(f.Fix, w) {
			t.Errorf("fix lacks %q: %s", w, f.Fix)
		}
	}
	if f.Key != "memlock-limit:prog" || len(f.Procs) != 1 || f.Procs[0].PID != 7 {
		t.Errorf("key %q, procs %+v", f.Key, f.Procs)
	}
	if reads != 1 {
		t.Errorf("%d reads, want 1", reads)
	}
	if byID(fs, MapCountLimit) != nil || byID(fs, MemoryRefused) != nil {
		t.Error("also reported as map-count-limit or memory-refused")
	}
}

// The benign cousin: one mlock fails, and the program goes on unlocked
// (a database trying to pin its buffer pool): no finding, and the nearest
// miss says why.
func TestMemlockProbedOnce(t *testing.T) {
	evs := mlockLoop(7, 1)
	for i := range uint64(200) {
		evs = append(evs, sys(7, 2e9+i*1e6, mlNrWrite, 512, 3000, 1, 0x1000, 512))
	}
	evs = append(evs, exitOf(7, 3e9, 0))
	reads := 0
	fs := mlRun(t, nil, evs, mlLimited(&reads, 64<<10, 48<<10))
	if f := byID(fs, MemlockLimit); f != nil {
		t.Errorf("one handled failure reported: %s", f.Title)
	}
	// Twice (a probe of mlock and its one fallback) is still handled.
	fs = mlRun(t, nil, append(mlockLoop(7, 2), sys(7, 2e9, mlNrWrite, 512, 3000, 1, 0x1000, 512)), mlLimited(&reads, 64<<10, 48<<10))
	if f := byID(fs, MemlockLimit); f != nil {
		t.Errorf("two handled failures reported: %s", f.Title)
	}
}

// One failure, then the program exits non-zero: it gave up, a warning.
func TestMemlockGaveUp(t *testing.T) {
	reads := 0
	fs := mlRun(t, nil, append(mlockLoop(7, 1), exitOf(7, 2e9, 1)), mlLimited(&reads, 64<<10, 0))
	f := byID(fs, MemlockLimit)
	if f == nil {
		t.Fatalf("no finding for a process that gave up: %+v", fs)
	}
	wantWords(t, f, "gave up", "status 1", "0 KiB locked")
	if f.Evidence["exit_code"] != 1 {
		t.Errorf("evidence %+v", f.Evidence)
	}
}

// mlock's ENOMEM far below the limit is a range not mapped (or the map
// count on a split): not this finding. A process with CAP_IPC_LOCK, or an
// unlimited limit, is not refused by it either.
func TestMemlockNotTheLimit(t *testing.T) {
	reads := 0
	var evs []event.Event
	for i := range uint64(1000) { // one every 10 ms for 10 s
		evs = append(evs, sys(7, 1e9+i*1e7, mlNrMlock, enomem, 2000, 0x7f0000000000, 256<<10))
	}
	if f := byID(mlRun(t, nil, evs, mlLimited(&reads, 8<<20, 0)), MemlockLimit); f != nil {
		t.Errorf("256 KiB refused with nothing locked against 8 MiB reported: %s", f.Title)
	}
	if reads != mlReadsEach {
		t.Errorf("%d reads of a process not at its limit, want %d", reads, mlReadsEach)
	}
	for _, read := range []func(uint32) *memlockFacts{
		func(uint32) *memlockFacts {
			return &memlockFacts{Soft: 64 << 10, Hard: 64 << 10, Limits: true, VmLck: 48 << 10, Status: true, IPCLock: true}
		},
		func(uint32) *memlockFacts { return &memlockFacts{Soft: -1, Hard: -1, Limits: true, Status: true} },
	} {
		if f := byID(mlRun(t, nil, evs, read), MemlockLimit); f != nil {
			t.Errorf("reported though the limit does not apply: %s", f.Title)
		}
	}
}

// mmap's ENOMEM (the map count, the commit limit, RLIMIT_AS) is not
// memlock-limit's, even with MAP_LOCKED; its EAGAIN with MAP_LOCKED is, and
// not map-count-limit's. From a capture the limit is inferred, and said
// so.
func TestMemlockMmapFromCapture(t *testing.T) {
	var enomems, eagains []event.Event
	for i := range uint64(20) {
		enomems = append(enomems, sys(7, 1e9+i*1e6, nrMmap, enomem, 3000, 0, 1<<20, protRW, mapPrivAnon|mlMapLocked, ^uint64(0), 0))
		eagains = append(eagains, sys(7, 1e9+i*1e6, nrMmap, mlEAGAIN, 3000, 0, 1<<20, protRW, mapPrivAnon|mlMapLocked, ^uint64(0), 0))
	}
	if f := byID(mlRun(t, hostMeta(), enomems, nil), MemlockLimit); f != nil {
		t.Errorf("mmap ENOMEM reported as memlock-limit: %s", f.Title)
	}
	fs := mlRun(t, hostMeta(), eagains, nil)
	f := byID(fs, MemlockLimit)
	if f == nil {
		t.Fatalf("no finding for mmap(MAP_LOCKED) EAGAIN: %+v", fs)
	}
	if byID(fs, MapCountLimit) != nil || byID(fs, MemoryRefused) != nil {
		t.Error("mmap EAGAIN also reported as map-count-limit or memory-refused")
	}
	if f.Evidence["basis"] != "inferred" || f.Evidence["requested_bytes"] != uint64(1<<20) {
		t.Errorf("evidence %+v", f.Evidence)
	}
	wantWords(t, f, "inferred", "capture", "1.0 MiB", "EAGAIN", "20.0 GiB available")
}

// mlockall(MCL_CURRENT) is refused when the whole address space would
// pass the limit: the finding says VmSize, not VmLck. A limit of 0
// refuses with EPERM.
func TestMemlockMlockallAndZero(t *testing.T) {
	var evs []event.Event
	for i := range uint64(5) {
		evs = append(evs, sys(7, 1e9+i*1e6, mlNrMlockall, enomem, 2000, 3))
	}
	reads := 0
	f := byID(mlRun(t, nil, evs, mlLimited(&reads, 1<<20, 0)), MemlockLimit)
	if f == nil {
		t.Fatal("no finding for mlockall")
	}
	wantWords(t, f, "MCL_CURRENT", "2.0 MiB of it (VmSize)", "1.0 MiB soft")
	evs = nil
	for i := range uint64(5) {
		evs = append(evs, sys(7, 1e9+i*1e6, mlNrMlock, mlEPERM, 2000, 0x7f0000000000, 4096))
	}
	f = byID(mlRun(t, nil, evs, mlLimited(&reads, 0, 0)), MemlockLimit)
	if f == nil {
		t.Fatal("no finding for mlock EPERM under a limit of 0")
	}
	wantWords(t, f, "EPERM", "limit of 0")
}

func TestParseMemlockStatus(t *testing.T) {
	text := "Name:\tmemlock\nVmPeak:\t    2628 kB\nVmSize:\t    2560 kB\nVmLck:\t      64 kB\nCapEff:\t000001fffffbbfff\n"
	lck, size, ipc, ok := parseMemlockStatus(text)
	if lck != 64<<10 || size != 2560<<10 || ipc || !ok {
		t.Errorf("got %d %d %v %v", lck, size, ipc, ok)
	}
	_, _, ipc, _ = parseMemlockStatus("CapEff:\t000001ffffffffff\n")
	if !ipc {
		t.Error("CAP_IPC_LOCK not seen in a full set")
	}
}

// Live, on a host whose /proc reads would stall (a full audit backlog),
// the doctor reads nothing: the finding is inferred and says why, not
// that the process was gone.
func TestMemlockReadsStall(t *testing.T) {
	fs := mlRun(t, nil, mlockLoop(7, 20), func(uint32) *memlockFacts { return nil })
	f := byID(fs, MemlockLimit)
	if f == nil {
		t.Fatalf("no finding: %+v", fs)
	}
	if f.Evidence["basis"] != "inferred" {
		t.Errorf("evidence %+v", f.Evidence)
	}
	wantWords(t, f, "did not read", "stall", "inferred", "range not mapped")
	if strings.Contains(f.Summary, "gone") || strings.Contains(f.Summary, "capture") {
		t.Errorf("says the process was gone, or a capture: %s", f.Summary)
	}
}

// malloc after mlockall(MCL_FUTURE), from a capture: brk refuses to move
// the break, glibc falls back to mmap, which fails with EAGAIN (measured:
// 21 of each, scenarios/errno/README.md). One cause, one finding: the
// limit on locked memory, not a map count inferred from the failed brk.
func TestMemlockMallocAfterMlockall(t *testing.T) {
	var evs []event.Event
	for i := range uint64(21) {
		tm := 1e9 + i*1e6
		evs = append(evs, sys(7, tm, mcNrBrk, 0x13c8d000, 1000, 0x13cb1000),
			sys(7, tm+1000, nrMmap, mlEAGAIN, 3000, 0, 1<<20, protRW, mapPrivAnon, ^uint64(0), 0))
	}
	fs := mlRun(t, hostMeta(), evs, nil)
	if byID(fs, MemlockLimit) == nil {
		t.Errorf("no memlock-limit finding: %+v", fs)
	}
	if f := byID(fs, MapCountLimit); f != nil {
		t.Errorf("the failed brk also inferred to be the map count: %s", f.Title)
	}
}
