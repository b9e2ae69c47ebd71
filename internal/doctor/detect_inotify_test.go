package doctor

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
)

const (
	inNrAddWatch = 254
	inNrInit1    = 294
	inENOSPC     = -28
	inEMFILE     = -24
)

// inotifyRun feeds events to a doctor whose inotify detector reads facts
// with read and users with user (both nil: offline), its host's meta set to
// meta, then the kernel's counts if any.
func inotifyRun(t *testing.T, evs []event.Event, meta map[string]string,
	read func(uint32, inotifyKind, string) *inotifyFacts, user func(uint32) *inotifyUser, cells []stat.Cell) []Finding {
	t.Helper()
	h := host
	h.Meta = meta
	d := New(h, nil)
	found := false
	for _, det := range d.detectors {
		if x, ok := det.(*inotifyLimits); ok {
			x.read, x.readUser, found = read, user, true
		}
	}
	if !found {
		t.Fatal("the inotify detector is not registered in New")
	}
	for i := range evs {
		d.Observe(&evs[i])
	}
	if cells != nil {
		d.Counts(cells)
	}
	return checked(d.Report()).Findings
}

func addWatch(pid uint32, t uint64, ret int64, path string) event.Event {
	e := sys(pid, t, inNrAddWatch, ret, 2000, 3, 0, 0xa)
	e.Syscall.Data[1] = []byte(path)
	return e
}

// A watcher refused ENOSPC while another process of its user holds most of
// the watches: a warning that names the errno, the limit and its value, the
// holder, and that the disk has room; the user's holders are read once for
// two refused processes of that user.
func TestInotifyWatchLimitLive(t *testing.T) {
	var evs []event.Event
	for i := range uint64(21) {
		evs = append(evs, addWatch(7, 1e9+i*10e6, inENOSPC, "/srv/app/src/dir"))
		evs = append(evs, addWatch(8, 1e9+i*10e6+1, inENOSPC, "/srv/app/lib"))
	}
	userReads := 0
	read := func(pid uint32, k inotifyKind, path string) *inotifyFacts {
		if k != inotifyWatches || path == "" {
			t.Errorf("read(%d, %v, %q)", pid, k, path)
		}
		return &inotifyFacts{UID: 1000, Known: true, FS: &inotifyFS{Path: path, BlocksFree: 0.71, InodeFree: 0.9}}
	}
	user := func(uid uint32) *inotifyUser {
		userReads++
		return &inotifyUser{MaxWatches: 8192, MaxInsts: 128, MaxRead: [2]bool{true, true}, Watches: 8192, Instances: 3,
			Holders: []inotifyHolder{{PID: 99, Comm: "code", Watches: 8000, Instances: 1}, {PID: 7, Comm: "prog", Watches: 190, Instances: 1}, {PID: 8, Comm: "prog", Watches: 2, Instances: 1}}}
	}
	fs := inotifyRun(t, evs, nil, read, user, nil)
	f := byID(fs, InotifyWatchLimit)
	if f == nil {
		t.Fatalf("no finding: %+v", fs)
	}
	if f.Severity != Warning {
		t.Errorf("severity %v", f.Severity)
	}
	wantWords(t, f, "2 processes", "42 inotify watch", "ENOSPC", "uid 1000", "8192 watches", "code[99] 8000",
		"fs.inotify.max_user_watches = 8192", "at the host's limit", "71% of its blocks")
	if userReads != 1 {
		t.Errorf("the user's holders were read %d times, want once", userReads)
	}
	if f.Key != "inotify-watch-limit:uid=1000" {
		t.Errorf("key %q", f.Key)
	}
	if !strings.Contains(f.Fix, "fs.inotify.max_user_watches=524288") || !strings.Contains(f.Fix, "/etc/sysctl.d") ||
		!strings.Contains(f.Fix, "code[99]") {
		t.Errorf("fix: %s", f.Fix)
	}
	if len(f.Procs) != 2 || f.Syscalls[0] != "inotify_add_watch" {
		t.Errorf("procs %+v syscalls %v", f.Procs, f.Syscalls)
	}
	if f.Evidence["refusals"] != uint64(42) || f.Evidence["limit"] != uint64(8192) {
		t.Errorf("evidence %+v", f.Evidence)
	}
	if byID(fs, ErrorStorm) != nil || byID(fs, FDExhaustion) != nil {
		t.Errorf("another detector claimed the refusals: %+v", fs)
	}
}

// From a capture: the limit comes from the header, stored when recording
// began, and the finding says that the user and the holders are known only
// live. The kernel's counts, when given, make the count exact.
func TestInotifyWatchLimitCapture(t *testing.T) {
	evs := []event.Event{addWatch(7, 1e9, 3, "/w/a"), addWatch(7, 2e9, inENOSPC, "/w/b"), addWatch(7, 3e9, inENOSPC, "/w/b")}
	fs := inotifyRun(t, evs, map[string]string{"fs.inotify.max_user_watches": "512"}, nil, nil,
		[]stat.Cell{{Key: stat.Key{PID: 7, Nr: inNrAddWatch}, Count: 600, Errors: 88, Errnos: map[int]uint64{28: 88}}})
	f := byID(fs, InotifyWatchLimit)
	if f == nil {
		t.Fatalf("no finding: %+v", fs)
	}
	wantWords(t, f, "88 inotify watch", "was 512", "capture's header", "read only live", "added 512 watch")
	if f.Key != "inotify-watch-limit:prog" {
		t.Errorf("key %q", f.Key)
	}
}

