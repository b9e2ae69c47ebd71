package filter

import (
	"encoding/binary"
	"errors"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

type testEnv struct {
	arch       event.Arch
	cmdlines   map[uint32]string
	containers map[uint64]string
	names      map[uint64]string
}

func (e *testEnv) Arch() event.Arch          { return e.arch }
func (e *testEnv) Cmdline(pid uint32) string { return e.cmdlines[pid] }
func (e *testEnv) Container(_ uint32, cgroup uint64) Container {
	return Container{ID: e.containers[cgroup], Name: e.names[cgroup]}
}

var env = &testEnv{
	arch:       event.ArchAMD64,
	cmdlines:   map[uint32]string{100: "nginx -g daemon off;"},
	containers: map[uint64]string{7: "abc123def456"},
}

// inet4 is a struct sockaddr_in as the kernel copies it.
func inet4(ip [4]byte, port uint16) []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint16(b, 2) // AF_INET
	binary.BigEndian.PutUint16(b[2:], port)
	copy(b[4:], ip[:])
	return b
}

const (
	ms = 1_000_000
	us = 1_000
)

func neg(n int64) uint64 { return uint64(n) }

// samples are the events every match test is run against, by name; x86_64
// numbers.
var samples = []struct {
	name string
	ev   event.Event
}{
	{"openat", event.Event{Kind: event.KindSyscall, CPU: 3, PID: 100, TID: 101, Comm: "nginx", Cgroup: 7,
		Syscall: event.Syscall{Nr: 257, Args: [6]uint64{neg(-100), 0x7ffd1000, 0x41, 0o644}, Ret: -2, Latency: 1500 * us,
			Data: [6][]byte{1: []byte("/etc/passwd")}}}},
	{"accept4", event.Event{Kind: event.KindSyscall, CPU: 1, PID: 100, TID: 102, Comm: "nginx", Cgroup: 7,
		Syscall: event.Syscall{Nr: 288, Args: [6]uint64{6, 0x7ffd2000, 0x7ffd2100, 0}, Ret: 7, Latency: 150 * ms,
			Data: [6][]byte{1: inet4([4]byte{127, 0, 0, 1}, 8080)}}}},
	{"getppid", event.Event{Kind: event.KindSyscall, CPU: 0, PID: 200, TID: 200, Comm: "bash",
		Syscall: event.Syscall{Nr: 110, Ret: 1, Latency: 200}}},
	{"mmap", event.Event{Kind: event.KindSyscall, CPU: 0, PID: 200, TID: 200, Comm: "bash",
		Syscall: event.Syscall{Nr: 9, Args: [6]uint64{0, 4096, 3, 0x22, neg(-1), 0}, Ret: -12, Latency: 3 * us}}},
	{"fadvise64", event.Event{Kind: event.KindSyscall, CPU: 2, PID: 300, TID: 300, Comm: "cp",
		Syscall: event.Syscall{Nr: 221, Args: [6]uint64{3, 0, 0, 4}, Ret: 0, Latency: 800}}},
	{"read-unfinished", event.Event{Kind: event.KindSyscall, CPU: 2, PID: 300, TID: 301, Comm: "cp",
		Syscall: event.Syscall{Nr: 0, Args: [6]uint64{0, 0x1000, 4096}, Latency: 2 * ms, Unfinished: true}}},
	{"fault", event.Event{Kind: event.KindPageFault, CPU: 1, PID: 400, TID: 400, Comm: "crasher",
		Fault: event.Fault{Addr: 0xdeadbeef, IP: 0x401000, Error: 6}}},
	{"sigsegv", event.Event{Kind: event.KindSignalDeliver, CPU: 1, PID: 400, TID: 400, Comm: "crasher",
		Signal: event.Signal{Sig: 11, Addr: 0xdeadbeef}}},
	{"exec", event.Event{Kind: event.KindExec, CPU: 0, PID: 500, TID: 500, Comm: "ls",
		Proc: event.Proc{Filename: "/usr/bin/ls", Argv: []string{"ls", "-l"}}}},
	{"exit", event.Event{Kind: event.KindExit, CPU: 0, PID: 500, TID: 500, Comm: "ls"}},
	{"drop", event.Event{Kind: event.KindDrop, CPU: 5, Drop: event.Drop{Count: 12}}},
}

