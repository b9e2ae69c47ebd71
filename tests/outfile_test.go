package tests

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
)

// writeCapture writes a capture of n getppid calls by a process named comm.
func writeCapture(t *testing.T, path, comm string, n int) {
	t.Helper()
	w, err := capture.Create(path, &capture.Header{Arch: event.ArchAMD64})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		e := event.Event{Kind: event.KindSyscall, Time: uint64(1_000_000 + i*1000), PID: 42, TID: 42, Comm: comm}
		e.Syscall.Nr, e.Syscall.Latency, e.Syscall.Ret = 110, 300, 1 // getppid
		if err := w.Write(&e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(&capture.Trailer{Events: uint64(n)}); err != nil {
		t.Fatal(err)
	}
}

// straceText is a log as strace -f -ttt -T writes it.
const straceText = "42    1700000000.000001 getppid() = 1 <0.000010>\n42    1700000000.000100 exit_group(0) = ?\n42    1700000000.000200 +++ exited with 0 +++\n"

// fileState is what must not change about a file sysray was not to write.
type fileState struct {
	data []byte
	ino  uint64
	mode os.FileMode
}

func stateOf(t *testing.T, path string) fileState {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fileState{b, fi.Sys().(*syscall.Stat_t).Ino, fi.Mode()}
}

func (s fileState) same(o fileState) bool {
	return bytes.Equal(s.data, o.data) && s.ino == o.ino && s.mode == o.mode
}

// dirNames lists a directory, to see that nothing (a temporary file, a
// file named "-") is left behind.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// outputCommands are every command that writes a file, with out as the
// path it writes; in is a capture and log a strace log.
func outputCommands(in, log, out string, live bool) [][]string {
	cmds := [][]string{
		{"read", in, "-o", out},
		{"read", in, "--json", "-o", out},
		{"stat", "-r", in, "-o", out},
		{"doctor", "-r", in, "-o", out},
		{"diff", in, in, "-o", out},
		{"report", "-r", in, "-o", out},
		{"export", "-r", in, "-o", out},
		{"import", "--from", "strace", log, "-w", out},
	}
	if live {
		cmds = append(cmds,
			[]string{"record", "-w", out, "--", "true"},
			[]string{"trace", "-o", out, "--", "true"},
			[]string{"report", "-o", out, "--", "true"},
			[]string{"profile", "-o", out + ".svg", "--", "true"},
		)
	}
	return cmds
}

// A symlink planted where an output goes (as an unprivileged user can in a
// shared directory) is refused by every command: the file it points to keeps
// its contents, inode and mode.
func TestOutputRefusesSymlink(t *testing.T) {
	live := os.Geteuid() == 0
	dir := t.TempDir()
	in := filepath.Join(dir, "in.sysray")
	writeCapture(t, in, "loop", 10)
	log := filepath.Join(dir, "strace.log")
	os.WriteFile(log, []byte(straceText), 0o600)
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("root's file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := stateOf(t, victim)
	out := filepath.Join(dir, "out")
	for _, args := range outputCommands(in, log, out, live) {
		target := out
		if args[0] == "profile" {
			target = out + ".svg"
		}
		os.Remove(target)
		if err := os.Symlink(victim, target); err != nil {
			t.Fatal(err)
		}
		r := run(t, args...)
		if r.code == 0 || !strings.Contains(r.stderr, "symbolic link") {
			t.Errorf("sysray %v over a symlink: exit %d, stderr %q", args, r.code, r.stderr)
		}
		if got := stateOf(t, victim); !got.same(want) {
			t.Errorf("sysray %v changed the symlink's target: %q %v ino %d, was %q %v ino %d",
				args, got.data, got.mode, got.ino, want.data, want.mode, want.ino)
		}
		if fi, err := os.Lstat(target); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("sysray %v replaced the symlink itself", args)
		}
		os.Remove(target)
	}
	if names := dirNames(t, dir); len(names) != 3 {
		t.Errorf("left behind: %v", names)
	}
}

// An output that is not a regular file (a FIFO nobody reads, a directory)
// is refused at once, not written or waited on.
func TestOutputRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.sysray")
	writeCapture(t, in, "loop", 10)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o700)
	for _, target := range []string{fifo, sub} {
		for _, args := range [][]string{{"read", in, "-o", target}, {"report", "-r", in, "-o", target}, {"export", "-r", in, "-o", target}} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			cmd := exec.CommandContext(ctx, sysray, args...)
			var errb bytes.Buffer
			cmd.Stderr = &errb
			err := cmd.Run()
			timedOut := ctx.Err() == context.DeadlineExceeded
			cancel()
			if timedOut {
				t.Errorf("sysray %v waited on the FIFO", args)
				continue
			}
			if err == nil || !strings.Contains(errb.String(), "not a regular file") {
				t.Errorf("sysray %v: err %v, stderr %q", args, err, errb.String())
			}
		}
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced")
	}
}

