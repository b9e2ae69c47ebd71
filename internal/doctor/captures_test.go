package doctor_test

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/proc"
)

// These tests run the doctor on captures that `sysray record` made of real
// programs (testdata/README.md says how each was made), read as `sysray
// doctor -r` reads a capture, and check the findings against what each
// program is known to have done: no root, no BPF.

// diagnose reads a capture the way checkup.Capture (doctor -r) does, by hand:
// the header's process table, the host facts from the header, then every
// event through the process table and the doctor. The container table is
// left out: these captures were recorded on the host, outside any
// container.
func diagnose(t *testing.T, name string) *doctor.Report {
	t.Helper()
	r, err := capture.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := r.Header()
	procs := proc.NewTable(h.Procs)
	host := doctor.Host{Arch: h.Arch, Kernel: h.Meta["kernel"], VsyscallMode: h.Meta["vsyscall_mode"], Meta: h.Meta}
	if host.Kernel == "" {
		host.Kernel = h.Kernel
	}
	d := doctor.New(host, procs)
	var e event.Event
	for {
		if err = r.Next(&e); err != nil {
			break
		}
		procs.Update(&e)
		d.Observe(&e)
	}
	// A test capture must be whole: a cut one would test less than it says.
	if !errors.Is(err, io.EOF) {
		t.Fatalf("%s: %v", name, err)
	}
	if r.Trailer() == nil {
		t.Fatalf("%s has no trailer", name)
	}
	return d.Report()
}

