package symbol

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// source reports where the symbols for addr in pid came from.
func (r *Resolver) source(pid uint32, addr uint64) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[pid]
	if p == nil {
		return "no process"
	}
	for _, m := range p.maps {
		if m.start <= addr && addr < m.end {
			if m.obj == nil || m.obj.img == nil {
				return "not loaded"
			}
			return m.obj.img.source
		}
	}
	return "no mapping"
}

const goMain = `package main

import (
	"fmt"
	"os"
	"reflect"
	"time"
)

//go:noinline
func work(n int) int { return n*2 + 1 }

func main() {
	fmt.Printf("%x\n", reflect.ValueOf(work).Pointer())
	os.Stdout.Sync()
	for work(1) > 0 {
		time.Sleep(time.Hour)
	}
}
`

func buildGo(t testing.TB, dir string, flags ...string) string {
	t.Helper()
	need(t, "go")
	write(t, filepath.Join(dir, "go.mod"), "module tiny\n\ngo 1.22\n")
	write(t, filepath.Join(dir, "main.go"), goMain)
	out := filepath.Join(dir, "tiny")
	run(t, dir, []string{"CGO_ENABLED=0", "GOFLAGS=", "GOTOOLCHAIN=local", "GOWORK=off"},
		"go", append(append([]string{"build", "-o", out}, flags...), ".")...)
	return out
}

const rustMain = `#[inline(never)]
fn work(x: u64) -> u64 { x * 3 + 1 }

fn main() {
    let f: fn(u64) -> u64 = work;
    println!("{:x}", f as usize);
    while std::hint::black_box(work(1)) > 0 {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}
`

func buildRust(t testing.TB, dir string, flags ...string) string {
	t.Helper()
	need(t, "rustc")
	write(t, filepath.Join(dir, "tiny.rs"), rustMain)
	out := filepath.Join(dir, "tiny")
	run(t, dir, nil, "rustc", append([]string{"-o", out, "tiny.rs"}, flags...)...)
	return out
}

// miniDebugInfo strips bin and embeds its function symbols as
// .gnu_debugdata, as Fedora's find-debuginfo does.
func miniDebugInfo(t testing.TB, bin string) {
	need(t, "nm", "objcopy", "strip", "xz", "comm", "awk")
	sh(t, filepath.Dir(bin), `bin='`+bin+`'
nm -D "$bin" --format=posix --defined-only | awk '{ print $1 }' | sort > dynsyms
nm "$bin" --format=posix --defined-only | awk '{ if ($2 == "T" || $2 == "t" || $2 == "D") print $1 }' | sort > funcsyms
comm -13 dynsyms funcsyms > keep_symbols
objcopy --only-keep-debug "$bin" mini.full
objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols=keep_symbols mini.full mini
strip --strip-all -R .comment "$bin"
rm -f mini.xz && xz mini
objcopy --add-section .gnu_debugdata=mini.xz "$bin"`)
}

func hasSection(t testing.TB, path, name string) bool {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return f.Section(name) != nil
}