// A record that fails before it traces anything (the command does not
// exist; the user may not load BPF programs) leaves the capture already at
// its path as it was, and exits non-zero.
func TestRecordFailureKeepsCapture(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	file := filepath.Join(dir, "c.sysray")
	writeCapture(t, file, "oldrun", 25)
	want := stateOf(t, file)

	r := run(t, "record", "-w", file, "--", filepath.Join(dir, "no-such-command"))
	if r.code == 0 || !strings.Contains(r.stderr, "no-such-command") {
		t.Errorf("record of a missing command: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := stateOf(t, file); !got.same(want) {
		t.Errorf("a failed record changed the capture (%d bytes, was %d)", len(got.data), len(want.data))
	}
	if names := dirNames(t, dir); len(names) != 1 {
		t.Errorf("left behind: %v", names)
	}

	if os.Geteuid() != 0 {
		return
	}
	// As a user who owns the directory and the capture, but may not trace.
	os.Chown(dir, 65534, 65534)
	os.Chown(file, 65534, 65534)
	want = stateOf(t, file)
	cmd := exec.Command(sysray, "record", "-w", file, "--", "true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Errorf("unprivileged record succeeded: %s", out)
	}
	if got := stateOf(t, file); !got.same(want) {
		t.Errorf("an unprivileged record changed the capture (%d bytes, was %d): %s", len(got.data), len(want.data), out)
	}
	if names := dirNames(t, dir); len(names) != 1 {
		t.Errorf("left behind: %v", names)
	}
	rd := run(t, "read", file)
	if rd.code != 0 || strings.Count(rd.stdout, "oldrun(42:42) getppid") != 25 {
		t.Errorf("the old capture no longer reads: exit %d, stderr %q", rd.code, rd.stderr)
	}
}

// Writing over its own input is refused by every command that reads a
// file, under the same name, another spelling of it or a hard link.
func TestOutputIsInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.sysray")
	writeCapture(t, in, "loop", 10)
	log := filepath.Join(dir, "strace.log")
	os.WriteFile(log, []byte(straceText), 0o600)
	hard := filepath.Join(dir, "hard.sysray")
	if err := os.Link(in, hard); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o700)
	wantIn, wantLog := stateOf(t, in), stateOf(t, log)
	for _, out := range []string{in, filepath.Join(dir, "sub", "..", "in.sysray"), hard} {
		for _, args := range outputCommands(in, log, out, false) {
			if args[0] == "import" {
				args = []string{"import", "--from", "strace", log, "-w", strings.Replace(out, "in.sysray", "strace.log", 1)}
				if out == hard {
					continue
				}
			}
			r := run(t, args...)
			if r.code == 0 || !strings.Contains(r.stderr, "is also an input") {
				t.Errorf("sysray %v: exit %d, stderr %q", args, r.code, r.stderr)
			}
		}
		if got := stateOf(t, in); !got.same(wantIn) {
			t.Fatalf("the capture was changed (written as %s)", out)
		}
		if got := stateOf(t, log); !got.same(wantLog) {
			t.Fatalf("the strace log was changed")
		}
	}
	// report's two outputs may not be one file either, by any spelling;
	// that is known before recording.
	r := run(t, "report", "-o", filepath.Join(dir, "sub", "r"), "-w", filepath.Join(dir, "sub", "..", "sub", "r"), "--duration", "5s")
	if r.code == 0 || !strings.Contains(r.stderr, "-w and -o name the same file") {
		t.Errorf("report -o X -w X: exit %d, stderr %q", r.code, r.stderr)
	}
	// diff's second input counts too.
	other := filepath.Join(dir, "other.sysray")
	writeCapture(t, other, "loop", 5)
	wantOther := stateOf(t, other)
	if r := run(t, "diff", in, other, "-o", other); r.code == 0 || !strings.Contains(r.stderr, "is also an input") {
		t.Errorf("diff -o B: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := stateOf(t, other); !got.same(wantOther) {
		t.Errorf("diff -o B changed B")
	}
}

