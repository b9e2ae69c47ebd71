package event

import (
	"strconv"
	"strings"
)

// faultBits are the optional bits of the x86 page-fault error code
// (arch/x86/include/asm/trap_pf.h), after the three that always get a name.
var faultBits = []flag{
	{1 << 3, "RESERVED_BIT"},
	{1 << 4, "INSTRUCTION_FETCH"},
	{1 << 5, "PROTECTION_KEY"},
	{1 << 6, "SHADOW_STACK"},
	{1 << 15, "SGX"},
}

// FaultFlags decodes an x86 page-fault error code. Bits 0-2 always produce
// a name, present or not, because "not present, read, user" is the answer to
// the usual question and an empty string would hide it:
// 0x14 is "PAGE_NOT_PRESENT|READ_ACCESS|USER_FAULT|INSTRUCTION_FETCH".
func FaultFlags(code uint64) string {
	var b strings.Builder
	if code&1 != 0 {
		b.WriteString("PROTECTION_VIOLATION")
	} else {
		b.WriteString("PAGE_NOT_PRESENT")
	}
	if code&2 != 0 {
		b.WriteString("|WRITE_ACCESS")
	} else {
		b.WriteString("|READ_ACCESS")
	}
	if code&4 != 0 {
		b.WriteString("|USER_FAULT")
	} else {
		b.WriteString("|KERNEL_FAULT")
	}
	appendRest(&b, appendFlags(&b, code&^7, faultBits))
	return b.String()
}

// VsyscallName names entry nr of the legacy vsyscall page.
func VsyscallName(nr uint32) string {
	switch nr {
	case 0:
		return "gettimeofday"
	case 1:
		return "time"
	case 2:
		return "getcpu"
	}
	return "vsyscall_" + strconv.FormatUint(uint64(nr), 10)
}