// TestResolveBinaries runs real programs built in many ways and resolves the
// addresses of their functions, which the programs print themselves.
func TestResolveBinaries(t *testing.T) {
	type want struct {
		idx    int    // which printed address
		fn     string // expected Func at that address + 1
		file   string // expected File base name
		source string // where the symbols must have come from
	}
	cases := []struct {
		name  string
		build func(t *testing.T, dir string) string
		want  []want
		check func(t *testing.T, bin string) // asserts the build is what the case claims
	}{{
		name:  "non-PIE executable, .symtab",
		build: func(t *testing.T, dir string) string { return buildC(t, dir, "prog", "-g", "-no-pie") },
		want:  []want{{0, "target_static", "prog", "symtab"}, {1, "target_global", "prog", "symtab"}},
		check: func(t *testing.T, bin string) {
			if f, _ := elf.Open(bin); f == nil || f.Type != elf.ET_EXEC {
				t.Fatal("not ET_EXEC")
			}
		},
	}, {
		name:  "PIE executable, .symtab",
		build: func(t *testing.T, dir string) string { return buildC(t, dir, "prog", "-g", "-fPIE", "-pie") },
		want:  []want{{0, "target_static", "prog", "symtab"}, {1, "target_global", "prog", "symtab"}},
		check: func(t *testing.T, bin string) {
			if f, _ := elf.Open(bin); f == nil || f.Type != elf.ET_DYN {
				t.Fatal("not ET_DYN")
			}
		},
	}, {
		name: "stripped shared library, .dynsym only",
		build: func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "lib.c"), libC)
			run(t, dir, nil, "gcc", "-O0", "-shared", "-fPIC", "-o", "libanswer.so", "lib.c")
			run(t, dir, nil, "strip", "--strip-all", "libanswer.so")
			return buildC(t, dir, "prog", "-fPIE", "-pie", "-DWITH_LIB", "-L.", "-lanswer", "-Wl,-rpath,$ORIGIN")
		},
		want: []want{{3, "lib_answer", "libanswer.so", "dynsym"}, {1, "target_global", "prog", "symtab"}},
		check: func(t *testing.T, bin string) {
			if hasSection(t, filepath.Join(filepath.Dir(bin), "libanswer.so"), ".symtab") {
				t.Fatal("library still has .symtab")
			}
		},
	}, {
		// MiniDebugInfo leaves out what .dynsym has: both must be read.
		name: "shared library with MiniDebugInfo, .dynsym merged",
		build: func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "lib.c"), libC)
			run(t, dir, nil, "gcc", "-O0", "-shared", "-fPIC", "-o", "libanswer.so", "lib.c")
			miniDebugInfo(t, filepath.Join(dir, "libanswer.so"))
			return buildC(t, dir, "prog", "-fPIE", "-pie", "-DWITH_LIB", "-L.", "-lanswer", "-Wl,-rpath,$ORIGIN")
		},
		want: []want{{3, "lib_answer", "libanswer.so", "gnu_debugdata"}},
	}, {
		name: "stripped, MiniDebugInfo (.gnu_debugdata)",
		build: func(t *testing.T, dir string) string {
			bin := buildC(t, dir, "prog", "-fPIE", "-pie")
			miniDebugInfo(t, bin)
			return bin
		},
		want: []want{{0, "target_static", "prog", "gnu_debugdata"}, {1, "target_global", "prog", "gnu_debugdata"}},
		check: func(t *testing.T, bin string) {
			if hasSection(t, bin, ".symtab") || !hasSection(t, bin, ".gnu_debugdata") {
				t.Fatal("want .gnu_debugdata and no .symtab")
			}
		},
	}, {
		name: "stripped, .gnu_debuglink to a file beside it",
		build: func(t *testing.T, dir string) string {
			bin := buildC(t, dir, "prog", "-g", "-fPIE", "-pie", "-Wl,--build-id=none")
			sh(t, dir, `objcopy --only-keep-debug prog prog.debug
strip --strip-all prog
objcopy --add-gnu-debuglink=prog.debug prog`)
			return bin
		},
		want: []want{{0, "target_static", "prog", "debuglink"}},
		check: func(t *testing.T, bin string) {
			if hasSection(t, bin, ".symtab") || hasSection(t, bin, ".note.gnu.build-id") {
				t.Fatal("want no .symtab, no build-id: the CRC must be checked")
			}
		},
	}, {
		name: "stripped, .gnu_debuglink to .debug/",
		build: func(t *testing.T, dir string) string {
			bin := buildC(t, dir, "prog", "-g", "-no-pie")
			sh(t, dir, `mkdir -p .debug
objcopy --only-keep-debug prog .debug/prog.dbg
strip --strip-all prog
objcopy --add-gnu-debuglink=.debug/prog.dbg prog`)
			return bin
		},
		want: []want{{0, "target_static", "prog", "debuglink"}},
	}, {
		name: "stripped, debug file found by build-id",
		build: func(t *testing.T, dir string) string {
			bin := buildC(t, dir, "prog", "-g", "-fPIE", "-pie", "-Wl,--build-id=sha1")
			f, err := elf.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			id := buildID(f)
			f.Close()
			if len(id) != 40 {
				t.Fatalf("build-id %q", id)
			}
			sh(t, dir, fmt.Sprintf(`mkdir -p debug/.build-id/%s
objcopy --only-keep-debug prog debug/.build-id/%s/%s.debug
strip --strip-all prog`, id[:2], id[:2], id[2:]))
			return bin
		},
		want: []want{{0, "target_static", "prog", "build-id"}, {1, "target_global", "prog", "build-id"}},
	}, {
		name: "C++, demangled",
		build: func(t *testing.T, dir string) string {
			need(t, "g++")
			write(t, filepath.Join(dir, "prog.cc"), `#include <cstdio>
#include <unistd.h>
#include <vector>
namespace ns {
struct Widget {
	__attribute__((noinline)) static int spin(int n) { return n + 1; }
};
template <typename T> __attribute__((noinline)) T sum(const std::vector<T>& v) { T s{}; for (auto x : v) s += x; return s; }
}
int main() {
	std::vector<long> v{1, 2};
	std::printf("%lx %lx\n", (unsigned long)(void*)&ns::Widget::spin, (unsigned long)(void*)&ns::sum<long>);
	std::fflush(stdout);
	for (;;) pause();
	return ns::Widget::spin(1) + ns::sum(v);
}
`)
			run(t, dir, nil, "g++", "-O0", "-o", "prog", "prog.cc")
			return filepath.Join(dir, "prog")
		},
		want: []want{
			{0, "ns::Widget::spin(int)", "prog", "symtab"},
			{1, "long ns::sum<long>(std::vector<long, std::allocator<long> > const&)", "prog", "symtab"},
		},
	}, {
		name:  "Rust, legacy mangling",
		build: func(t *testing.T, dir string) string { return buildRust(t, dir) }, // stable rustc's default
		want:  []want{{0, "tiny::work", "tiny", "symtab"}},
	}, {
		name:  "Rust, v0 mangling",
		build: func(t *testing.T, dir string) string { return buildRust(t, dir, "-C", "symbol-mangling-version=v0") },
		want:  []want{{0, "tiny::work", "tiny", "symtab"}},
	}, {
		name:  "Go, .symtab",
		build: func(t *testing.T, dir string) string { return buildGo(t, dir) },
		want:  []want{{0, "main.work", "tiny", "symtab"}},
	}, {
		name:  "Go, stripped (-s -w): .gopclntab",
		build: func(t *testing.T, dir string) string { return buildGo(t, dir, "-ldflags=-s -w") },
		want:  []want{{0, "main.work", "tiny", "gopclntab"}},
		check: func(t *testing.T, bin string) {
			if hasSection(t, bin, ".symtab") {
				t.Fatal("Go binary still has .symtab")
			}
		},
	}, {
		name:  "Go PIE, stripped: .gopclntab",
		build: func(t *testing.T, dir string) string { return buildGo(t, dir, "-buildmode=pie", "-ldflags=-s -w") },
		want:  []want{{0, "main.work", "tiny", "gopclntab"}},
	}, {
		// Go before 1.16 put the table of PIE programs in .data.rel.ro:
		// renaming the section gives that layout with today's compiler.
		name: "Go, stripped, pclntab inside .data.rel.ro",
		build: func(t *testing.T, dir string) string {
			bin := buildGo(t, dir, "-ldflags=-s -w")
			if hasSection(t, bin, ".data.rel.ro") {
				t.Skip("this Go already has .data.rel.ro")
			}
			run(t, dir, nil, "objcopy", "--rename-section", ".gopclntab=.data.rel.ro", bin)
			return bin
		},
		want: []want{{0, "main.work", "tiny", "gopclntab"}},
		check: func(t *testing.T, bin string) {
			if hasSection(t, bin, ".gopclntab") {
				t.Fatal("still has .gopclntab")
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bin := tc.build(t, dir)
			if tc.check != nil {
				tc.check(t, bin)
			}
			c := start(t, bin)
			r := NewResolver()
			defer r.Close()
			r.DebugDir = filepath.Join(dir, "debug")
			for _, w := range tc.want {
				if w.idx >= len(c.addrs) {
					t.Fatalf("program printed %d addresses", len(c.addrs))
				}
				addr := c.addrs[w.idx] + 1
				got := r.Resolve(c.pid, addr)
				if got.Func != w.fn || got.Offset != 1 || filepath.Base(got.File) != w.file || got.Kernel || got.Addr != addr {
					t.Errorf("Resolve(%#x) = %+v, want %s+0x1 in %s", addr, got, w.fn, w.file)
				}
				if src := r.source(c.pid, addr); src != w.source {
					t.Errorf("symbols of %s came from %s, want %s", w.file, src, w.source)
				}
			}
		})
	}
}