// Outputs are written whole and private: an existing world-readable file
// is replaced by a 0600 one with exactly the new contents.
func TestOutputReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.sysray")
	writeCapture(t, in, "loop", 3)
	out := filepath.Join(dir, "out.txt")
	os.WriteFile(out, bytes.Repeat([]byte("old contents that are longer than the new\n"), 100), 0o644)
	r := run(t, "read", in, "-o", out)
	if r.code != 0 {
		t.Fatalf("read -o: exit %d, %s", r.code, r.stderr)
	}
	want := run(t, "read", in).stdout
	got, _ := os.ReadFile(out)
	if string(got) != want || strings.Count(want, "getppid") != 3 {
		t.Errorf("read -o wrote %q, want %q", got, want)
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if names := dirNames(t, dir); len(names) != 2 {
		t.Errorf("left behind: %v", names)
	}
}

// "-" is standard output wherever an output is named, and never a file
// named "-"; where the output must be read back or named by its extension,
// "-" is refused before any work.
func TestDashIsStdout(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.sysray")
	writeCapture(t, in, "loop", 4)
	log := filepath.Join(dir, "strace.log")
	os.WriteFile(log, []byte(straceText), 0o600)
	runIn := func(args ...string) result {
		cmd := exec.Command(sysray, args...)
		cmd.Dir = dir
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return result{out.String(), errb.String(), code}
	}
	// A capture written to stdout reads back.
	r := runIn("import", "--from", "strace", log, "-w", "-")
	if r.code != 0 {
		t.Fatalf("import -w -: exit %d, %s", r.code, r.stderr)
	}
	piped := filepath.Join(t.TempDir(), "piped.sysray")
	os.WriteFile(piped, []byte(r.stdout), 0o600)
	if rd := run(t, "read", piped); rd.code != 0 || !strings.Contains(rd.stdout, "getppid() = 1") || rd.stderr != "sysray: imported from strace; absent: "+strings.ReplaceAll(readAbsent(t, piped), ",", ", ")+"\n" {
		t.Errorf("import -w - did not write a capture to stdout: exit %d, %q, %q", rd.code, rd.stdout, rd.stderr)
	}
	r = runIn("report", "-r", in, "-o", "-")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "<!DOCTYPE html>") {
		t.Errorf("report -o -: exit %d, stdout starts %q, stderr %q", r.code, clip(r.stdout, 40), r.stderr)
	}
	fa, fb := filepath.Join(dir, "a.folded"), filepath.Join(dir, "b.folded")
	os.WriteFile(fa, []byte("app[10];main;compute 90\n"), 0o600)
	os.WriteFile(fb, []byte("app[22];main;compute 40\n"), 0o600)
	r = runIn("diff", "--flame", "-", fa, fb)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "<?xml") || !strings.Contains(r.stdout, "<title>compute: A 90 samples, B 40 samples") {
		t.Errorf("diff --flame -: exit %d, stdout starts %q, stderr %q", r.code, clip(r.stdout, 40), r.stderr)
	}
	os.Remove(fa)
	os.Remove(fb)
	r = runIn("diff", "--flame", "-", in, in)
	if r.code == 0 || !strings.Contains(r.stderr, "would both go to standard output") {
		t.Errorf("diff --flame - without -o: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runIn("profile", "-o", "-", "--duration", "1s")
	if r.code == 0 || !strings.Contains(r.stderr, "-o -") {
		t.Errorf("profile -o -: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runIn("report", "-w", "-", "-o", "r.html", "--duration", "1s")
	if r.code == 0 || !strings.Contains(r.stderr, "-w -") {
		t.Errorf("report -w -: exit %d, stderr %q", r.code, r.stderr)
	}
	if os.Geteuid() == 0 {
		r = runIn("record", "-w", "-", "--", "/bin/echo", "to-stderr")
		if r.code != 0 {
			t.Fatalf("record -w -: exit %d, %s", r.code, r.stderr)
		}
		os.WriteFile(piped, []byte(r.stdout), 0o600)
		rd := run(t, "read", piped)
		if rd.code != 0 || !strings.Contains(rd.stdout, `argv=["/bin/echo", "to-stderr"]`) || rd.stderr != "" {
			t.Errorf("record -w - did not write a capture to stdout: exit %d, stderr %q", rd.code, rd.stderr)
		}
		if !strings.Contains(r.stderr, "to-stderr\n") {
			t.Errorf("the command's output did not go to stderr: %q", r.stderr)
		}
		// A page on stdout: the command's own output goes to stderr.
		r = runIn("report", "-o", "-", "--", "/bin/echo", "page-stderr")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "<!DOCTYPE html>") || !strings.Contains(r.stderr, "page-stderr\n") {
			t.Errorf("report -o - -- CMD: exit %d, stdout starts %q, stderr %q", r.code, clip(r.stdout, 40), r.stderr)
		}
	}
	if names := dirNames(t, dir); len(names) != 2 {
		t.Errorf("left behind: %v", names)
	}
}

func readAbsent(t *testing.T, path string) string {
	t.Helper()
	c, err := capture.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.Header().Meta["absent"]
}

// An output that cannot be written is found before tracing starts, and the
// error names it rather than a temporary file.
func TestOutputCheckedFirst(t *testing.T) {
	requireBPF(t)
	ro := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "ro,size=1m", "sysray-test", ro).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a read-only tmpfs: %v %s", err, out)
	}
	defer exec.Command("umount", ro).Run()
	for _, args := range [][]string{
		{"report", "-o", filepath.Join(ro, "r.html"), "--duration", "5s"},
		{"profile", "-o", filepath.Join(ro, "p.svg"), "--duration", "5s"},
		{"record", "-w", filepath.Join(ro, "c.sysray"), "--duration", "5s"},
		{"trace", "-o", filepath.Join(ro, "t.txt"), "--duration", "5s"},
		{"stat", "-o", filepath.Join(ro, "s.txt"), "--duration", "5s"},
		{"doctor", "-o", filepath.Join(ro, "d.txt"), "--duration", "5s"},
		{"report", "-o", filepath.Join(t.TempDir(), "r.html"), "-w", filepath.Join(ro, "c.sysray"), "--duration", "5s"},
	} {
		start := time.Now()
		r := run(t, args...)
		took := time.Since(start)
		name := args[2]
		if args[3] == "-w" {
			name = args[4]
		}
		if r.code == 0 || took > 3*time.Second || !strings.Contains(r.stderr, name+": read-only file system") {
			t.Errorf("sysray %v: exit %d after %v, stderr %q", args, r.code, took.Round(time.Millisecond), r.stderr)
		}
	}
}

