package doctor

import (
	"os"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
	hostfacts "github.com/sysray/sysray/internal/host"
)

const (
	mcNrMprotect = 10
	mcNrMunmap   = 11
	mcNrBrk      = 12
)

// mcRun feeds events to a doctor on a host with meta (a capture's header)
// whose map-count-limit reads facts with read (nil: offline).
func mcRun(t *testing.T, meta map[string]string, evs []event.Event, read func(uint32) *mapFacts) ([]Finding, *Report) {
	t.Helper()
	h := host
	h.Meta = meta
	d := New(h, nil)
	found := false
	for _, det := range d.detectors {
		if x, ok := det.(*mapCount); ok {
			x.read, found = read, true
		}
	}
	if !found {
		t.Fatal("map-count-limit is not registered in New")
	}
	for i := range evs {
		d.Observe(&evs[i])
	}
	r := checked(d.Report())
	return r.Findings, r
}

// hostMeta is a host with 20 GiB available, heuristic overcommit and the
// default map limit.
func hostMeta() map[string]string {
	return map[string]string{"vm.max_map_count": "65530", "mem_available": "21474836480", "vm.overcommit_memory": "0",
		"commit_limit": "12638253056", "committed_as": "1770266624"}
}

// stuck is a process retrying a 256 KiB mmap and an mprotect every
// millisecond, each failing with ENOMEM, n times.
func stuck(pid uint32, n int) []event.Event {
	var evs []event.Event
	for i := range uint64(n) {
		tm := 1e9 + i*1e6
		evs = append(evs, sys(pid, tm, nrMmap, enomem, 3000, 0, 256<<10, protRW, mapPrivAnon, ^uint64(0), 0),
			sys(pid, tm+1000, mcNrMprotect, enomem, 2000, 0x7f0000001000, 4096, 1))
	}
	return evs
}

func atLimit(reads *int, count int) func(uint32) *mapFacts {
	return func(uint32) *mapFacts {
		*reads++
		return &mapFacts{Count: count, RSS: 900 << 10, AS: -1, Data: -1, Rlimits: true, Meta: hostMeta()}
	}
}

// A process at its map count with 20 GiB free: critical, with the count,
// the limit, the memory available, the exact failures, and a key that
// names the program only. Its facts are read once: the first read found
// it at the limit.
func TestMapCountMeasured(t *testing.T) {
	reads := 0
	fs, _ := mcRun(t, nil, stuck(7, 50), atLimit(&reads, 65531))
	f := byID(fs, MapCountLimit)
	if f == nil {
		t.Fatalf("no map-count-limit finding: %+v", fs)
	}
	if f.Severity != Critical || f.Evidence["failures"] != uint64(100) || f.Evidence["basis"] != "measured" {
		t.Errorf("severity %v, evidence %+v", f.Severity, f.Evidence)
	}
	wantWords(t, f, "65531", "65530", "20.0 GiB available", "900 KiB", "mmap, mprotect", "ENOMEM", "not short")
	if f.Key != "map-count-limit:prog" || len(f.Syscalls) != 2 || len(f.Procs) != 1 || f.Procs[0].PID != 7 {
		t.Errorf("key %q, syscalls %v, procs %+v", f.Key, f.Syscalls, f.Procs)
	}
	if !strings.Contains(f.Fix, "vm.max_map_count=") || !strings.Contains(f.Fix, "M_MMAP_THRESHOLD") {
		t.Errorf("fix: %s", f.Fix)
	}
	if reads != 1 {
		t.Errorf("%d reads, want 1", reads)
	}
	if byID(fs, MemoryRefused) != nil {
		t.Error("also reported as memory-refused")
	}
}

// mprotect needs two new mappings to split the middle of one, so it fails
// one below the limit; and the process may have unmapped a few before the
// read. Within mapSlack of the limit is at it.
func TestMapCountSlack(t *testing.T) {
	reads := 0
	fs, _ := mcRun(t, nil, stuck(7, 5), atLimit(&reads, 65530-mapSlack))
	if byID(fs, MapCountLimit) == nil {
		t.Errorf("a count %d below the limit is not at it: %+v", mapSlack, fs)
	}
	fs, _ = mcRun(t, nil, stuck(7, 5), atLimit(&reads, 65530-mapSlack-1))
	if byID(fs, MapCountLimit) != nil {
		t.Errorf("a count %d below the limit reported", mapSlack+1)
	}
}