// TestPerfMap resolves JIT code in anonymous memory through /tmp/perf-PID.map.
func TestPerfMap(t *testing.T) {
	c := start(t, buildC(t, t.TempDir(), "prog", "-no-pie"))
	jit := c.addrs[2]
	path := fmt.Sprintf("/tmp/perf-%d.map", c.pid)
	// An older entry at the same address must lose to the newer one.
	write(t, path, fmt.Sprintf("%x 40 stale_fn\n%x 40 LazyCompile:~hot app.js:1\n0x%x 0x10 second\n", jit, jit, jit+0x40))
	t.Cleanup(func() { os.Remove(path) })
	r := NewResolver()
	defer r.Close()
	for _, tc := range []struct {
		addr uint64
		want Frame
	}{
		{jit + 0x10, Frame{Addr: jit + 0x10, Func: "LazyCompile:~hot app.js:1", Offset: 0x10, File: path}},
		{jit + 0x48, Frame{Addr: jit + 0x48, Func: "second", Offset: 8, File: path}},
		{jit + 0x100, Frame{Addr: jit + 0x100, File: anonFile}},
	} {
		if got := r.Resolve(c.pid, tc.addr); got != tc.want {
			t.Errorf("Resolve(%#x) = %+v, want %+v", tc.addr, got, tc.want)
		}
	}
	// A JIT appends as it compiles: a later miss reads the file again.
	r.refresh = 0
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "%x 20 late_fn\n", jit+0x100)
	f.Close()
	if got := r.Resolve(c.pid, jit+0x104); got.Func != "late_fn" {
		t.Errorf("after append: %+v", got)
	}
}