// Two records to one file at once: the file ends up one whole capture, of
// the record that reports success; the other exits non-zero and says so.
func TestRecordConcurrent(t *testing.T) {
	alongside(t)
	requireBPF(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "c.sysray")
	// A record still running holds the file: a second one is refused.
	first := exec.Command(sysray, "record", "-w", file, "--", "sleep", "2")
	var firstErr bytes.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(file); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := run(t, "record", "-w", file, "--", "/bin/echo", "second")
	if r.code == 0 || !strings.Contains(r.stderr, "being written") {
		t.Errorf("second record: exit %d, stderr %q", r.code, r.stderr)
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("first record: %v, %s", err, firstErr.String())
	}
	rd := run(t, "read", file)
	if rd.code != 0 || rd.stderr != "" || !strings.Contains(rd.stdout, `argv=["sleep", "2"]`) || strings.Contains(rd.stdout, "second") {
		t.Errorf("after the refused second record: exit %d, stderr %q", rd.code, rd.stderr)
	}

	// Started together and writing at once: exactly one wins, whole. (One
	// that ends before the other begins is simply replaced by it, as by
	// any later run.)
	for round := range 3 {
		os.Remove(file)
		var wg sync.WaitGroup
		res := make([]result, 2)
		for i := range res {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Long enough that both are writing at once.
				res[i] = run(t, "record", "-w", file, "--", "sh", "-c", "sleep 3", "racer"+string(rune('A'+i)))
			}()
		}
		wg.Wait()
		won := -1
		for i, x := range res {
			if x.code == 0 {
				if won >= 0 {
					t.Fatalf("round %d: both records report success: %q, %q", round, res[0].stderr, res[1].stderr)
				}
				won = i
			}
		}
		if won < 0 {
			t.Fatalf("round %d: neither record succeeded: %q, %q", round, res[0].stderr, res[1].stderr)
		}
		rd := run(t, "read", file)
		winner, loser := "racer"+string(rune('A'+won)), "racer"+string(rune('B'-won))
		if rd.code != 0 || rd.stderr != "" || !strings.Contains(rd.stdout, winner) || strings.Contains(rd.stdout, loser) {
			t.Errorf("round %d: the file is not the winner's (%s) whole capture: exit %d, stderr %q, has winner %v, has loser %v; %q %q", round, winner, rd.code, rd.stderr, strings.Contains(rd.stdout, winner), strings.Contains(rd.stdout, loser), res[0].stderr, res[1].stderr)
		}
		if names := dirNames(t, dir); len(names) != 1 {
			t.Errorf("round %d: left behind: %v", round, names)
		}
	}
}