// A MAP_32BIT mmap that fails is the low 2 GiB full, failed-syscall-retry's:
// not this detector's, and nothing is read for it.
func TestMapCountLeavesMAP32BIT(t *testing.T) {
	var evs []event.Event
	tm := uint64(1e9)
	for i := range 50 {
		tm += 10000
		evs = append(evs, sys(7, tm, nrMmap, enomem, 3000, 0, 1<<20, protRW, mapPrivAnon|map32bit, ^uint64(0), 0))
		tm += 10000
		evs = append(evs, sys(7, tm, nrMmap, 0x7f0000000000+int64(i)<<20, 2000, 0, 1<<20, protRW, mapPrivAnon, ^uint64(0), 0))
	}
	reads := 0
	fs, _ := mcRun(t, hostMeta(), evs, atLimit(&reads, 65531))
	if f := byID(fs, MapCountLimit); f != nil {
		t.Errorf("MAP_32BIT failures reported as map-count-limit: %s", f.Title)
	}
	if byID(fs, FailedRetry) == nil {
		t.Error("no failed-syscall-retry finding")
	}
	if reads != 0 {
		t.Errorf("%d reads for MAP_32BIT failures", reads)
	}
}

// ENOMEM with the map count far below the limit (an mprotect of a range
// that is not mapped fails so too) is not the map count: no finding, and
// the nearest miss says the count. A count below the limit is read again,
// at most once a second and mapReadsEach times.
func TestMapCountFarBelow(t *testing.T) {
	var evs []event.Event
	for i := range uint64(1000) { // one every 10 ms for 10 s
		evs = append(evs, sys(7, 1e9+i*1e7, mcNrMprotect, enomem, 2000, 0x1000, 4096, 1))
	}
	reads := 0
	fs, r := mcRun(t, nil, evs, atLimit(&reads, 212))
	if f := byID(fs, MapCountLimit); f != nil {
		t.Errorf("reported at 212 mappings: %s", f.Title)
	}
	if f := byID(fs, MemoryRefused); f != nil {
		t.Errorf("reported as memory-refused: %s", f.Title)
	}
	if reads != mapReadsEach {
		t.Errorf("%d reads, want %d", reads, mapReadsEach)
	}
	var near *Near
	for i := range r.Near {
		if r.Near[i].ID == MapCountLimit {
			near = &r.Near[i]
		}
	}
	if near == nil || !strings.Contains(near.Short, "212") {
		t.Errorf("near %+v", near)
	}
}

