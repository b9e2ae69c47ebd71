package tests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/scap"
)

// scapWant is what a reader of the scap export should count, given the
// capture's own counts: calls under the names the export gives them
// (scap.WrittenAs), with their errors where the exit carries the return
// value.
func scapWant(c, children counts, imported bool) counts {
	w := counts{}
	for name, v := range children {
		c = maps.Clone(c)
		x := c[name]
		x[0] += v[0]
		c[name] = x
	}
	for name, v := range c {
		sd, im, ret := scap.WrittenAs(name)
		n := sd
		if imported {
			n = im
		}
		x := w[n]
		x[0] += v[0]
		if ret {
			x[1] += v[1]
		}
		w[n] = x
	}
	return w
}

func sameScapCounts(t *testing.T, what string, got, want counts) {
	t.Helper()
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %s: %d calls/%d errors, want %d/%d", what, name, got[name][0], got[name][1], w[0], w[1])
		}
	}
	for name, g := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: %s: %d calls not in the capture", what, name, g[0])
		}
	}
}

var scapEventsRe = regexp.MustCompile(`sysray: (\d+) scap events: (\d+) calls`)

// exportScap exports a capture as scap over an existing world-readable
// file, and returns the number of events the export says it wrote.
func exportScap(t *testing.T, file, out string) int {
	t.Helper()
	os.WriteFile(out, []byte("old"), 0o644)
	r := run(t, "export", "--format", "scap", "-r", file, "-o", out)
	if r.code != 0 {
		t.Fatalf("export: exit %d: %s", r.code, r.stderr)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("output mode: %v %v", st.Mode(), err)
	}
	m := scapEventsRe.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("export said %q", r.stderr)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// tsharkEvents counts the events Wireshark decodes in a scap file, by
// type and thread, and checks that sysray's reader sees the same.
func tsharkEvents(t *testing.T, file string) int {
	t.Helper()
	out, err := exec.Command("tshark", "-r", file, "-T", "fields", "-e", "sysdig.event_type", "-e", "sysdig.thread_id").Output()
	if err != nil {
		t.Fatalf("tshark -r %s: %v", file, err)
	}
	want := map[string]int{}
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		want[l]++
		n++
	}
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	rd, err := scap.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	var ev scap.Event
	for {
		b, err := rd.Next()
		if err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
		if scap.IsEvent(b.Type) {
			if err := scap.ParseEvent(b.Type, b.Body, &ev); err != nil {
				t.Fatal(err)
			}
			got[strconv.Itoa(int(ev.Type))+"\t"+strconv.FormatUint(ev.TID, 10)]++
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events by type and thread:\n got %v\nwant %v (tshark)", got, want)
	}
	return n
}

// threadCalls counts a capture's finished calls per thread and command
// name ("tid comm"), with the calls a scap file adds: each new thread's
// own return from the call that made it (children, by that call).
func threadCalls(t *testing.T, file string) (perThread map[string]int, children counts) {
	t.Helper()
	r, err := capture.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	arch := r.Header().Arch
	perThread = map[string]int{}
	made := map[uint32]string{} // child tid → the call that made it
	var forks []event.Proc
	var e event.Event
	for {
		if err := r.Next(&e); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		switch {
		case e.Kind == event.KindSyscall && !e.Syscall.Unfinished:
			perThread[fmt.Sprintf("%d %s", e.TID, e.Comm)]++
			switch name := event.SyscallName(arch, e.Syscall.Nr); name {
			case "clone", "clone3", "fork", "vfork":
				if e.Syscall.Ret > 0 {
					made[uint32(e.Syscall.Ret)] = name
				}
			}
		case e.Kind == event.KindFork:
			forks = append(forks, e.Proc)
		}
	}
	children = counts{}
	for _, f := range forks {
		perThread[fmt.Sprintf("%d %s", f.ChildTID, f.ChildComm)]++
		name := made[f.ChildTID]
		if _, _, paired := scap.WrittenAs(name); !paired {
			name = "clone" // what the export writes when the call is not in the capture or has no event pair
		}
		c := children[name]
		c[0]++
		children[name] = c
	}
	return perThread, children
}

// sysdigLines runs sysdig -r with a filter and an output format.
func sysdigLines(t *testing.T, file, filter, format string) []string {
	t.Helper()
	out, err := exec.Command("sysdig", "-r", file, "-p", format, filter).Output()
	if err != nil {
		t.Fatalf("sysdig -r %s %q: %v", file, filter, err)
	}
	var ls []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		ls = append(ls, sc.Text())
	}
	return ls
}

// checkScapExport exports a capture and has sysdig, tshark and sysray's
// own import read it back: the same calls per syscall (and errors where
// scap keeps the return value), per thread and command, and every event.
func checkScapExport(t *testing.T, file string) (out string) {
	t.Helper()
	out = filepath.Join(t.TempDir(), "out.scap")
	written := exportScap(t, file, out)
	have := sysrayCounts(t, run(t, "stat", "-r", file, "--json").stdout)
	wantThreads, children := threadCalls(t, file)

	sameScapCounts(t, "sysdig", sysdigCounts(t, out), scapWant(have, children, false))

	perThread := map[string]int{}
	for _, l := range sysdigLines(t, out, "evt.dir=<", "%thread.tid %proc.name") {
		perThread[l]++
	}
	if want := wantThreads; fmt.Sprint(perThread) != fmt.Sprint(want) {
		t.Errorf("sysdig's calls per thread and command:\n got %v\nwant %v", perThread, want)
	}

	if n := tsharkEvents(t, out); n != written {
		t.Errorf("tshark reads %d events, the export wrote %d", n, written)
	}

	imp := filepath.Join(t.TempDir(), "back.sysray")
	if r := run(t, "import", "--from", "scap", out, "-w", imp); r.code != 0 {
		t.Fatalf("import: %d %s", r.code, r.stderr)
	}
	sameScapCounts(t, "import", sysrayCounts(t, run(t, "stat", "-r", imp, "--json").stdout), scapWant(have, children, true))
	var total uint64
	for _, v := range have {
		total += v[0]
	}
	t.Logf("%d calls in %d syscalls (and %v new threads' own returns), %d scap events: sysdig, tshark and the import agree", total, len(have), children, written)
	return out
}

