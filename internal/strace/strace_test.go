package strace

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// convert runs a log through the converter and returns its events.
func convert(t *testing.T, log string) []event.Event {
	t.Helper()
	var out []event.Event
	c := NewConverter(event.ArchAMD64, func(e *event.Event) error { out = append(out, *e); return nil })
	for i, line := range strings.Split(strings.TrimSpace(log), "\n") {
		l, err := Parse(strings.TrimSpace(line))
		if err != nil {
			t.Fatalf("line %d %q: %v", i+1, line, err)
		}
		if err := c.Feed(&l, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func nr(t *testing.T, name string) uint32 {
	t.Helper()
	n, ok := event.SyscallByName(event.ArchAMD64, name)
	if !ok {
		t.Fatalf("no syscall %s", name)
	}
	return n
}

func syscalls(evs []event.Event) []event.Event {
	var out []event.Event
	for _, e := range evs {
		if e.Kind == event.KindSyscall {
			out = append(out, e)
		}
	}
	return out
}

func TestParseCall(t *testing.T) {
	l, err := Parse(`9138  1795457949.266541 openat(AT_FDCWD</tmp/imp>, "/tmp/imp/f", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0640) = 3</tmp/imp/f> <0.000080>`)
	if err != nil {
		t.Fatal(err)
	}
	if l.Kind != LineCall || l.TID != 9138 || l.Name != "openat" || l.Ret != 3 || l.Latency != 80000 || !l.HasLat {
		t.Fatalf("%+v", l)
	}
	if l.Time != 1795457949266541000 {
		t.Errorf("time %d: the microseconds must survive exactly", l.Time)
	}
	l, err = Parse(`[pid  42] 12:00:01.500000 openat(AT_FDCWD, "/x", O_RDONLY) = -1 ENOENT (No such file or directory) <0.000010>`)
	if err != nil || l.TID != 42 || l.Ret != -2 || l.Time != (12*3600+1)*1e9+5e8 {
		t.Fatalf("%+v %v", l, err)
	}
	l, err = Parse(`3 1.0 openat(AT_FDCWD, "/tmp/a b", O_RDONLY) = 4</tmp/a b> <0.000001>`)
	if err != nil || l.Ret != 4 || l.Latency != 1000 {
		t.Fatalf("a -yy path with a space: %+v %v", l, err)
	}
	// -X raw's errno, and a string holding what looks like the end of a call.
	l, err = Parse(`write(1, "x) = 5 <1.0>", 11) = -1 (errno 9) <0.000003>`)
	if err != nil || l.Ret != -9 || l.Latency != 3000 || l.TID != 0 || l.HasTime {
		t.Fatalf("%+v %v", l, err)
	}
	// A restart code: the call did return, to be restarted.
	l, err = Parse(`9168  1795457949.490991 <... clock_nanosleep resumed>{tv_sec=0, tv_nsec=999826288}) = ? ERESTART_RESTARTBLOCK (Interrupted by signal) <0.000338>`)
	if err != nil || l.Kind != LineResumed || l.NoReturn || l.Ret != -516 || l.Args != "{tv_sec=0, tv_nsec=999826288}" {
		t.Fatalf("%+v %v", l, err)
	}
}

func TestParseNotStrace(t *testing.T) {
	for _, s := range []string{
		"hello world",
		"# a comment",
		`9138  1795457949.265612 openat(AT_FDCWD, "/et`, // cut inside a string
		`9138  1795457949.265612 openat(AT_FDCWD, "/etc") =`,
		"+++ exited +++",
		"\x7fELF\x02\x01\x01",
	} {
		if l, err := Parse(s); err == nil {
			t.Errorf("%q parsed as %+v", s, l)
		}
	}
}

// Two threads interleave their halves; each resumed half joins its own start.
func TestResumedAcrossThreads(t *testing.T) {
	evs := convert(t, `
100 1.000000 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM, child_tid=0x7f0, parent_tid=0x7f0, exit_signal=0, stack=0x7e0, stack_size=0x7fff80, tls=0x7f6} => {parent_tid=[101]}, 88) = 101 <0.000040>
100 1.000100 read(3</tmp/a>, <unfinished ...>
101 1.000200 mmap(NULL, 8392704, PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_STACK, -1, 0 <unfinished ...>
100 1.000300 <... read resumed>"abc", 4096) = 3 <0.000200>
101 1.000400 <... mmap resumed>) = 0x7f0000 <0.000200>
101 1.000500 openat(AT_FDCWD, "/nonexistent", O_RDONLY) = -1 ENOENT (No such file or directory) <0.000010>
`)
	var fork *event.Event
	for i := range evs {
		if evs[i].Kind == event.KindFork {
			fork = &evs[i]
		}
	}
	if fork == nil || fork.Proc.ChildTID != 101 || fork.Proc.ChildPID != 100 || !fork.Proc.Thread {
		t.Fatalf("fork %+v", fork)
	}
	sc := syscalls(evs)
	if len(sc) != 4 {
		t.Fatalf("%d syscalls, want 4: %+v", len(sc), sc)
	}
	rd, mm, op := sc[1], sc[2], sc[3]
	if rd.TID != 100 || rd.Syscall.Nr != nr(t, "read") || rd.Syscall.Ret != 3 || rd.Time != 1000100000 || rd.Syscall.Latency != 200000 {
		t.Errorf("read %+v", rd)
	}
	if rd.Syscall.Args[0] != 3 || rd.Syscall.Args[2] != 4096 {
		t.Errorf("read args %v: the -yy path must not hide the fd, the resumed half holds the count", rd.Syscall.Args)
	}
	if mm.TID != 101 || mm.PID != 100 || mm.Syscall.Nr != nr(t, "mmap") || mm.Syscall.Ret != 0x7f0000 || mm.Time != 1000200000 {
		t.Errorf("mmap %+v", mm)
	}
	if want := uint64(0x2 | 0x20 | 0x20000); mm.Syscall.Args[3] != want || mm.Syscall.Args[1] != 8392704 || mm.Syscall.Args[4] != ^uint64(0) {
		t.Errorf("mmap args %#x, want flags %#x", mm.Syscall.Args, want)
	}
	if op.Syscall.Ret != -2 || string(op.Syscall.Data[1]) != "/nonexistent" || op.PID != 100 {
		t.Errorf("openat %+v", op)
	}
	if got := event.FormatSyscall(event.ArchAMD64, &op.Syscall); got != `openat(AT_FDCWD, "/nonexistent", O_RDONLY) = -1 ENOENT (No such file or directory)` {
		t.Errorf("openat prints as %s", got)
	}
}

// A thread's first lines can come before its creator's clone returned; a
// first pass puts it in the right process.
func TestThreadBeforeCloneReturns(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	os.WriteFile(log, []byte(`7 1.0 clone(child_stack=0x7f00, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID, parent_tid=[8], tls=0x7f10, child_tidptr=0x7f20 <unfinished ...>
8 1.1 getppid() = 1 <0.000001>
7 1.2 <... clone resumed>) = 8 <0.000300>
`), 0o600)
	st, scanned, err := Scan([]string{log}, event.ArchAMD64)
	if err != nil {
		t.Fatal(err)
	}
	var evs []event.Event
	if err := Convert([]string{log}, event.ArchAMD64, scanned, func(e *event.Event) error { evs = append(evs, *e); return nil }); err != nil {
		t.Fatal(err)
	}
	if st.Events != uint64(len(evs)) || len(evs) != 3 {
		t.Fatalf("%d events, scan said %d", len(evs), st.Events)
	}
	if evs[0].TID != 8 || evs[0].PID != 7 {
		t.Errorf("getppid of the new thread has pid %d tid %d, want 7 and 8", evs[0].PID, evs[0].TID)
	}
	if c := evs[2]; c.Syscall.Args[0]&0x10000 == 0 || c.Syscall.Args[1] != 0x7f00 || c.Syscall.Args[4] != 0x7f10 || c.Syscall.Args[3] != 0x7f20 {
		t.Errorf("clone's named arguments in the kernel's order: %#x", c.Syscall.Args)
	}
}

func TestSignalsAndExits(t *testing.T) {
	evs := convert(t, `
5 2.0 execve("/usr/bin/crash-me-with-a-long-name", ["crash-me", "-x"], 0x7ffd /* 3 vars */) = 0 <0.000100>
5 2.1 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f) = 6 <0.000100>
6 2.2 --- SIGSEGV {si_signo=SIGSEGV, si_code=SEGV_MAPERR, si_addr=0xffffffffff600400} ---
6 2.3 +++ killed by SIGSEGV (core dumped) +++
5 2.4 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_DUMPED, si_pid=6, si_uid=0, si_status=SIGSEGV, si_utime=0, si_stime=0} ---
5 2.5 exit_group(3) = ?
5 2.6 +++ exited with 3 +++
`)
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind.String())
	}
	want := "exec syscall fork syscall signal_generate exit signal_generate syscall exit"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
	x := evs[0]
	if x.Proc.Filename != "/usr/bin/crash-me-with-a-long-name" || strings.Join(x.Proc.Argv, " ") != "crash-me -x" || x.Comm != "crash-me-with-a" {
		t.Errorf("exec %+v (comm %q)", x.Proc, x.Comm)
	}
	if f := evs[2]; f.Proc.ChildPID != 6 || f.Proc.Thread || f.Proc.ChildComm != "crash-me-with-a" {
		t.Errorf("fork %+v", f.Proc)
	}
	sg := evs[4].Signal
	if sg.Sig != 11 || sg.Code != 1 || sg.Addr != 0xffffffffff600400 || sg.TargetTID != 6 || sg.TargetPID != 6 {
		t.Errorf("SIGSEGV %+v", sg)
	}
	if code, sig, core := evs[5].Proc.Status(); sig != 11 || !core || code != 0 || !evs[5].Proc.GroupDead || evs[5].Comm != "crash-me-with-a" {
		t.Errorf("child's exit %+v", evs[5].Proc)
	}
	if sc := evs[6].Signal; sc.Sig != 17 || sc.SenderPID != 6 || event.SigCodeName(17, int(sc.Code)) != "CLD_DUMPED" {
		t.Errorf("SIGCHLD %+v", sc)
	}
	eg := evs[7]
	if !eg.Syscall.Unfinished || eg.Syscall.Nr != nr(t, "exit_group") || eg.Syscall.Latency != 100000000 || eg.Syscall.Args[0] != 3 {
		t.Errorf("exit_group %+v: unfinished, lasting until the exit line", eg.Syscall)
	}
	if code, sig, _ := evs[8].Proc.Status(); code != 3 || sig != 0 || !evs[8].Proc.GroupDead || !evs[8].Proc.Unfinished {
		t.Errorf("exit %+v", evs[8].Proc)
	}
}

// A thread killed inside a call, and a call open when the log ends.
func TestCutOffCalls(t *testing.T) {
	evs := convert(t, `
9 1.0 clone3({flags=CLONE_VM|CLONE_THREAD|CLONE_SIGHAND, exit_signal=0, stack=0x1, stack_size=0x2, tls=0x3} => {parent_tid=[10]}, 88) = 10 <0.000010>
10 1.5 futex(0x7f, FUTEX_WAIT_PRIVATE, 0, NULL <unfinished ...>
9 2.0 read(0, <unfinished ...>
10 3.0 +++ killed by SIGKILL +++
9 3.0 +++ killed by SIGKILL +++
11 4.0 nanosleep({tv_sec=10, tv_nsec=0},  <unfinished ...>
`)
	sc := syscalls(evs)
	if len(sc) != 4 {
		t.Fatalf("%d syscalls: %+v", len(sc), sc)
	}
	fx := sc[1]
	if fx.Syscall.Nr != nr(t, "futex") || !fx.Syscall.Unfinished || fx.Syscall.Latency != 1.5e9 || fx.PID != 9 {
		t.Errorf("futex %+v", fx)
	}
	var exits []event.Event
	for _, e := range evs {
		if e.Kind == event.KindExit {
			exits = append(exits, e)
		}
	}
	if len(exits) != 2 || exits[0].Proc.GroupDead || !exits[1].Proc.GroupDead || !exits[0].Proc.Unfinished {
		t.Errorf("exits %+v: the thread first, then the process", exits)
	}
	if ns := sc[3]; ns.Syscall.Nr != nr(t, "nanosleep") || !ns.Syscall.Unfinished || ns.Syscall.Latency != 0 || ns.TID != 11 {
		t.Errorf("call open at the end of the log: %+v", ns)
	}
}

func TestStrings(t *testing.T) {
	evs := convert(t, `
1 1.0 <... read resumed>"x", 10) = 1 <0.250000>
1 1.0 syscall_0x1b6(0x1, 0x2) = -1 ENOSYS (Function not implemented) <0.000001>
1 1.0 openat(AT_FDCWD, "/a\tb\\\"c\x01\0012"..., O_RDONLY) = 3 <0.000001>
1 1.1 connect(3, {sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("127.0.0.1")}, 16) = 0 <0.000001>
1 1.2 prctl(PR_SET_NAME, "worker") = 0 <0.000001>
1 1.3 getppid() = 1 <0.000001>
`)
	// A call begun before the log: its return and latency, from its entry.
	if rd := evs[0]; rd.Syscall.Nr != nr(t, "read") || rd.Syscall.Ret != 1 || rd.Time != 0.75e9 || rd.Syscall.Latency != 0.25e9 {
		t.Errorf("read resumed without its start: %+v", rd)
	}
	if u := evs[1].Syscall; u.Nr != 0x1b6 || u.Ret != -38 {
		t.Errorf("syscall_0x1b6: %+v", u)
	}
	evs = evs[2:]
	op := evs[0].Syscall
	if string(op.Data[1]) != "/a\tb\\\"c\x01\x012" || !op.Truncated[1] {
		t.Errorf("path %q truncated %v", op.Data[1], op.Truncated[1])
	}
	if got := event.FormatSockaddr(evs[1].Syscall.Data[1]); got != `{sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("127.0.0.1")}` {
		t.Errorf("sockaddr %s", got)
	}
	if evs[3].Comm != "worker" {
		t.Errorf("comm after PR_SET_NAME: %q", evs[3].Comm)
	}
}

// Every name sysray prints for a flag maps back to the value it printed.
func TestNamesRoundTrip(t *testing.T) {
	mmap, open := nr(t, "mmap"), nr(t, "openat")
	for _, c := range []struct {
		nr  uint32
		arg int
		v   uint64
	}{
		{mmap, 3, 0x2 | 0x20 | 0x40}, {mmap, 2, 0x1 | 0x2 | 0x4}, {open, 2, 0x101000 | 0x80000 | 0x2},
		{open, 0, uint64(0xffffffffffffff9c)}, {open, 2, 0x410000}, {nr(t, "fadvise64"), 3, 4},
	} {
		s := event.Syscall{Nr: c.nr}
		s.Args[c.arg] = c.v
		_, text, _ := event.ArgValue(event.ArchAMD64, &s, "arg"+string(rune('0'+c.arg)))
		got, ok := value(text, nameTable(event.ArchAMD64, c.nr, c.arg))
		if !ok || got != c.v && !(c.arg == 0 && uint32(got) == uint32(c.v)) {
			t.Errorf("%s: %#x, want %#x", text, got, c.v)
		}
	}
}

func TestScanErrors(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk")
	os.WriteFile(junk, []byte("this is\nnot strace\n"), 0o600)
	if _, _, err := Scan([]string{junk}, event.ArchAMD64); err == nil || !strings.Contains(err.Error(), "not strace output") {
		t.Errorf("junk: %v", err)
	}
	// A log cut inside its last line: counted, named, the rest imported.
	cut := filepath.Join(dir, "cut")
	os.WriteFile(cut, []byte("1 1.0 getppid() = 0 <0.000001>\nnoise\n1 1.1 openat(AT_FDCWD, \"/et"), 0o600)
	st, _, err := Scan([]string{cut}, event.ArchAMD64)
	if err != nil {
		t.Fatal(err)
	}
	if st.Unparsed != 2 || !st.PartialEnd || strings.Join(st.BadLines, " ") != cut+":2 "+cut+":3" || st.Events != 1 {
		t.Errorf("%+v", st)
	}
}

// -ff files: no pid column, the pid in each name, merged by time.
func TestPerProcessFiles(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "log.20"), []byte("1700000001.0 clone(child_stack=NULL, flags=SIGCHLD) = 21 <0.000001>\n1700000001.3 getppid() = 1 <0.000001>\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "log.21"), []byte("1700000001.1 getpid() = 21 <0.000001>\n1700000001.2 +++ exited with 0 +++\n"), 0o600)
	files, err := Inputs([]string{filepath.Join(dir, "log")})
	if err != nil || len(files) != 2 {
		t.Fatalf("%v %v", files, err)
	}
	_, sc, err := Scan(files, event.ArchAMD64)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	Convert(files, event.ArchAMD64, sc, func(e *event.Event) error {
		name := e.Kind.String()
		if e.Kind == event.KindSyscall {
			name = event.SyscallName(event.ArchAMD64, e.Syscall.Nr)
		}
		got = append(got, name+"@"+string(rune('0'+e.TID-20)))
		return nil
	})
	if s := strings.Join(got, " "); s != "fork@0 clone@0 getpid@1 exit@1 getppid@0" {
		t.Errorf("merged: %s", s)
	}
}

// -r's times are since the previous line; -k's stack frames are skipped.
func TestRelativeTimesAndFrames(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	os.WriteFile(log, []byte(`     0.000000 getppid()           = 1 <0.000010>
 > /bin/x(main+0x10) [0x1150]
     0.500000 getpid()            = 2 <0.000010>
     0.250000 getuid()            = 0 <0.000010>
`), 0o600)
	st, sc, err := Scan([]string{log}, event.ArchAMD64)
	if err != nil {
		t.Fatal(err)
	}
	if st.Unparsed != 0 || st.Times != "relative" || st.PIDs {
		t.Errorf("%+v", st)
	}
	var times []uint64
	Convert([]string{log}, event.ArchAMD64, sc, func(e *event.Event) error { times = append(times, e.Time); return nil })
	if len(times) != 3 || times[1] != 5e8 || times[2] != 7.5e8 {
		t.Errorf("times %v, want 0, 0.5 s, 0.75 s", times)
	}
}

// strace -f writing to stderr: no pid while one thread is traced alone,
// and its own messages, here cutting a line in two.
func TestStderrLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	os.WriteFile(log, []byte(`1700000000.000001 execve("./a", ["./a"], 0x7ffd /* 1 var */) = 0 <0.000100>
1700000000.000002 set_tid_address(0x7f) = 300 <0.000001>
1700000000.000003 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLDstrace: Process 301 attached
, child_tidptr=0x7f) = 301 <0.000100>
[pid   301] 1700000000.000004 getppid() = 300 <0.000001>
[pid   300] 1700000000.000005 wait4(-1,  <unfinished ...>
[pid   301] 1700000000.000006 +++ exited with 0 +++
1700000000.000007 <... wait4 resumed>NULL, 0, NULL) = 301 <0.000002>
1700000000.000008 exit_group(0) = ?
1700000000.000009 +++ exited with 0 +++
`), 0o600)
	st, sc, err := Scan([]string{log}, event.ArchAMD64)
	if err != nil {
		t.Fatal(err)
	}
	if st.Unparsed != 0 || st.Unpaired != 0 {
		t.Fatalf("%+v", st)
	}
	var got []string
	Convert([]string{log}, event.ArchAMD64, sc, func(e *event.Event) error {
		name := e.Kind.String()
		if e.Kind == event.KindSyscall {
			name = event.SyscallName(event.ArchAMD64, e.Syscall.Nr)
		}
		got = append(got, name+"@"+strconv.Itoa(int(e.PID))+"/"+strconv.Itoa(int(e.TID)))
		return nil
	})
	want := "exec@300/300 execve@300/300 set_tid_address@300/300 fork@300/300 clone@300/300 getppid@301/301 exit@301/301 wait4@300/300 exit_group@300/300 exit@300/300"
	if s := strings.Join(got, " "); s != want {
		t.Errorf("got  %s\nwant %s", s, want)
	}
}

// --arch arm64: the same names, that table's numbers and flag values.
func TestArm64(t *testing.T) {
	var out []event.Event
	c := NewConverter(event.ArchARM64, func(e *event.Event) error { out = append(out, *e); return nil })
	l, err := Parse(`5 1.0 openat(AT_FDCWD, "/d", O_RDONLY|O_DIRECTORY) = 3 <0.000001>`)
	if err != nil {
		t.Fatal(err)
	}
	c.Feed(&l, 0)
	if len(out) != 1 || out[0].Syscall.Nr != 56 || out[0].Syscall.Args[2] != 0x4000 {
		t.Errorf("arm64 openat: %+v", out)
	}
}
