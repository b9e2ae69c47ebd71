package event

import (
	"strconv"
	"strings"
	"testing"
)

func TestSyscallName(t *testing.T) {
	tests := []struct {
		arch Arch
		nr   uint32
		want string
	}{
		{ArchAMD64, 0, "read"},
		{ArchAMD64, 1, "write"},
		{ArchAMD64, 2, "open"},
		{ArchAMD64, 3, "close"},
		{ArchAMD64, 9, "mmap"},
		{ArchAMD64, 13, "rt_sigaction"},
		{ArchAMD64, 17, "pread64"},
		{ArchAMD64, 56, "clone"},
		{ArchAMD64, 57, "fork"},
		{ArchAMD64, 58, "vfork"},
		{ArchAMD64, 59, "execve"},
		{ArchAMD64, 60, "exit"},
		{ArchAMD64, 61, "wait4"},
		{ArchAMD64, 62, "kill"},
		{ArchAMD64, 110, "getppid"},
		{ArchAMD64, 158, "arch_prctl"},
		{ArchAMD64, 218, "set_tid_address"},
		{ArchAMD64, 221, "fadvise64"},
		{ArchAMD64, 231, "exit_group"},
		{ArchAMD64, 257, "openat"},
		{ArchAMD64, 262, "newfstatat"},
		{ArchAMD64, 273, "set_robust_list"},
		{ArchAMD64, 288, "accept4"},
		{ArchAMD64, 302, "prlimit64"},
		{ArchAMD64, 318, "getrandom"},
		{ArchAMD64, 322, "execveat"},
		{ArchAMD64, 332, "statx"},
		{ArchAMD64, 334, "rseq"},
		{ArchAMD64, 435, "clone3"},
		{ArchAMD64, 437, "openat2"},
		{ArchAMD64, 439, "faccessat2"},
		{ArchAMD64, 449, "futex_waitv"},
		{ArchAMD64, 462, "mseal"},
		{ArchAMD64, 400, "syscall_400"}, // the hole before 424
		{ArchAMD64, 100000, "syscall_100000"},

		{ArchARM64, 17, "getcwd"},
		{ArchARM64, 25, "fcntl"},
		{ArchARM64, 56, "openat"},
		{ArchARM64, 57, "close"},
		{ArchARM64, 63, "read"},
		{ArchARM64, 64, "write"},
		{ArchARM64, 79, "newfstatat"},
		{ArchARM64, 80, "fstat"},
		{ArchARM64, 93, "exit"},
		{ArchARM64, 94, "exit_group"},
		{ArchARM64, 98, "futex"},
		{ArchARM64, 129, "kill"},
		{ArchARM64, 134, "rt_sigaction"},
		{ArchARM64, 172, "getpid"},
		{ArchARM64, 173, "getppid"},
		{ArchARM64, 178, "gettid"},
		{ArchARM64, 198, "socket"},
		{ArchARM64, 203, "connect"},
		{ArchARM64, 214, "brk"},
		{ArchARM64, 215, "munmap"},
		{ArchARM64, 220, "clone"},
		{ArchARM64, 221, "execve"},
		{ArchARM64, 222, "mmap"},
		{ArchARM64, 223, "fadvise64"},
		{ArchARM64, 226, "mprotect"},
		{ArchARM64, 242, "accept4"},
		{ArchARM64, 260, "wait4"},
		{ArchARM64, 261, "prlimit64"},
		{ArchARM64, 278, "getrandom"},
		{ArchARM64, 281, "execveat"},
		{ArchARM64, 291, "statx"},
		{ArchARM64, 293, "rseq"},
		{ArchARM64, 435, "clone3"},
		{ArchARM64, 462, "mseal"},
		{ArchARM64, 250, "syscall_250"}, // reserved for arch-specific calls, none on arm64
		{ArchARM64, 410, "syscall_410"}, // timerfd_gettime64 exists only on 32-bit

		{Arch(9), 0, "syscall_0"},
	}
	for _, tt := range tests {
		if got := SyscallName(tt.arch, tt.nr); got != tt.want {
			t.Errorf("SyscallName(%v, %d) = %q, want %q", tt.arch, tt.nr, got, tt.want)
		}
	}
}

// Legacy calls that asm-generic never had must not leak into the arm64 table.
func TestARM64HasNoLegacyCalls(t *testing.T) {
	for _, name := range []string{"open", "stat", "lstat", "fork", "vfork", "pipe", "poll", "select", "access", "dup2", "mkdir", "unlink", "rename", "arch_prctl", "epoll_wait", "getdents"} {
		if nr, ok := SyscallByName(ArchARM64, name); ok {
			t.Errorf("arm64 has %s = %d", name, nr)
		}
	}
}

func TestSyscallByNameRoundTrip(t *testing.T) {
	for _, a := range []Arch{ArchAMD64, ArchARM64} {
		seen := map[string]int{}
		for nr, name := range syscallTable(a) {
			if name == "" {
				continue
			}
			if prev, dup := seen[name]; dup {
				t.Errorf("%v: %q at both %d and %d", a, name, prev, nr)
			}
			seen[name] = nr
			got, ok := SyscallByName(a, name)
			if !ok || got != uint32(nr) {
				t.Errorf("SyscallByName(%v, %q) = %d, %v; want %d", a, name, got, ok, nr)
			}
			if SyscallName(a, uint32(nr)) != name {
				t.Errorf("SyscallName(%v, %d) != %q", a, nr, name)
			}
			if strings.ToLower(name) != name || strings.ContainsAny(name, " -") {
				t.Errorf("%v: odd name %q", a, name)
			}
		}
		if len(seen) < 300 {
			t.Errorf("%v: only %d syscalls", a, len(seen))
		}
	}
}

func TestSyscallByName(t *testing.T) {
	tests := []struct {
		arch   Arch
		name   string
		want   uint32
		wantOK bool
	}{
		{ArchAMD64, "openat", 257, true},
		{ArchARM64, "openat", 56, true},
		{ArchAMD64, "syscall_400", 400, true},
		{ArchAMD64, "syscall_257", 257, true},
		{ArchAMD64, "syscall_", 0, false},
		{ArchAMD64, "syscall_x", 0, false},
		{ArchAMD64, "syscall_-1", 0, false},
		{ArchAMD64, "nosuchcall", 0, false},
		{ArchAMD64, "OPENAT", 0, false},
		{ArchARM64, "open", 0, false},
		{Arch(9), "read", 0, false},
		{Arch(9), "syscall_1", 0, false},
	}
	for _, tt := range tests {
		got, ok := SyscallByName(tt.arch, tt.name)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("SyscallByName(%v, %q) = %d, %v; want %d, %v", tt.arch, tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestMaxSyscall(t *testing.T) {
	for _, a := range []Arch{ArchAMD64, ArchARM64} {
		max := MaxSyscall(a)
		if max < 462 {
			t.Errorf("MaxSyscall(%v) = %d, want at least mseal (462)", a, max)
		}
		if SyscallName(a, max) == "syscall_"+itoa(max) {
			t.Errorf("MaxSyscall(%v) = %d has no name", a, max)
		}
		if n := SyscallName(a, max+1); n != "syscall_"+itoa(max+1) {
			t.Errorf("SyscallName(%v, max+1) = %q", a, n)
		}
	}
	if MaxSyscall(Arch(9)) != 0 {
		t.Error("MaxSyscall of an unknown arch is not 0")
	}
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
