package symbol

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func TestParseKallsyms(t *testing.T) {
	f, err := os.Open("testdata/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	k, err := ParseKallsyms(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		addr uint64
		fn   string
		off  uint64
		file string
	}{
		{"before any text", 0xffffffff80000000, "", 0, Unknown},
		{"aliases: global, fewer underscores", 0xffffffff81000010, "_stext", 0x10, KernelFile},
		{"aliases: not the ia32 entry", 0xffffffff81000604, "__x64_sys_getppid", 4, KernelFile},
		{"exact start", 0xffffffff81000100, "do_one", 0, KernelFile},
		{"data symbols do not split functions", 0xffffffff81000190, "do_one", 0x90, KernelFile},
		{"local text", 0xffffffff81000204, "do_two", 4, KernelFile},
		{"weak text", 0xffffffff81000310, "weak_fn", 0x10, KernelFile},
		{"past _etext is not code", 0xffffffff81000800, "", 0, Unknown},
		{"init text", 0xffffffff82000044, "init_fn", 4, KernelFile},
		{"past _einittext", 0xffffffff82000200, "", 0, Unknown},
		{"module", 0xffffffffc0001010, "mod_fn", 0x10, "[dummy]"},
		{"module global", 0xffffffffc0001090, "mod_other", 0x10, "[dummy]"},
		{"rust v0 demangled", 0xffffffffc0002008, "mycrate::example", 8, "[rust_mod]"},
		{"bpf program", 0xffffffffc0003020, "bpf_prog_6deef7357e7b4530_sd_fw_egress", 0x20, "[bpf]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := k.Resolve(tc.addr)
			want := Frame{Addr: tc.addr, Func: tc.fn, Offset: tc.off, File: tc.file, Kernel: true}
			if got != want {
				t.Errorf("Resolve(%#x) = %+v, want %+v", tc.addr, got, want)
			}
		})
	}
	// Module tags are shared, not one allocation per symbol.
	a, b := k.Resolve(0xffffffffc0001010).File, k.Resolve(0xffffffffc0001090).File
	if unsafe.StringData(a) != unsafe.StringData(b) {
		t.Error("module names are not shared")
	}
}

func TestParseKallsymsRestricted(t *testing.T) {
	f, err := os.Open("testdata/kallsyms-restricted")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := ParseKallsyms(f); !errors.Is(err, ErrRestricted) {
		t.Fatalf("err = %v, want ErrRestricted", err)
	}
	if _, err := ParseKallsyms(strings.NewReader("")); err == nil || errors.Is(err, ErrRestricted) {
		t.Fatalf("empty input: err = %v, want a plain error", err)
	}
}

// TestKernelLive resolves real kernel functions when this process may see
// kernel addresses (root with kptr_restrict < 2).
func TestKernelLive(t *testing.T) {
	k, err := LoadKernel()
	if errors.Is(err, ErrRestricted) {
		// The probe's stacks are named from the same table.
		unavailable(t, err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	if k2, _ := LoadKernel(); k2 != k {
		t.Error("LoadKernel read kallsyms twice")
	}
	k3, err := ReloadKernel()
	if err != nil || k3 == k || k3.Len() < k.Len()/2 {
		t.Fatalf("ReloadKernel: %v", err)
	}
	if k4, _ := LoadKernel(); k4 != k3 {
		t.Error("LoadKernel did not return the reloaded table")
	}
	want := map[string]uint64{"__x64_sys_getppid": 0, "do_nanosleep": 0}
	f, err := os.Open(KallsymsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 3 {
			if _, ok := want[fields[2]]; ok && (fields[1] == "t" || fields[1] == "T") {
				want[fields[2]], _ = strconv.ParseUint(fields[0], 16, 64)
			}
		}
	}
	found := 0
	for name, addr := range want {
		if addr == 0 {
			continue
		}
		found++
		got := k.Resolve(addr + 4)
		if got.Func != name || got.Offset != 4 || got.File != KernelFile || !got.Kernel {
			t.Errorf("Resolve(%s+4) = %+v", name, got)
		}
	}
	if found == 0 {
		t.Skip("neither __x64_sys_getppid nor do_nanosleep in kallsyms")
	}
}

func BenchmarkKernelResolve(b *testing.B) {
	k, err := LoadKernel()
	if err != nil {
		b.Skip(err)
	}
	addrs := make([]uint64, 1024)
	for i := range addrs {
		addrs[i] = k.syms[(i*7919)%len(k.syms)].addr + 3
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if k.Resolve(addrs[i&1023]).Addr == 0 {
			b.Fatal()
		}
	}
}

func BenchmarkLoadKernel(b *testing.B) {
	data, err := os.ReadFile(KallsymsPath)
	if err != nil {
		b.Skip(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseKallsyms(strings.NewReader(string(data))); err != nil {
			b.Skip(err)
		}
	}
}