func sampleNames() []string {
	var out []string
	for _, s := range samples {
		out = append(out, s.name)
	}
	return out
}

func except(names ...string) []string {
	return slices.DeleteFunc(sampleNames(), func(n string) bool { return slices.Contains(names, n) })
}

var syscallSamples = []string{"openat", "accept4", "getppid", "mmap", "fadvise64", "read-unfinished"}

func matching(t *testing.T, f *Filter, env Env) []string {
	t.Helper()
	var got []string
	for i := range samples {
		if f.Match(&samples[i].ev, env) {
			got = append(got, samples[i].name)
		}
	}
	return got
}

func TestMatch(t *testing.T) {
	sockName := event.FormatSockaddr(inet4([4]byte{127, 0, 0, 1}, 8080))
	tests := []struct {
		expr string
		want []string
	}{
		{"evt.type = openat", []string{"openat"}},
		{"evt.type == openat", []string{"openat"}},
		{"evt.type != openat", except("openat")},
		{"evt.type in (openat, getppid)", []string{"openat", "getppid"}},
		{"evt.type in (open, openat) and evt.res = ENOENT", []string{"openat"}},
		{"evt.type = page_fault", []string{"fault"}},
		{"evt.type = exit", []string{"exit"}},
		{"evt.type = read", []string{"read-unfinished"}},
		{"evt.type startswith open", []string{"openat"}},
		{"evt.type = syscall_0", []string{"read-unfinished"}},
		{"evt.kind = syscall", syscallSamples},
		{"evt.kind != syscall", except(syscallSamples...)},
		{"evt.kind in (exec, exit)", []string{"exec", "exit"}},
		{"evt.latency > 100ms", []string{"accept4"}},
		{"evt.latency >= 1.5ms", []string{"openat", "accept4", "read-unfinished"}},
		{"evt.latency > 1500000", []string{"accept4", "read-unfinished"}},
		{"evt.latency < 1us", []string{"getppid", "fadvise64"}},
		{"evt.latency <= 200ns", []string{"getppid"}},
		{"evt.latency = 3us", []string{"mmap"}},
		{"evt.latency in (200, 800ns)", []string{"getppid", "fadvise64"}},
		{"evt.failed", []string{"openat", "mmap"}},
		{"evt.failed = true", []string{"openat", "mmap"}},
		{"evt.failed = false", []string{"accept4", "getppid", "fadvise64"}},
		{"evt.failed != true", []string{"accept4", "getppid", "fadvise64"}},
		{"not evt.failed", except("openat", "mmap")},
		{"evt.res = ENOENT", []string{"openat"}},
		{"evt.res = enoent", []string{"openat"}},
		{"evt.res = -2", []string{"openat"}},
		{"evt.res < 0", []string{"openat", "mmap"}},
		{"evt.res >= 0", []string{"accept4", "getppid", "fadvise64"}},
		{"evt.res in (ENOENT, ENOMEM)", []string{"openat", "mmap"}},
		{"evt.res != EAGAIN", []string{"openat", "accept4", "getppid", "mmap", "fadvise64"}},
		{"evt.res > 0x6", []string{"accept4"}},
		{"evt.arg.flags contains O_CREAT", []string{"openat"}},
		{"evt.arg.flags contains MAP_PRIVATE", []string{"mmap"}},
		{"evt.arg.pathname exists", []string{"openat"}},
		{"evt.arg.dirfd = -100", []string{"openat"}},
		{"evt.arg.dirfd < 0", []string{"openat"}},
		{"evt.arg.fd = -1", []string{"mmap"}},
		{"evt.arg.fd = 3", []string{"fadvise64"}},
		{"evt.arg.mode = 0644", []string{"openat"}},
		{"evt.arg.advice = POSIX_FADV_DONTNEED", []string{"fadvise64"}},
		{"evt.arg.advice = 4", []string{"fadvise64"}},
		{"evt.arg.advice icontains dontneed", []string{"fadvise64"}},
		{"evt.arg.length >= 4096", []string{"mmap"}},
		{"evt.arg.count = 4096", []string{"read-unfinished"}},
		{"evt.cpu = 3", []string{"openat"}},
		{"evt.cpu >= 2", []string{"openat", "fadvise64", "read-unfinished", "drop"}},
		{"proc.name = nginx", []string{"openat", "accept4"}},
		{"proc.name icontains NGI", []string{"openat", "accept4"}},
		{"proc.name endswith sh", []string{"getppid", "mmap"}},
		{"proc.pid = 200", []string{"getppid", "mmap"}},
		{"thread.tid = 301", []string{"read-unfinished"}},
		{"proc.cmdline contains daemon", []string{"openat", "accept4"}},
		{"proc.cmdline exists", []string{"openat", "accept4"}},
		{"proc.cmdline != x", []string{"openat", "accept4"}},
		{"fd.name = /etc/passwd", []string{"openat"}},
		{"fd.name startswith /etc", []string{"openat"}},
		{"fd.name endswith passwd", []string{"openat"}},
		{"fd.name = /usr/bin/ls", []string{"exec"}},
		{"fd.name = " + quote(sockName), []string{"accept4"}},
		{"fd.name contains 127.0.0.1", []string{"accept4"}},
		{"fd.name exists", []string{"openat", "accept4", "exec"}},
		{"container.id = host", except("openat", "accept4")},
		{`container.id = ""`, except("openat", "accept4")},
		{"container.id = abc123def456", []string{"openat", "accept4"}},
		{"container.id startswith abc", []string{"openat", "accept4"}},
		{"container.id != host", []string{"openat", "accept4"}},
		{"evt.signal = SIGSEGV", []string{"sigsegv"}},
		{"evt.signal = segv", []string{"sigsegv"}},
		{"sig = 11", []string{"sigsegv"}},
		{"sig in (SIGBUS, SIGSEGV)", []string{"sigsegv"}},
		{"evt.signal exists", []string{"sigsegv"}},
		{"fault.addr = 0xdeadbeef", []string{"fault"}},
		{"fault.addr > 0x1000 and fault.addr < 0xffffffff", []string{"fault"}},
		{"fault.addr > -1", []string{"fault"}},

		// Precedence: not > and > or.
		{"evt.type = openat or evt.type = accept4 and evt.latency < 1ms", []string{"openat"}},
		{"(evt.type = openat or evt.type = accept4) and evt.latency > 1ms", []string{"openat", "accept4"}},
		{"not evt.type = openat and proc.name = nginx", []string{"accept4"}},
		{"not (evt.type = openat and proc.name = nginx)", except("openat")},
		{"!(evt.failed || proc.name = nginx) && evt.kind = syscall", []string{"getppid", "fadvise64", "read-unfinished"}},
		{"not not evt.failed", []string{"openat", "mmap"}},
		{"evt.type = accept4 and evt.latency > 100ms", []string{"accept4"}},
		{"evt.failed and proc.name = nginx", []string{"openat"}},
		{"evt.type=openat&&evt.res=-2", []string{"openat"}},
		{"evt.type = openat AND proc.name = 'nginx'", []string{"openat"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			f, err := Parse(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			if got := matching(t, f, env); !slices.Equal(got, tt.want) {
				t.Errorf("matches %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDocExamples keeps the examples of docs/filter.md valid.
func TestDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../../docs/filter.md")
	if err != nil {
		t.Skip(err)
	}
	_, examples, _ := strings.Cut(string(doc), "## Examples")
	examples, _, _ = strings.Cut(examples, "\n## ")
	rows := regexp.MustCompile("(?m)^\\| `(.+?)` \\|").FindAllStringSubmatch(examples, -1)
	if len(rows) < 4 {
		t.Fatalf("found %d examples", len(rows))
	}
	for _, r := range rows {
		expr := strings.ReplaceAll(r[1], `\|`, "|")
		if _, err := Parse(expr); err != nil {
			t.Errorf("%s: %v", expr, err)
		}
	}
}

func TestMatchNilEnvAndFilter(t *testing.T) {
	var nilFilter *Filter
	if !nilFilter.Match(&samples[0].ev, nil) || nilFilter.String() != "" {
		t.Error("a nil filter should match everything and print empty")
	}
	f, err := Parse("container.id = host and not proc.cmdline exists")
	if err != nil {
		t.Fatal(err)
	}
	if got := matching(t, f, nil); !slices.Equal(got, sampleNames()) {
		t.Errorf("with a nil Env matched %v, want all", got)
	}
}

func TestMatchOtherArch(t *testing.T) {
	nr, ok := event.SyscallByName(event.ArchARM64, "openat")
	if !ok {
		t.Skip("no arm64 table")
	}
	e := &event.Event{Kind: event.KindSyscall, Syscall: event.Syscall{Nr: nr}}
	arm := &testEnv{arch: event.ArchARM64}
	for expr, want := range map[string]bool{
		"evt.type = openat":          true,
		"evt.type in (open, openat)": true,
		"evt.type = getppid":         false,
	} {
		f, err := Parse(expr)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Match(e, arm); got != want {
			t.Errorf("%s on arm64: %v, want %v", expr, got, want)
		}
		// An arch without a resolved table falls back to comparing names.
		if got := f.Match(e, &testEnv{arch: 99}); got {
			t.Errorf("%s on an unknown arch matched", expr)
		}
	}
}

func TestSyntaxError(t *testing.T) {
	tests := []struct {
		expr string
		col  int
		msg  string
	}{
		{"evt.type = ", 12, `expected value after "="`},
		{"evt.typo = x", 1, `unknown field "evt.typo"; fields are `},
		{"(evt.type = openat", 19, `expected ")" to close "(" at column 1`},
		{"((evt.failed) or (evt.failed)", 30, `expected ")" to close "(" at column 1`},
		{"evt.failed)", 11, `")" without a matching "("`},
		{"", 1, "empty expression"},
		{"   ", 4, "empty expression"},
		{"evt.failed and", 15, `expected a field, "(" or "not" after "and"`},
		{"evt.failed or or", 15, `expected a field, "(" or "not" after "or", got "or"`},
		{"and", 1, `expected a field, "(" or "not", got "and"`},
		{"not", 4, `after "not"`},
		{"proc.name", 10, "expected an operator after proc.name"},
		{"proc.name nginx", 11, `expected an operator after proc.name, got "nginx"`},
		{"proc.name = and", 13, `expected value after "=", got "and"`},
		{"proc.name = (x)", 13, `expected value after "="`},
		{"proc.name > 3", 11, `operator ">" needs a number, and proc.name is text`},
		{"proc.pid contains 1", 10, `operator "contains" needs text, and proc.pid is a number`},
		{"evt.failed < 1", 12, `operator "<" needs a number or text, and evt.failed is a bool`},
		{"evt.failed = maybe", 14, `evt.failed: expected true or false, got "maybe"`},
		{"proc.pid = abc", 12, `proc.pid: expected a number, got "abc"`},
		{"proc.pid = 99999999999999999999", 12, "out of range"},
		{"evt.latency > 1.5", 15, `expected a duration`},
		{"evt.latency > fast", 15, `expected a duration`},
		{"evt.type in openat", 13, `expected "(" after "in"`},
		{"evt.type in (openat,", 21, `expected value after ","`},
		{"evt.type in ()", 14, `expected value after "("`},
		{"evt.type in (openat open)", 21, `expected "," or ")" to close "(" at column 13, got "open"`},
		{`proc.name = "abc`, 13, "unterminated string"},
		{`proc.name = 'abc"`, 13, "unterminated string"},
		{`proc.name = "a\qb"`, 15, `unknown escape "\q"`},
		{`proc.name = "a\x4"`, 15, `\x needs two hex digits`},
		{`proc.name = "a\ud800"`, 15, `\u needs 4 hex digits of a valid code point`},
		{`proc.name = "a\U0011000"`, 15, `\U needs 8 hex digits`},
		{"proc.name = x y", 15, `unexpected "y": expected and, or or the end`},
		{`"proc.name" = x`, 1, `expected a field, "(" or "not", got string "proc.name"`},
		{"evt.arg. = 1", 9, `expected a syscall argument name after "evt.arg."`},
		{"proc.name = é and é = 1", 19, `unknown field "é"`},
		{"proc.name = \"é", 13, "unterminated string"},
		{strings.Repeat("(", maxDepth+1) + "evt.failed" + strings.Repeat(")", maxDepth+1), maxDepth + 1, "nested more than"},
		{strings.Repeat("not ", maxDepth+1) + "evt.failed", 4*maxDepth + 1, "nested more than"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			f, err := Parse(tt.expr)
			if err == nil {
				t.Fatalf("parsed as %q, want an error", f)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %T %v, want *SyntaxError", err, err)
			}
			if se.Col != tt.col || !strings.Contains(se.Msg, tt.msg) || se.Expr != tt.expr {
				t.Errorf("got column %d %q, want column %d %q", se.Col, se.Msg, tt.col, tt.msg)
			}
		})
	}
}

// TestSyntaxErrorTables covers errors that depend on internal/event's names.
func TestSyntaxErrorTables(t *testing.T) {
	tests := []struct {
		expr string
		col  int
		msg  string
	}{
		{"evt.res = ENOEN", 11, `evt.res: expected a number or an errno name such as ENOENT, got "ENOEN"`},
		{"evt.signal = SIGFOO", 14, `expected a number or a signal name`},
		{"evt.type = opnat", 12, `unknown event type "opnat"`},
		{"evt.type in (openat, opnat)", 22, `unknown event type "opnat"`},
		{"evt.type = syscall", 12, `use evt.kind = syscall`},
		{"evt.kind = sycall", 12, `unknown event kind "sycall": expected one of syscall, page_fault,`},
		{"evt.arg.pathnmae exists", 9, `no syscall has an argument named "pathnmae"`},
		{"evt.arg.pathname < /etc", 20, `expected a number, got "/etc"`},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			_, err := Parse(tt.expr)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %v, want *SyntaxError", err)
			}
			if se.Col != tt.col || !strings.Contains(se.Msg, tt.msg) {
				t.Errorf("got column %d %q, want column %d %q", se.Col, se.Msg, tt.col, tt.msg)
			}
		})
	}
}

func TestSyntaxErrorString(t *testing.T) {
	_, err := Parse("evt.type = ")
	want := "filter: column 12: expected value after \"=\": evt.type = \n" +
		"evt.type = \n" +
		"           ^"
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}

	// A newline in the expression must not break the first line, and the
	// caret must still line up.
	_, err = Parse("evt.failed and\n\tproc.pid = x")
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 || lines[1] != "evt.failed and  proc.pid = x" || lines[2] != strings.Repeat(" ", 27)+"^" {
		t.Errorf("got %q", lines)
	}
}

func TestString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"evt.failed", "evt.failed"},
		{"evt.failed==true&&!evt.failed", "evt.failed = true and not evt.failed"},
		{"(evt.failed or proc.pid = 1) and proc.pid = 2", "(evt.failed or proc.pid = 1) and proc.pid = 2"},
		{"evt.failed or (proc.pid = 1 and proc.pid = 2)", "evt.failed or proc.pid = 1 and proc.pid = 2"},
		{"not (evt.failed and proc.pid = 1)", "not (evt.failed and proc.pid = 1)"},
		{"! ( evt.failed ) ", "not evt.failed"},
		{"((evt.failed or evt.failed) or evt.failed)", "evt.failed or evt.failed or evt.failed"},
		{`proc.name = "a b"`, `proc.name = "a b"`},
		{`proc.name = 'it\'s'`, `proc.name = "it's"`},
		{`proc.name = "and"`, `proc.name = "and"`},
		{`proc.name = ""`, `proc.name = ""`},
		{`proc.name = "tab\there"`, `proc.name = "tab\there"`},
		{`proc.name = "\x01\\"`, `proc.name = "\x01\\"`},
		{`proc.name = "\u00e9\U0001F600\a\b\f\v"`, "proc.name = \"é😀\\x07\\x08\\x0c\\x0b\""},
		{`proc.name = nginx`, `proc.name = nginx`},
		{`proc.name = "nginx"`, `proc.name = nginx`},
		{`proc.name CONTAINS x`, `proc.name contains x`},
		{`proc.cmdline contains "a=b"`, `proc.cmdline contains "a=b"`},
		{`proc.cmdline contains "a&&b"`, `proc.cmdline contains "a&&b"`},
		{`proc.cmdline contains a&b|c`, `proc.cmdline contains a&b|c`},
		{"evt.latency > 1.5ms", "evt.latency > 1.5ms"},
		{"evt.latency>=0x10", "evt.latency >= 0x10"},
		{"fd.name in ( /a , \"/b c\" )", `fd.name in (/a, "/b c")`},
		{"fd.name exists", "fd.name exists"},
		{"container.id = host", "container.id = host"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			f, err := Parse(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			g, err := Parse(f.String())
			if err != nil {
				t.Fatalf("re-parse: %v", err)
			}
			if g.String() != f.String() {
				t.Errorf("re-parsed String() = %q", g.String())
			}
		})
	}
}