// events reads a capture's events as they are, for the facts a test checks
// the doctor against (a pid, a call's duration): what the kernel recorded,
// not what a detector made of it.
func events(t *testing.T, name string) ([]event.Event, event.Arch) {
	t.Helper()
	r, err := capture.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []event.Event
	for {
		var e event.Event
		if err := r.Next(&e); errors.Is(err, io.EOF) {
			return out, r.Header().Arch
		} else if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
}

// execPID is the pid of the one process that exec'd a file named prog.
func execPID(t *testing.T, evs []event.Event, prog string) uint32 {
	t.Helper()
	var pids []uint32
	for i := range evs {
		if e := &evs[i]; e.Kind == event.KindExec && filepath.Base(e.Proc.Filename) == prog {
			pids = append(pids, e.PID)
		}
	}
	if len(pids) != 1 {
		t.Fatalf("%d execs of %s in the capture, want 1", len(pids), prog)
	}
	return pids[0]
}

// only is the one finding with this id.
func only(t *testing.T, rep *doctor.Report, id doctor.ID) doctor.Finding {
	t.Helper()
	var got []doctor.Finding
	var ids []doctor.ID
	for _, f := range rep.Findings {
		ids = append(ids, f.ID)
		if f.ID == id {
			got = append(got, f)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d %s findings, want 1; the report has %v", len(got), id, ids)
	}
	return got[0]
}

func wantEvidence(t *testing.T, f doctor.Finding, key string, want any) {
	t.Helper()
	if got := f.Evidence[key]; !reflect.DeepEqual(got, want) {
		t.Errorf("%s evidence %s = %#v, want %#v", f.ID, key, got, want)
	}
}

// processes is a finding's "processes" evidence.
func processes(t *testing.T, f doctor.Finding) []string {
	t.Helper()
	ps, ok := f.Evidence["processes"].([]string)
	if !ok {
		t.Fatalf("%s evidence processes = %#v", f.ID, f.Evidence["processes"])
	}
	return ps
}

// scenarios/bin/vsyscall-crash reads the first byte of the legacy vsyscall
// page (0xffffffffff600000) from its main thread, as glibc 2.13's bash did
// on a vsyscall=none host; it was recorded on a host with vsyscall=xonly,
// which refuses reads of the page. It dies of SIGSEGV.
func TestCaptureVsyscallCrash(t *testing.T) {
	const name = "vsyscall-crash.sysray"
	evs, _ := events(t, name)
	pid := execPID(t, evs, "vsyscall-crash")
	f := only(t, diagnose(t, name), "legacy-vsyscall")
	if f.Severity != doctor.Critical {
		t.Errorf("severity %v, want critical: the process died", f.Severity)
	}
	if want := fmt.Sprintf("vsyscall-crash[%d]", pid); !strings.Contains(f.Title, want) || !strings.Contains(f.Title, "died") {
		t.Errorf("title %q does not say %s died", f.Title, want)
	}
	wantEvidence(t, f, "pid", pid)
	wantEvidence(t, f, "comm", "vsyscall-crash")
	wantEvidence(t, f, "fault_addr", "0xffffffffff600000")
	wantEvidence(t, f, "signal", "SIGSEGV")
	wantEvidence(t, f, "exit", "killed by SIGSEGV")
	wantEvidence(t, f, "vsyscall_mode", "xonly")
	// A read of the page, not a call into it.
	if flags, _ := f.Evidence["fault_flags"].(string); !strings.Contains(flags, "READ_ACCESS") || strings.Contains(flags, "INSTRUCTION_FETCH") {
		t.Errorf("fault flags %q: want a data read", flags)
	}
	if !strings.Contains(f.Summary, "tried to read") {
		t.Errorf("summary does not say the page was read: %s", f.Summary)
	}
}

// scenarios/bin/vsyscaller -n 20 calls time() through the vsyscall page 20
// times from one process; the kernel emulates each call. 20 calls cost
// nothing worth a warning (that takes 1,000).
func TestCaptureVsyscallEmulated(t *testing.T) {
	const name = "vsyscall-emulated.sysray"
	evs, _ := events(t, name)
	pid := execPID(t, evs, "vsyscaller")
	f := only(t, diagnose(t, name), "legacy-vsyscall")
	if f.Severity != doctor.Info {
		t.Errorf("severity %v, want info for 20 calls", f.Severity)
	}
	wantEvidence(t, f, "calls", uint64(20))
	wantEvidence(t, f, "by_call", map[string]uint64{"time": 20})
	wantEvidence(t, f, "vsyscall_mode", "xonly")
	ps := processes(t, f)
	if want := fmt.Sprintf("vsyscaller[%d]", pid); len(ps) != 1 || !strings.HasPrefix(ps[0], want) || !strings.HasSuffix(ps[0], ": 20 calls") {
		t.Errorf("processes %q, want %s with its 20 calls", ps, want)
	}
	if !strings.HasPrefix(f.Title, "20 calls ") || !strings.Contains(f.Summary, "time()") {
		t.Errorf("title %q, summary %q: want 20 calls of time()", f.Title, f.Summary)
	}
}

// scenarios/bin/errloop -k enoent -n 12000 stats a path that does not
// exist 12,000 times from one process (glibc's stat is newfstatat) and makes
// no other stat call: every one fails with ENOENT. That is past the
// error-storm threshold of 10,000.
func TestCaptureENOENTBurst(t *testing.T) {
	const name = "enoent-burst.sysray"
	evs, _ := events(t, name)
	pid := execPID(t, evs, "errloop")
	f := only(t, diagnose(t, name), "error-storm")
	if f.Severity != doctor.Info {
		t.Errorf("severity %v, want info: failures alone never warn", f.Severity)
	}
	wantEvidence(t, f, "syscall", "newfstatat")
	wantEvidence(t, f, "errno", "ENOENT")
	wantEvidence(t, f, "failures", uint64(12000))
	wantEvidence(t, f, "calls", uint64(12000))
	if ps := processes(t, f); len(ps) != 1 || !strings.HasPrefix(ps[0], fmt.Sprintf("errloop[%d]", pid)) {
		t.Errorf("processes %q, want errloop[%d] alone", ps, pid)
	}
	if want := "12000 of 12000 newfstatat calls failed with ENOENT"; f.Title != want {
		t.Errorf("title %q, want %q", f.Title, want)
	}
}

// /tmp/slowcpu 3 (tests/progs/slowcpu.c) makes 3 getrandom calls of 32 MiB
// each: a call that never waits, but runs on the CPU in the kernel for
// 100 ms or more on the machine that recorded it. Recorded with --stacks,
// so the capture says where the calls were off the CPU: only preempted (the
// host was busy), never asleep. Each made 32 MiB of random bytes at a
// copying rate, as asked: slow, and info, not a stall (bulkWork).
func TestCaptureSlowGetrandom(t *testing.T) {
	const name = "slow-getrandom.sysray"
	evs, arch := events(t, name)
	pid := execPID(t, evs, "slowcpu")
	// The calls' time on the CPU, from the capture: each call's length
	// less the time it waited for a CPU.
	var big int
	var longestOwn, total, queued uint64
	for i := range evs {
		sc := &evs[i].Syscall
		if evs[i].Kind != event.KindSyscall || event.SyscallName(arch, sc.Nr) != "getrandom" || sc.Args[1] != 32<<20 {
			continue
		}
		big++
		total += sc.Latency
		own := sc.Latency
		for _, sl := range sc.Sleeps {
			if !sl.Preempted {
				t.Fatalf("a getrandom call slept %d ns, not preempted: the capture is not of a call that runs on the CPU", sl.Duration)
			}
			own -= min(sl.Duration, own)
			queued += sl.Duration
		}
		longestOwn = max(longestOwn, own)
	}
	if big != 3 || longestOwn < 100_000_000 {
		t.Fatalf("the capture holds %d getrandom calls of 32 MiB, the longest %d ns on the CPU: want 3, one of 100 ms or more",
			big, longestOwn)
	}

	f := only(t, diagnose(t, name), "slow-syscall")
	if f.Severity != doctor.Info {
		t.Errorf("severity %v, want info: the calls ran %d ns at most on the CPU, making the 32 MiB each asked for", f.Severity, longestOwn)
	}
	wantEvidence(t, f, "count", uint64(3))
	wantEvidence(t, f, "bulk_calls", uint64(3))
	wantEvidence(t, f, "bulk_bytes", uint64(3*32<<20))
	wantEvidence(t, f, "syscalls", map[string]uint64{"getrandom": 3})
	if ex, _ := f.Evidence["example"].(string); !strings.HasPrefix(ex, "getrandom(") || !strings.Contains(ex, ", 33554432, 0) = 33554432 <") {
		t.Errorf("example %q, want a getrandom of 32 MiB", ex)
	}
	if ps := processes(t, f); len(ps) != 1 || !strings.HasPrefix(ps[0], fmt.Sprintf("slowcpu[%d]", pid)) {
		t.Errorf("processes %q, want slowcpu[%d] alone", ps, pid)
	}
	if !strings.Contains(f.Title, "3 slow getrandom") || !strings.Contains(f.Title, "running in the kernel on large copies") {
		t.Errorf("title %q: want 3 slow getrandom, running in the kernel on large copies", f.Title)
	}
	// The time preempted is the host's load: the report names it when it
	// is a tenth of the calls' time or more (it was 144 of 485 ms).
	if said, waited := strings.Contains(f.Summary, "waiting for a CPU"), queued*10 >= total; said != waited {
		t.Errorf("the calls waited %d of %d ns for a CPU; the summary says so: %v, want %v: %s", queued, total, said, waited, f.Summary)
	}
}

// mapcount at vm.max_map_count, its retries failing with ENOMEM: from a
// capture the count at the time is not known, so the finding is inferred
// from the header's limits, says so, and counts exactly the failures the
// program made (30 mmap and 30 mprotect retries, and the fill's last mmap).
func TestCaptureMapCount(t *testing.T) {
	rep := diagnose(t, "mapcount.sysray")
	var f *doctor.Finding
	for i := range rep.Findings {
		if rep.Findings[i].ID == doctor.MapCountLimit {
			f = &rep.Findings[i]
		}
	}
	if f == nil {
		t.Fatalf("no map-count-limit finding: %+v", rep.Findings)
	}
	if f.Severity != doctor.Warning || f.Evidence["basis"] != "inferred" || f.Evidence["failures"] != uint64(61) ||
		f.Evidence["max_map_count"] != uint64(65530) {
		t.Errorf("severity %v, evidence %+v", f.Severity, f.Evidence)
	}
	for _, w := range []string{"inferred", "cannot be known", "65520 mmap calls of it that succeeded", "not measured"} {
		if !strings.Contains(f.Summary, w) {
			t.Errorf("%q missing from %s", w, f.Summary)
		}
	}
	if f.Key != "map-count-limit:mapcount" {
		t.Errorf("key %q", f.Key)
	}
}

// synloss's captures: the connects held up against its own RESULT line
// (synloss-queue: 3 ETIMEDOUT of 5 connects; synloss-poll: 3 connects, each
// losing 2 SYNs, waited in poll), and what a capture cannot tell.
func TestCaptureSynloss(t *testing.T) {
	for _, c := range []struct {
		file            string
		held, timedOut  uint64
		sums            map[string]uint64
		blocking, polls uint64
	}{
		{"golden/synloss-queue.sysray", 3, 3, map[string]uint64{}, 3, 0},
		{"golden/synloss-poll.sysray", 3, 0, map[string]uint64{"2": 3}, 0, 3},
	} {
		rep := diagnose(t, c.file)
		var f *doctor.Finding
		for i := range rep.Findings {
			if rep.Findings[i].ID == doctor.ConnectRetransmit {
				f = &rep.Findings[i]
			}
		}
		if f == nil {
			t.Fatalf("%s: no connect-retransmit: %+v", c.file, rep.Findings)
		}
		ev := f.Evidence
		if f.Severity != doctor.Warning || ev["connects_held_up"] != c.held || ev["timed_out"] != c.timedOut ||
			!reflect.DeepEqual(ev["by_backoff_sum_s"], c.sums) || ev["blocking_connects"] != c.blocking ||
			ev["wait_calls"].(map[string]uint64)["poll"] != c.polls || ev["peer"] != "10.221.0.2:8080" ||
			ev["cause"] != "unknown from a capture" {
			t.Errorf("%s: severity %v, evidence %+v", c.file, f.Severity, ev)
		}
		if !strings.Contains(f.Summary, "cannot be known from a capture") {
			t.Errorf("%s: %s", c.file, f.Summary)
		}
	}
}