// TestContainer runs a static binary where the host cannot see it by the
// path in /proc/PID/maps, and resolves it through map_files, through
// /proc/PID/root, and after the process has exited. "chroot" is the simple
// case: maps shows the host path. "pivot_root" is how container runtimes
// start a process: in its own mount namespace, whose root is the container
// image, so maps shows /jailed, which does not exist on the host.
func TestContainer(t *testing.T) {
	needRoot(t)
	need(t, "chroot", "unshare", "pivot_root", "mount")
	bin := buildC(t, t.TempDir(), "prog", "-static")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/jailed"); err == nil {
		t.Skip("/jailed exists on the host")
	}
	for _, how := range []string{"chroot", "pivot_root"} {
		for _, tc := range []struct {
			name       string
			noMapFiles bool
			afterExit  bool
		}{
			{"map_files", false, false},
			{"root", true, false},
			{"map_files, exited", false, true},
			{"root, exited", true, true},
		} {
			t.Run(how+"/"+tc.name, func(t *testing.T) {
				root := t.TempDir()
				if err := os.WriteFile(filepath.Join(root, "jailed"), data, 0o755); err != nil {
					t.Fatal(err)
				}
				var c *child
				file := filepath.Join(root, "jailed")
				if how == "chroot" {
					c = start(t, "chroot", root, "/jailed")
				} else {
					if err := os.Mkdir(filepath.Join(root, "old"), 0o755); err != nil {
						t.Fatal(err)
					}
					c = start(t, "unshare", "--mount", "--propagation=private", "sh", "-ec",
						`mount --bind "$1" "$1"; cd "$1"; pivot_root . old; exec /jailed`, "sh", root)
					file = "/jailed"
				}
				r := NewResolver()
				defer r.Close()
				r.noMapFiles = tc.noMapFiles
				if err := r.Snapshot(c.pid); err != nil {
					t.Fatal(err)
				}
				if tc.afterExit {
					c.stop()
					if _, err := os.Stat(fmt.Sprintf("/proc/%d", c.pid)); err == nil {
						t.Fatal("process still there")
					}
				}
				got := r.Resolve(c.pid, c.addrs[1]+2)
				want := Frame{Addr: c.addrs[1] + 2, Func: "target_global", Offset: 2, File: file}
				if got != want {
					t.Errorf("got %+v, want %+v", got, want)
				}
			})
		}
	}
}