// A watcher in a user namespace of its own, refused at the namespace's
// limit while its user holds far fewer than the host's: the finding says
// the namespace's limit was reached and what it equals, and its fix begins
// there.
func TestInotifyWatchLimitUserNamespace(t *testing.T) {
	evs := []event.Event{addWatch(7, 1e9, inENOSPC, "/tmp/d/f512")}
	read := func(uint32, inotifyKind, string) *inotifyFacts {
		return &inotifyFacts{UID: 64321, Known: true, UserNS: true}
	}
	user := func(uint32) *inotifyUser {
		return &inotifyUser{MaxWatches: 192536, MaxRead: [2]bool{true, true}, Watches: 512, Instances: 1,
			Holders: []inotifyHolder{{PID: 7, Comm: "prog", Watches: 512, Instances: 1}}}
	}
	f := byID(inotifyRun(t, evs, nil, read, user, nil), InotifyWatchLimit)
	if f == nil {
		t.Fatal("no finding")
	}
	wantWords(t, f, "user namespace of its own", "/proc/sys/user/max_inotify_watches", "equals the 512 watches")
	if f.Evidence["namespace_limit"] != 512 || !strings.HasPrefix(f.Fix, "The limit reached is the user namespace's") {
		t.Errorf("evidence %+v fix %s", f.Evidence, f.Fix)
	}
}

// inotify_init1's EMFILE with the descriptor table nearly empty is the
// instance limit: inotify-instance-limit says so, and fd-exhaustion, which
// used to call it a process out of descriptors at its RLIMIT_NOFILE, says
// nothing, with events or with the kernel's counts.
func TestInotifyInstanceLimitNotFDs(t *testing.T) {
	var evs []event.Event
	for i := range uint64(21) {
		evs = append(evs, sys(7, 1e9+i*10e6, inNrInit1, inEMFILE, 2000, 0x80800))
	}
	read := func(uint32, inotifyKind, string) *inotifyFacts {
		return &inotifyFacts{UID: 64321, Known: true, Open: 131, Soft: 20000, NofileRead: true}
	}
	user := func(uint32) *inotifyUser {
		return &inotifyUser{MaxWatches: 8192, MaxInsts: 128, MaxRead: [2]bool{true, true}, Instances: 128,
			Holders: []inotifyHolder{{PID: 7, Comm: "prog", Instances: 128}}}
	}
	cells := []stat.Cell{{Key: stat.Key{PID: 7, Nr: inNrInit1}, Count: 149, Errors: 21, Errnos: map[int]uint64{24: 21}}}
	fs := inotifyRun(t, evs, nil, read, user, cells)
	f := byID(fs, InotifyInstanceLimit)
	if f == nil {
		t.Fatalf("no finding: %+v", fs)
	}
	wantWords(t, f, "21 inotify instance", "EMFILE", "inotify_init1", "128 instances", "fs.inotify.max_user_instances = 128",
		"131 descriptors of the 20000", "instance limit")
	if !strings.Contains(f.Fix, "fs.inotify.max_user_instances=1024") {
		t.Errorf("fix: %s", f.Fix)
	}
	if g := byID(fs, FDExhaustion); g != nil {
		t.Errorf("fd-exhaustion claimed inotify_init1's EMFILE: %s", g.Title)
	}
}

// inotify_init1's EMFILE with the table at RLIMIT_NOFILE is the table: the
// finding says so rather than blame the instances, and gives the
// descriptor fix.
func TestInotifyInstanceAtDescriptorLimit(t *testing.T) {
	evs := []event.Event{sys(7, 1e9, inNrInit1, inEMFILE, 2000, 0)}
	read := func(uint32, inotifyKind, string) *inotifyFacts {
		return &inotifyFacts{UID: 1000, Known: true, Open: 1024, Soft: 1024, NofileRead: true}
	}
	user := func(uint32) *inotifyUser {
		return &inotifyUser{MaxInsts: 128, MaxRead: [2]bool{true, true}, Instances: 2,
			Holders: []inotifyHolder{{PID: 7, Comm: "prog", Instances: 2}}}
	}
	f := byID(inotifyRun(t, evs, nil, read, user, nil), InotifyInstanceLimit)
	if f == nil {
		t.Fatal("no finding")
	}
	wantWords(t, f, "at its descriptor limit", "the table was full")
	if !strings.Contains(f.Fix, "ulimit -n") {
		t.Errorf("fix: %s", f.Fix)
	}
}