// Real captures of the doctor's golden set (forks, threads, thousands of
// calls) need no root to export and check.
func TestExportScapGolden(t *testing.T) {
	alongside(t)
	needTool(t, "sysdig")
	needTool(t, "tshark")
	for _, f := range []string{"forkgrow.sysray", "fdleak-pipe.sysray", "crasher.sysray", "lockconvoy.sysray", "nagle.sysray", "refused-eperm.sysray", "strace-fifo.sysray", "execfail.sysray", "synloss-poll.sysray"} {
		t.Run(f, func(t *testing.T) {
			checkScapExport(t, filepath.Join("..", "internal", "doctor", "testdata", "golden", f))
		})
	}
}

// A recording of programs whose calls are known: 500 getppid, an openat
// that creates a file (O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0640) and one
// that fails with ENOENT (O_RDONLY), threads started and
// joined one at a time and a process exiting with 7.
func TestExportScapLive(t *testing.T) {
	requireBPF(t)
	needTool(t, "sysdig")
	needTool(t, "tshark")
	dir := t.TempDir()
	file := filepath.Join(dir, "run.sysray")
	created := filepath.Join(dir, "created.txt")
	script := strings.Join([]string{prog("getppid") + " 500", prog("openat") + " " + created, prog("exit7")}, "; ")
	if r := run(t, "record", "-w", file, "--", "/bin/sh", "-c", script); r.code != 7 {
		t.Fatalf("record: exit %d, want exit7's 7: %s", r.code, r.stderr)
	}
	out := checkScapExport(t, file)

	if n := len(sysdigLines(t, out, "evt.type=getppid and evt.dir=< and proc.name=getppid", "%evt.num")); n != 500 {
		t.Errorf("sysdig reads %d getppid calls of the getppid program, want 500", n)
	}
	opens := strings.Join(sysdigLines(t, out, "evt.type=openat and evt.dir=< and proc.name=openat", "%evt.rawres %evt.arg.name"), "\n")
	if !regexp.MustCompile(`(?m)^[0-9]+ `+regexp.QuoteMeta(created)+`$`).MatchString(opens) ||
		!strings.Contains(opens, "-2 /nonexistent/sysray") {
		t.Errorf("sysdig's openat calls of the openat program:\n%s\nwant %s opened and /nonexistent/sysray failing with -2 (ENOENT)", opens, created)
	}
	// The openat program's flags, in scap's bits, as sysdig names them
	// (in its own order: compared as sets).
	flags := map[string]string{}
	for _, l := range sysdigLines(t, out, "evt.type=openat and evt.dir=< and proc.name=openat", "%evt.arg.name %evt.arg.flags %evt.arg.mode") {
		if f := strings.Fields(l); len(f) == 3 {
			names := strings.Split(f[1], "|")
			sort.Strings(names)
			flags[f[0]] = strings.Join(names, "|") + " " + f[2]
		}
	}
	if flags[created] != "O_CLOEXEC|O_CREAT|O_TRUNC|O_WRONLY 0640" || flags["/nonexistent/sysray"] != "O_RDONLY 0" {
		t.Errorf("sysdig's openat flags and modes: %q, want O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC 0640 for %s and O_RDONLY 0 for /nonexistent/sysray", flags, created)
	}
	exits := sysdigLines(t, out, "evt.type=procexit and proc.name=exit7", "%thread.tid %evt.arg.status")
	if len(exits) < 2 {
		t.Errorf("sysdig's exits of exit7's threads: %q, want its threads and its main", exits)
	}
}

// A file that is not a capture, or is missing, is an error that leaves
// no output behind.
func TestExportScapBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.sysray")
	os.WriteFile(bad, []byte("not a capture at all"), 0o600)
	for _, in := range []string{bad, filepath.Join(dir, "missing.sysray")} {
		out := filepath.Join(dir, "out.scap")
		r := run(t, "export", "--format", "scap", "-r", in, "-o", out)
		if r.code != 1 || !strings.Contains(r.stderr, "export") {
			t.Errorf("export of %s: exit %d, %q; want exit 1 and an error", filepath.Base(in), r.code, r.stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("export of %s left %s behind", filepath.Base(in), out)
		}
	}
	// -o naming the capture itself is refused, and the capture is intact.
	capFile := filepath.Join(dir, "c.sysray")
	orig, err := os.ReadFile(filepath.Join("..", "internal", "doctor", "testdata", "golden", "crasher.sysray"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(capFile, orig, 0o600)
	if r := run(t, "export", "--format", "scap", "-r", capFile, "-o", capFile); r.code != 1 {
		t.Errorf("export over its own capture: exit %d, %q; want 1", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(capFile); !bytes.Equal(b, orig) {
		t.Errorf("export over its own capture changed it")
	}
}