// TestShared checks that processes of one binary share one symbol table,
// and that it outlives them for the next process.
func TestShared(t *testing.T) {
	bin := buildC(t, t.TempDir(), "prog", "-fPIE", "-pie")
	a, b := start(t, bin), start(t, bin)
	r := NewResolver()
	defer r.Close()
	for _, c := range []*child{a, b} {
		if got := r.Resolve(c.pid, c.addrs[0]); got.Func != "target_static" {
			t.Fatalf("pid %d: %+v", c.pid, got)
		}
	}
	obj := func(c *child) *object {
		for _, m := range r.procs[c.pid].maps {
			if m.path == bin {
				return m.obj
			}
		}
		t.Fatal("no mapping of", bin)
		return nil
	}
	if obj(a) != obj(b) || obj(a).refs != 2 {
		t.Fatalf("objects %p %p refs %d", obj(a), obj(b), obj(a).refs)
	}
	img := obj(a).img
	r.Forget(a.pid)
	r.Forget(b.pid)
	if r.open != 0 {
		t.Errorf("%d files still open", r.open)
	}
	c := start(t, bin)
	if got := r.Resolve(c.pid, c.addrs[1]); got.Func != "target_global" || obj(c).img != img {
		t.Errorf("third process did not reuse the table: %+v", got)
	}
}

// TestEvict resolves with a cache too small for two tables: each load drops
// the other, and answers stay right.
func TestEvict(t *testing.T) {
	dir := t.TempDir()
	a := start(t, buildC(t, dir, "a", "-no-pie"))
	b := start(t, buildC(t, dir, "b", "-fPIE", "-pie", "-Wl,--build-id=none"))
	r := NewResolver()
	defer r.Close()
	r.CacheBytes = 1
	for range 3 {
		for _, c := range []*child{a, b} {
			if got := r.Resolve(c.pid, c.addrs[0]+1); got.Func != "target_static" {
				t.Fatalf("pid %d: %+v", c.pid, got)
			}
		}
	}
	if len(r.live) != 1 {
		t.Errorf("%d tables live, want 1", len(r.live))
	}
}

// TestSnapshotAfterExit resolves a plain process after it exited.
func TestSnapshotAfterExit(t *testing.T) {
	c := start(t, buildC(t, t.TempDir(), "prog", "-fPIE", "-pie"))
	r := NewResolver()
	defer r.Close()
	if err := r.Snapshot(c.pid); err != nil {
		t.Fatal(err)
	}
	c.stop()
	if got := r.Resolve(c.pid, c.addrs[0]); got.Func != "target_static" {
		t.Errorf("after exit: %+v", got)
	}
	if err := r.Snapshot(c.pid); err == nil {
		t.Error("Snapshot of an exited process succeeded")
	}
	r.Forget(c.pid)
	if got := r.Resolve(c.pid, c.addrs[0]); got.Func != "" || got.File != Unknown {
		t.Errorf("after Forget: %+v", got)
	}
}

