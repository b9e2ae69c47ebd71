package event

import "testing"

func TestFaultFlags(t *testing.T) {
	tests := []struct {
		code uint64
		want string
	}{
		{0x0, "PAGE_NOT_PRESENT|READ_ACCESS|KERNEL_FAULT"},
		{0x4, "PAGE_NOT_PRESENT|READ_ACCESS|USER_FAULT"},
		{0x6, "PAGE_NOT_PRESENT|WRITE_ACCESS|USER_FAULT"},
		{0x7, "PROTECTION_VIOLATION|WRITE_ACCESS|USER_FAULT"},
		{0x14, "PAGE_NOT_PRESENT|READ_ACCESS|USER_FAULT|INSTRUCTION_FETCH"},
		{0x15, "PROTECTION_VIOLATION|READ_ACCESS|USER_FAULT|INSTRUCTION_FETCH"},
		{0x25, "PROTECTION_VIOLATION|READ_ACCESS|USER_FAULT|PROTECTION_KEY"},
		{0xd, "PROTECTION_VIOLATION|READ_ACCESS|USER_FAULT|RESERVED_BIT"},
		{0x47, "PROTECTION_VIOLATION|WRITE_ACCESS|USER_FAULT|SHADOW_STACK"},
		{0x8007, "PROTECTION_VIOLATION|WRITE_ACCESS|USER_FAULT|SGX"},
		{0x104, "PAGE_NOT_PRESENT|READ_ACCESS|USER_FAULT|0x100"},
	}
	for _, tt := range tests {
		if got := FaultFlags(tt.code); got != tt.want {
			t.Errorf("FaultFlags(%#x) = %q, want %q", tt.code, got, tt.want)
		}
	}
}

func TestVsyscallName(t *testing.T) {
	for nr, want := range map[uint32]string{0: "gettimeofday", 1: "time", 2: "getcpu", 3: "vsyscall_3"} {
		if got := VsyscallName(nr); got != want {
			t.Errorf("VsyscallName(%d) = %q, want %q", nr, got, want)
		}
	}
}