// From a capture the count is unknown: a process stuck failing, with
// memory available and no commit limit reached, is inferred to be at the
// map count, as a warning that says it was inferred and what could not be
// known. One failed munmap is enough; three failed mmaps are not; a
// request larger than the memory available is another refusal.
func TestMapCountCapture(t *testing.T) {
	var evs []event.Event
	for i := range 300 { // the mappings it was seen making
		evs = append(evs, sys(7, 1e8+uint64(i)*1000, nrMmap, 0x7f0000000000-int64(i)<<12, 1000, 0, 4096, 1, mapPrivAnon, ^uint64(0), 0))
	}
	fs, _ := mcRun(t, hostMeta(), append(evs, stuck(7, 10)...), nil)
	f := byID(fs, MapCountLimit)
	if f == nil {
		t.Fatalf("no finding from a capture: %+v", fs)
	}
	if f.Severity != Warning || f.Evidence["basis"] != "inferred" {
		t.Errorf("severity %v basis %v", f.Severity, f.Evidence["basis"])
	}
	wantWords(t, f, "inferred", "cannot be known", "65530", "not measured", "RLIMIT_AS", "300 mmap calls of it that succeeded")

	munmap := []event.Event{sys(7, 1e9, mcNrMunmap, enomem, 2000, 0x7f0000001000, 4096)}
	if f := byID(mcRunQuiet(t, munmap), MapCountLimit); f == nil || !strings.Contains(f.Summary, "munmap") {
		t.Errorf("one failed munmap: %+v", f)
	}
	few := stuck(7, 3)[:3]
	if f := byID(mcRunQuiet(t, few), MapCountLimit); f != nil {
		t.Errorf("three failures inferred: %s", f.Title)
	}
	var huge []event.Event
	for i := range uint64(20) {
		huge = append(huge, sys(7, 1e9+i*1e6, nrMmap, enomem, 3000, 0, 64<<30, protRW, mapPrivAnon, ^uint64(0), 0))
	}
	if f := byID(mcRunQuiet(t, huge), MapCountLimit); f != nil {
		t.Errorf("64 GiB requests inferred to be the map count: %s", f.Title)
	}
	// Without the limit in the header, failures alone say nothing; a
	// failed munmap still does.
	if fs, _ := mcRun(t, map[string]string{}, stuck(7, 20), nil); byID(fs, MapCountLimit) != nil || byID(fs, MemoryRefused) != nil {
		t.Errorf("a finding without the limit: %+v", fs)
	}
	if fs, _ := mcRun(t, map[string]string{}, munmap, nil); byID(fs, MapCountLimit) == nil {
		t.Errorf("a failed munmap without the limit: %+v", fs)
	}
}

func mcRunQuiet(t *testing.T, evs []event.Event) []Finding {
	fs, _ := mcRun(t, hostMeta(), evs, nil)
	return fs
}

// Strict overcommit with Committed_AS at CommitLimit: memory-refused names
// the commit limit, not the map count.
func TestMapCountCommitLimit(t *testing.T) {
	meta := hostMeta()
	meta["vm.overcommit_memory"] = "2"
	meta["committed_as"] = "12600000000"
	fs, _ := mcRun(t, meta, stuck(7, 10), nil)
	if f := byID(fs, MapCountLimit); f != nil {
		t.Errorf("commit limit reported as the map count: %s", f.Title)
	}
	f := byID(fs, MemoryRefused)
	if f == nil {
		t.Fatalf("no memory-refused: %+v", fs)
	}
	wantWords(t, f, "commit limit", "overcommit_memory", "CommitLimit")
	if f.Key != "memory-refused:commit-limit|prog" {
		t.Errorf("key %q", f.Key)
	}
	wantWords(t, f, "from when the recording began")
	// Strict, but far from the limit when the header was written: not
	// the commit limit; nor, since it may have been reached later, the
	// map count from failures alone; a failed munmap still is.
	meta["committed_as"] = "1770266624"
	fs = mustRun(t, meta, stuck(7, 10))
	if f := byID(fs, MemoryRefused); f != nil {
		t.Errorf("commit limit far from reached, reported: %s", f.Title)
	}
	if f := byID(fs, MapCountLimit); f != nil {
		t.Errorf("the map count inferred under strict overcommit: %s", f.Title)
	}
	munmap := append(stuck(7, 10), sys(7, 3e9, mcNrMunmap, enomem, 2000, 0x7f0000001000, 4096))
	if f := byID(mustRun(t, meta, munmap), MapCountLimit); f == nil {
		t.Error("a failed munmap under strict overcommit not inferred")
	}
}

func mustRun(t *testing.T, meta map[string]string, evs []event.Event) []Finding {
	fs, _ := mcRun(t, meta, evs, nil)
	return fs
}

// A process under an RLIMIT_AS it has reached, its map count low:
// memory-refused names the rlimit.
func TestMapCountRlimitAS(t *testing.T) {
	read := func(uint32) *mapFacts {
		return &mapFacts{Count: 300, AS: 1 << 30, Data: -1, Rlimits: true, VmSize: 1<<30 - 64<<10, Meta: hostMeta()}
	}
	fs, _ := mcRun(t, nil, stuck(7, 10), read)
	f := byID(fs, MemoryRefused)
	if f == nil || byID(fs, MapCountLimit) != nil {
		t.Fatalf("findings %+v", fs)
	}
	wantWords(t, f, "RLIMIT_AS", "1.0 GiB", "300")
}