func TestUnknown(t *testing.T) {
	r := NewResolver()
	defer r.Close()
	self := uint32(os.Getpid())
	for _, tc := range []struct {
		name string
		pid  uint32
		addr uint64
		want Frame
	}{
		{"unmapped address", self, 0x10, Frame{Addr: 0x10, File: Unknown}},
		{"no such process", 1 << 30, 0x401000, Frame{Addr: 0x401000, File: Unknown}},
	} {
		if got := r.Resolve(tc.pid, tc.addr); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestVDSO resolves this test's own vDSO functions.
func TestVDSO(t *testing.T) {
	r := NewResolver()
	defer r.Close()
	o := r.vdsoObject()
	if o.err != nil {
		t.Skip("no vDSO:", o.err)
	}
	var start uint64
	data, _ := os.ReadFile("/proc/self/maps")
	maps, _ := parseMaps(strings.NewReader(string(data)))
	for _, m := range maps {
		if m.path == vdsoFile {
			start = m.start
		}
	}
	found := false
	for i, s := range o.img.syms {
		name := o.img.syms.name(i)
		if !strings.Contains(name, "clock_gettime") {
			continue
		}
		found = true
		addr := start + s.addr + 1 // vDSO segments start at offset 0
		got := r.Resolve(uint32(os.Getpid()), addr)
		if got.Func != name || got.Offset != 1 || got.File != vdsoFile {
			t.Errorf("Resolve(%#x) = %+v, want %s+1", addr, got, name)
		}
	}
	if !found {
		t.Error("no clock_gettime in the vDSO")
	}
}

// TestFakeProc drives the resolver over a hand-written /proc: vsyscall,
// anonymous and special mappings, paths with spaces, deleted files.
func TestFakeProc(t *testing.T) {
	proc := t.TempDir()
	dir := filepath.Join(proc, "42")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "maps"), `00400000-00401000 r--p 00000000 fd:01 123 /opt/my app/bin
00401000-00402000 r-xp 00001000 fd:01 123 /opt/my app/bin
7f0000000000-7f0000001000 rwxp 00000000 00:00 0 
7f0000002000-7f0000003000 r-xp 00000000 fd:01 99 /usr/lib/gone.so (deleted)
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
`)
	r := NewResolver()
	defer r.Close()
	r.procRoot = proc
	for _, tc := range []struct {
		addr uint64
		want Frame
	}{
		{0xffffffffff600000, Frame{Addr: 0xffffffffff600000, Func: "gettimeofday", File: vsyscallFile}},
		{0xffffffffff600400, Frame{Addr: 0xffffffffff600400, Func: "time", File: vsyscallFile}},
		{0xffffffffff600809, Frame{Addr: 0xffffffffff600809, Func: "getcpu", Offset: 9, File: vsyscallFile}},
		{0x401234, Frame{Addr: 0x401234, File: "/opt/my app/bin"}},
		{0x7f0000000010, Frame{Addr: 0x7f0000000010, File: anonFile}},
		{0x7f0000002010, Frame{Addr: 0x7f0000002010, File: "/usr/lib/gone.so"}},
		{0x7ffd00000010, Frame{Addr: 0x7ffd00000010, File: Unknown}}, // not executable
	} {
		if got := r.Resolve(42, tc.addr); got != tc.want {
			t.Errorf("Resolve(%#x) = %+v, want %+v", tc.addr, got, tc.want)
		}
	}
	maps := r.procs[42].maps
	if len(maps) != 4 || !maps[2].deleted {
		t.Errorf("maps = %+v", maps)
	}
}

func TestDemangle(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"_ZN2ns6Widget4spinEi", "ns::Widget::spin(int)"},
		{"_ZNSt6vectorIiSaIiEE9push_backEOi", "std::vector<int, std::allocator<int> >::push_back(int&&)"},
		{"_Z3fooi.cold", "foo(int) [clone .cold]"},
		{"_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write"},
		{"_RNvCs15kBYyAo9fc_7mycrate7example", "mycrate::example"},
		{"_RNvMNtCs1234_5tokio7runtimeNtB2_7Runtime8block_on", "<tokio::runtime::Runtime>::block_on"},
		{"main.work", "main.work"},
		{"_Znotmangled", "_Znotmangled"},
		{"printf", "printf"},
	} {
		if got := demangleName(tc.in); got != tc.want {
			t.Errorf("demangle(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFrameString(t *testing.T) {
	for _, tc := range []struct {
		f    Frame
		want string
	}{
		{Frame{Addr: 0x10, Func: "main", Offset: 0x1a, File: "/bin/x"}, "main+0x1a (/bin/x)"},
		{Frame{Addr: 0x10, Func: "main", File: "/bin/x"}, "main (/bin/x)"},
		{Frame{Addr: 0x10, File: Unknown}, "0x10 ([unknown])"},
	} {
		if got := tc.f.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.f, got, tc.want)
		}
	}
}