// A record killed while it traces leaves what it wrote at the name asked
// for, readable up to its last flushed block, and nothing beside it.
func TestRecordKilledLeavesCapture(t *testing.T) {
	alongside(t)
	requireBPF(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "c.sysray")
	writeCapture(t, file, "oldrun", 5)
	cmd := exec.Command(sysray, "record", "-w", file, "--", prog("getppid"), "1000000000")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Traced once the command has exec'd (sysray starts it then); a
	// busy host took over 3 s to get there. Then record flushes about
	// once a second.
	if !waitFor(60*time.Second, func() bool { return len(pidsOf(cmd.Process.Pid, "getppid")) == 1 }) {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatal("the command did not start under record in 60 s")
	}
	time.Sleep(2500 * time.Millisecond)
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
	r := run(t, "read", file)
	if r.code != 0 || !strings.Contains(r.stderr, "truncated") || strings.Contains(r.stdout, "oldrun") || strings.Count(r.stdout, "getppid() = ") < 1000 {
		t.Errorf("after kill -9: exit %d, %d getppid lines, stderr %q", r.code, strings.Count(r.stdout, "getppid() = "), r.stderr)
	}
	if names := dirNames(t, dir); len(names) != 1 {
		t.Errorf("left behind: %v", names)
	}
}