// TestGoQuoted checks that a value quoted with Go's %q, as callers that
// build expressions do, reads back unchanged.
func TestGoQuoted(t *testing.T) {
	for _, s := range []string{"nginx", "a b", `"'\\`, "\x00\x7f\xff\xfe", "\u00a0é\u2028😀", "\a\b\f\n\r\t\v"} {
		f, err := Parse("proc.name = " + strconv.Quote(s))
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		e := &event.Event{Comm: s}
		if !f.Match(e, env) {
			t.Errorf("%q does not match itself", s)
		}
		if g, err := Parse(f.String()); err != nil || !g.Match(e, env) {
			t.Errorf("%q: String() %q does not read back: %v", s, f.String(), err)
		}
	}
}

func TestHints(t *testing.T) {
	none := []uint32{}
	tests := []struct {
		expr string
		arch event.Arch
		nrs  []uint32
		lat  uint64
	}{
		{"evt.type = openat", event.ArchAMD64, []uint32{257}, 0},
		{"evt.type in (openat, open) and evt.res = ENOENT", event.ArchAMD64, []uint32{2, 257}, 0},
		{"evt.type = accept4 and evt.latency > 100ms", event.ArchAMD64, []uint32{288}, 100*ms + 1},
		{"evt.type = accept4 and evt.latency > 100ms", event.ArchARM64, []uint32{242}, 100*ms + 1},
		{"evt.type = open", event.ArchARM64, none, 0},
		{"evt.type = openat", 99, nil, 0},
		{"evt.type = exit", event.ArchAMD64, []uint32{60}, 0},
		{"evt.type = page_fault", event.ArchAMD64, none, 0},
		{"evt.latency >= 1ms", event.ArchAMD64, nil, ms},
		{"evt.latency = 3ms", event.ArchAMD64, nil, 3 * ms},
		{"evt.latency in (2ms, 1ms)", event.ArchAMD64, nil, ms},
		{"evt.latency != 3ms", event.ArchAMD64, nil, 0},
		{"evt.latency < 3ms", event.ArchAMD64, nil, 0},
		{"evt.latency > -1", event.ArchAMD64, nil, 0},
		{"not evt.latency < 5ms", event.ArchAMD64, nil, 5 * ms},
		{"not evt.latency <= 5ms", event.ArchAMD64, nil, 5*ms + 1},
		{"not evt.latency > 5ms", event.ArchAMD64, nil, 0},
		{"evt.latency > 1ms or evt.latency > 2ms", event.ArchAMD64, nil, ms + 1},
		{"evt.latency > 1ms and evt.latency > 2ms", event.ArchAMD64, nil, 2*ms + 1},
		{"evt.type = openat or proc.name = x", event.ArchAMD64, nil, 0},
		{"evt.type = openat or evt.type = getppid", event.ArchAMD64, []uint32{110, 257}, 0},
		{"evt.type in (openat, mmap) and evt.type in (mmap, getppid)", event.ArchAMD64, []uint32{9}, 0},
		{"evt.type = openat and evt.type = getppid", event.ArchAMD64, none, 0},
		{"evt.type != openat", event.ArchAMD64, nil, 0},
		{"not evt.type = openat", event.ArchAMD64, nil, 0},
		{"not evt.type != openat", event.ArchAMD64, []uint32{257}, 0},
		{"not (evt.type != openat or proc.pid = 1)", event.ArchAMD64, []uint32{257}, 0},
		{"not (evt.type != openat and proc.pid = 1)", event.ArchAMD64, nil, 0},
		{"evt.kind = syscall", event.ArchAMD64, nil, 0},
		{"evt.kind = exec", event.ArchAMD64, none, 0},
		{"evt.kind != syscall", event.ArchAMD64, none, 0},
		{"not evt.kind in (exec, syscall)", event.ArchAMD64, none, 0},
		{"evt.kind = exec or evt.type = openat", event.ArchAMD64, []uint32{257}, 0},
		{"evt.kind = exec or evt.latency > 1ms", event.ArchAMD64, nil, ms + 1},
		{"evt.kind = exec or evt.latency > 1ms and evt.type = mmap", event.ArchAMD64, []uint32{9}, ms + 1},
		{"evt.type startswith open", event.ArchAMD64, nil, 0},
		{"evt.failed", event.ArchAMD64, nil, 0},
		{"proc.name = nginx", event.ArchAMD64, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.arch.String()+" "+tt.expr, func(t *testing.T) {
			f, err := Parse(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			nrs, lat := f.Hints(tt.arch)
			if !slices.Equal(nrs, tt.nrs) || (nrs == nil) != (tt.nrs == nil) || lat != tt.lat {
				t.Errorf("Hints = %v (nil %v), %d; want %v (nil %v), %d", nrs, nrs == nil, lat, tt.nrs, tt.nrs == nil, tt.lat)
			}
		})
	}
	var nilFilter *Filter
	if nrs, lat := nilFilter.Hints(event.ArchAMD64); nrs != nil || lat != 0 {
		t.Errorf("nil filter hints %v, %d", nrs, lat)
	}
}

// checkHints fails when f's hints would make the kernel drop an event that
// f accepts.
func checkHints(t testing.TB, f *Filter, e *event.Event, env Env) {
	if e.Kind != event.KindSyscall || !f.Match(e, env) {
		return
	}
	nrs, lat := f.Hints(env.Arch())
	if nrs != nil && !slices.Contains(nrs, e.Syscall.Nr) {
		t.Fatalf("%q accepts syscall %d but hints allow only %v", f, e.Syscall.Nr, nrs)
	}
	if e.Syscall.Latency < lat {
		t.Fatalf("%q accepts latency %d but hints require %d", f, e.Syscall.Latency, lat)
	}
}

func TestNoAllocs(t *testing.T) {
	for _, expr := range []string{
		"evt.type = openat",
		"evt.type in (open, openat, openat2) and evt.res = ENOENT",
		"evt.kind = syscall and evt.latency > 1ms and not evt.failed",
		"proc.name = nginx or proc.pid = 1 or thread.tid in (1, 2) or evt.cpu = 3",
		"fd.name startswith /etc and container.id != host",
		"proc.name icontains NGINX",
	} {
		f, err := Parse(expr)
		if err != nil {
			t.Fatal(err)
		}
		e := &samples[0].ev
		if n := testing.AllocsPerRun(100, func() { f.Match(e, env) }); n != 0 {
			t.Errorf("%s: %v allocations per Match", expr, n)
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	for _, bm := range []struct{ name, expr string }{
		{"type", "evt.type = openat"},
		{"typical", "evt.type in (open, openat) and evt.res = ENOENT and proc.name != sshd"},
		{"latency", "evt.type = accept4 and evt.latency > 100ms"},
		{"fd.name", "fd.name startswith /etc"},
		{"arg", "evt.arg.flags contains O_CREAT"},
	} {
		f, err := Parse(bm.expr)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for i := range samples {
					f.Match(&samples[i].ev, env)
				}
			}
		})
	}
}

func TestContainerFields(t *testing.T) {
	full := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	env := &testEnv{arch: event.ArchAMD64, containers: map[uint64]string{9: full}, names: map[uint64]string{9: "web"}}
	in := &event.Event{Kind: event.KindSyscall, Cgroup: 9}
	host := &event.Event{Kind: event.KindSyscall, Cgroup: 1}
	for _, c := range []struct {
		expr     string
		in, host bool
	}{
		{"container.id = 0123456789ab", true, false},
		{"container.id = " + full, true, false},
		{"container.id = host", false, true},
		{"container.name = web", true, false},
		{"container.name exists", true, false},
		{"not container.name exists", false, true},
		{"k8s.pod.name exists", false, false},
	} {
		f, err := Parse(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if got := f.Match(in, env); got != c.in {
			t.Errorf("%s on a container event = %v", c.expr, got)
		}
		if got := f.Match(host, env); got != c.host {
			t.Errorf("%s on a host event = %v", c.expr, got)
		}
	}
}