// BenchmarkResolve measures warm lookups in a running C program, spread
// over its executable and libc.
func BenchmarkResolve(b *testing.B) {
	c := start(b, buildC(b, b.TempDir(), "prog", "-fPIE", "-pie"))
	r := NewResolver()
	defer r.Close()
	var addrs []uint64
	r.Resolve(c.pid, c.addrs[0])
	for _, m := range r.procs[c.pid].maps {
		if m.isFile() {
			for a := m.start; a < m.end && len(addrs) < 1024; a += max((m.end-m.start)/256, 1) {
				addrs = append(addrs, a)
			}
		}
	}
	for _, a := range addrs {
		r.Resolve(c.pid, a)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		r.Resolve(c.pid, addrs[i%len(addrs)])
	}
}

// TestConcurrent resolves from several goroutines while others snapshot and
// forget; run with -race.
func TestConcurrent(t *testing.T) {
	dir := t.TempDir()
	a := start(t, buildC(t, dir, "a", "-no-pie"))
	b := start(t, buildC(t, dir, "b", "-fPIE", "-pie"))
	r := NewResolver()
	defer r.Close()
	r.CacheBytes = 64 << 10 // small enough to evict libc now and then
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				c := []*child{a, b}[(g+i)%2]
				switch i % 50 {
				case 10:
					r.Forget(c.pid)
				case 20:
					r.Snapshot(c.pid)
				}
				if got := r.Resolve(c.pid, c.addrs[1]+1); got.Func != "target_global" {
					t.Errorf("pid %d: %+v", c.pid, got)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestNoSymbols covers binaries without names: a fully stripped static
// program gives its file and link-time address, and a debuglink whose file
// is from another build (wrong CRC) is refused rather than trusted.
func TestNoSymbols(t *testing.T) {
	dir := t.TempDir()
	static := buildC(t, dir, "static", "-static", "-no-pie")
	run(t, dir, nil, "strip", "--strip-all", static)
	stale := buildC(t, dir, "stale", "-g", "-no-pie", "-Wl,--build-id=none")
	sh(t, dir, `objcopy --only-keep-debug stale stale.debug
strip --strip-all stale
objcopy --add-gnu-debuglink=stale.debug stale
gcc -O1 -g -no-pie -Wl,--build-id=none -o other target.c
objcopy --only-keep-debug other stale.debug`)
	for _, tc := range []struct {
		bin  string
		want func(addr uint64) Frame
	}{
		{static, func(a uint64) Frame { return Frame{Addr: a, Offset: a, File: static} }},
		{stale, func(a uint64) Frame { return Frame{Addr: a, Offset: a, File: stale} }},
	} {
		c := start(t, tc.bin)
		r := NewResolver()
		addr := c.addrs[1] + 1
		if got, want := r.Resolve(c.pid, addr), tc.want(addr); got != want {
			t.Errorf("%s: got %+v, want %+v", filepath.Base(tc.bin), got, want)
		}
		r.Close()
	}
}

// TestCorrupt feeds damaged tables to the reader: binaries come from any
// process on the host, and a bad one must cost its names, not the tracer.
func TestCorrupt(t *testing.T) {
	need(t, "strip")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "stripped")
	write(t, path, string(orig))
	run(t, "", nil, "strip", "--strip-all", path)
	stripped, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.NewFile(bytes.NewReader(stripped))
	if err != nil {
		t.Fatal(err)
	}
	pcln := ef.Section(".gopclntab")
	if pcln == nil {
		t.Skip("no .gopclntab")
	}
	for i := range 64 {
		data := bytes.Clone(stripped)
		// Smash a different stretch of the table each time, header first.
		at := int(pcln.Offset) + i*i*97%int(pcln.Size)
		for j := at; j < at+64 && j < len(data); j++ {
			data[j] ^= byte(0x5a + i)
		}
		_ = guard(func() error {
			ef, err := elf.NewFile(bytes.NewReader(data))
			if err != nil {
				return err
			}
			_, err = readImage(ef, "", debugSearch{})
			return err
		})
	}
	if err := guard(func() error { panic("boom") }); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("guard: %v", err)
	}
}