// From a capture, a descriptor made after the refusal shows the table had
// room; without one the finding says it cannot tell the limits apart.
func TestInotifyInstanceCapture(t *testing.T) {
	refused := sys(7, 1e9, inNrInit1, inEMFILE, 2000, 0)
	opened := sys(7, 2e9, nrOpenat, 5, 2000)
	meta := map[string]string{"fs.inotify.max_user_instances": "128"}
	f := byID(inotifyRun(t, []event.Event{refused, opened}, meta, nil, nil, nil), InotifyInstanceLimit)
	if f == nil {
		t.Fatal("no finding")
	}
	wantWords(t, f, "was 128", "made 1 descriptor(s) after the first refusal", "instance limit")
	f = byID(inotifyRun(t, []event.Event{refused}, meta, nil, nil, nil), InotifyInstanceLimit)
	if f == nil {
		t.Fatal("no finding without the open")
	}
	wantWords(t, f, "cannot tell the two limits apart")
}

// What is not this: write's ENOSPC on a full disk, openat's ENOSPC for a
// file system out of inodes, EDQUOT, openat's EMFILE (fd-exhaustion's), an
// inotify_add_watch of a missing path (ENOENT).
func TestInotifyBenign(t *testing.T) {
	var evs []event.Event
	for i := range uint64(50) {
		evs = append(evs,
			sys(7, 1e9+i*1e6, nrWrite, inENOSPC, 2000, 3),
			sys(7, 1e9+i*1e6+1, nrOpenat, inENOSPC, 2000),
			sys(7, 1e9+i*1e6+2, nrWrite, -122, 2000, 3),
			sys(8, 1e9+i*1e6, nrOpenat, inEMFILE, 2000),
			addWatch(9, 1e9+i*1e6, -2, "/gone"))
	}
	read := func(uint32, inotifyKind, string) *inotifyFacts { t.Error("read for a benign call"); return nil }
	fs := inotifyRun(t, evs, nil, read, nil, nil)
	for _, id := range []ID{InotifyWatchLimit, InotifyInstanceLimit} {
		if f := byID(fs, id); f != nil {
			t.Errorf("%s: %s", id, f.Title)
		}
	}
	if byID(fs, FDExhaustion) == nil {
		t.Error("openat's EMFILE is fd-exhaustion's, and it said nothing")
	}
}

// A watcher whose disk is also full: the ENOSPC of its writes is named as a
// separate matter.
func TestInotifyWatchLimitWithFullDisk(t *testing.T) {
	evs := []event.Event{addWatch(7, 1e9, inENOSPC, "/w"), sys(7, 2e9, nrWrite, inENOSPC, 2000, 3)}
	f := byID(inotifyRun(t, evs, nil, nil, nil, nil), InotifyWatchLimit)
	if f == nil {
		t.Fatal("no finding")
	}
	wantWords(t, f, "write ENOSPC 1", "a separate matter")
}

// A watcher that exits at its refusal is gone when its user's holders are
// read: the finding says what the read found is after the fact, and claims
// no namespace limit from it.
func TestInotifyWatchLimitHolderGone(t *testing.T) {
	evs := []event.Event{addWatch(7, 1e9, inENOSPC, "/tmp/d/f64")}
	read := func(uint32, inotifyKind, string) *inotifyFacts {
		return &inotifyFacts{UID: 64321, Known: true, UserNS: true}
	}
	user := func(uint32) *inotifyUser {
		return &inotifyUser{MaxWatches: 192536, MaxRead: [2]bool{true, true}}
	}
	cells := []stat.Cell{{Key: stat.Key{PID: 7, Nr: inNrAddWatch}, Count: 65, Errors: 1, Errnos: map[int]uint64{28: 1}}}
	f := byID(inotifyRun(t, evs, nil, read, user, cells), InotifyWatchLimit)
	if f == nil {
		t.Fatal("no finding")
	}
	wantWords(t, f, "no refused process held an inotify instance any more", "not known", "added 64 watch")
	if strings.Contains(f.Summary, "equals") || f.Evidence["namespace_limit"] != nil {
		t.Errorf("a namespace limit claimed from a read after the fact: %s", f.Summary)
	}
}

// From a capture, a process that made as many instances as the header's
// limit, and closed none, was refused by the instance limit.
func TestInotifyInstanceCaptureHeldTheLimit(t *testing.T) {
	var evs []event.Event
	for i := range 4 {
		evs = append(evs, sys(7, uint64(1e9+i), inNrInit1, int64(3+i), 2000, 0))
	}
	evs = append(evs, sys(7, 2e9, inNrInit1, inEMFILE, 2000, 0))
	f := byID(inotifyRun(t, evs, map[string]string{"fs.inotify.max_user_instances": "4"}, nil, nil, nil), InotifyInstanceLimit)
	if f == nil {
		t.Fatal("no finding")
	}
	wantWords(t, f, "held 4 inotify instances", "as many as the limit", "not open files")
	evs = append(evs[:1], sys(7, 1e9+5, 3, 0, 1000, 3), evs[4])
	f = byID(inotifyRun(t, evs, map[string]string{"fs.inotify.max_user_instances": "4"}, nil, nil, nil), InotifyInstanceLimit)
	if f == nil || !strings.Contains(f.Title, "or the descriptor table") {
		t.Errorf("a closed instance counted as held: %+v", f)
	}
}