// Live on a host whose reads would stall (a full audit backlog), nothing
// is read, and the events say what they can: a failed munmap is the map
// count, named as inferred, with why the count is missing.
func TestMapCountHostStalls(t *testing.T) {
	h := host
	h.Live = true
	d := New(h, nil)
	for _, det := range d.detectors {
		if x, ok := det.(*mapCount); ok {
			x.read = newMapCount(h.Arch, true, func() bool { return false }).read
		}
	}
	evs := append(stuck(7, 20), sys(7, 3e9, mcNrMunmap, enomem, 2000, 0x7f0000001000, 4096))
	for i := range evs {
		d.Observe(&evs[i])
	}
	f := byID(checked(d.Report()).Findings, MapCountLimit)
	if f == nil {
		t.Fatal("no finding")
	}
	if f.Severity != Warning || f.Evidence["basis"] != "inferred" {
		t.Errorf("severity %v, basis %v", f.Severity, f.Evidence["basis"])
	}
	wantWords(t, f, "did not read", "reads could stall", "munmap", "vm.max_map_count was not known")
}

// Processes of one program at the limit make one finding; brk's refusal
// (the old break returned) counts as a failure.
func TestMapCountProcesses(t *testing.T) {
	var evs []event.Event
	for pid := uint32(10); pid < 14; pid++ {
		evs = append(evs, stuck(pid, 5)...)
	}
	evs = append(evs, sys(10, 2e9, mcNrBrk, 0x5600000000, 2000, 0x5600100000))
	reads := 0
	fs, _ := mcRun(t, nil, evs, atLimit(&reads, 65530))
	f := byID(fs, MapCountLimit)
	if f == nil || len(f.Procs) != 4 || f.Evidence["failures"] != uint64(41) {
		t.Fatalf("finding %+v", f)
	}
	wantWords(t, f, "4 processes", "brk")
	if reads != 4 {
		t.Errorf("%d reads, want one per process", reads)
	}
}

// An RLIMIT_DATA far above what the process holds explains nothing: no
// finding names it. Near it, it is named.
func TestMapCountRlimitData(t *testing.T) {
	facts := func(data uint64) func(uint32) *mapFacts {
		return func(uint32) *mapFacts {
			return &mapFacts{Count: 300, AS: -1, Data: 1 << 30, Rlimits: true, VmSize: 4 << 30, VmData: data, Meta: hostMeta()}
		}
	}
	fs, _ := mcRun(t, nil, stuck(7, 10), facts(64<<20))
	if f := byID(fs, MemoryRefused); f != nil {
		t.Errorf("an RLIMIT_DATA 16 times what is held named: %s", f.Title)
	}
	fs, _ = mcRun(t, nil, stuck(7, 10), facts(1<<30-100<<10))
	f := byID(fs, MemoryRefused)
	if f == nil {
		t.Fatalf("findings %+v", fs)
	}
	wantWords(t, f, "RLIMIT_DATA", "1.0 GiB")
	if f.Key != "memory-refused:rlimit_data|prog" {
		t.Errorf("key %q", f.Key)
	}
}

// What a live read gets from a running process (this test's): its map
// count, rlimits, address space and the host's limits, from the files the
// detector reads at a failure.
func TestReadMapFacts(t *testing.T) {
	f := readMapFacts(uint32(os.Getpid()))
	if f.Count <= 0 || f.RSS == 0 || !f.Rlimits || f.VmSize == 0 || f.VmData == 0 || f.Err != "" {
		t.Errorf("facts %+v", f)
	}
	if _, ok := hostfacts.MetaUint(f.Meta, hostfacts.MetaMaxMapCount); !ok {
		t.Errorf("no vm.max_map_count in %v", f.Meta)
	}
	gone := readMapFacts(1 << 30) // no such pid
	if gone.Count != -1 || gone.Err == "" || gone.Rlimits {
		t.Errorf("a gone process: %+v", gone)
	}
}
