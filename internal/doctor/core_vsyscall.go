package doctor

// The legacy vsyscall page, where fatal-signal and legacy-vsyscall both
// look for faults.

const (
	vsyscallPage = 0xffffffffff600000
	pageSize     = 4096
)

func inVsyscallPage(addr uint64) bool { return addr&^(pageSize-1) == vsyscallPage }
