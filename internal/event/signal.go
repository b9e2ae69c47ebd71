package event

import (
	"fmt"
	"strconv"
	"strings"
)

// signals follows the numbering x86_64 and arm64 share.
var signals = [...]string{
	1:  "SIGHUP",
	2:  "SIGINT",
	3:  "SIGQUIT",
	4:  "SIGILL",
	5:  "SIGTRAP",
	6:  "SIGABRT",
	7:  "SIGBUS",
	8:  "SIGFPE",
	9:  "SIGKILL",
	10: "SIGUSR1",
	11: "SIGSEGV",
	12: "SIGUSR2",
	13: "SIGPIPE",
	14: "SIGALRM",
	15: "SIGTERM",
	16: "SIGSTKFLT",
	17: "SIGCHLD",
	18: "SIGCONT",
	19: "SIGSTOP",
	20: "SIGTSTP",
	21: "SIGTTIN",
	22: "SIGTTOU",
	23: "SIGURG",
	24: "SIGXCPU",
	25: "SIGXFSZ",
	26: "SIGVTALRM",
	27: "SIGPROF",
	28: "SIGWINCH",
	29: "SIGIO",
	30: "SIGPWR",
	31: "SIGSYS",
}

var signalAliases = map[string]int{
	"SIGIOT":    6,
	"SIGCLD":    17,
	"SIGPOLL":   29,
	"SIGUNUSED": 31,
}

const (
	// sigRTMin is the first real-time signal user programs may use. The
	// kernel's real-time range starts at 32, but glibc keeps 32 and 33 for
	// itself (thread cancellation and setxid), so kill -l and sysray both
	// call 34 SIGRTMIN.
	sigRTMin  = 34
	sigRTBase = 32 // the kernel's SIGRTMIN, which strace's SIGRT_<n> counts from
	sigMax    = 64
)

// SignalName returns the name of sig: "SIGSEGV", "SIGRTMIN", "SIGRTMIN+3".
// Signals 32 and 33, which glibc reserves, are "SIGRT_0" and "SIGRT_1" as in
// strace. It returns "" for 0 and for numbers outside 1..64.
func SignalName(sig int) string {
	switch {
	case sig > 0 && sig < len(signals):
		return signals[sig]
	case sig >= sigRTBase && sig < sigRTMin:
		return "SIGRT_" + strconv.Itoa(sig-sigRTBase)
	case sig == sigRTMin:
		return "SIGRTMIN"
	case sig > sigRTMin && sig <= sigMax:
		return "SIGRTMIN+" + strconv.Itoa(sig-sigRTMin)
	}
	return ""
}

// SignalByName parses a signal as a user may write it: "SIGSEGV", "segv",
// "11", "SIGRTMIN+2", "SIGRTMAX-1" or strace's "SIGRT_2".
func SignalByName(s string) (int, bool) {
	s = strings.ToUpper(strings.TrimSpace(s))
	if n, err := strconv.Atoi(s); err == nil {
		if n > 0 && n <= sigMax {
			return n, true
		}
		return 0, false
	}
	if !strings.HasPrefix(s, "SIG") {
		s = "SIG" + s
	}
	if n, ok := signalAliases[s]; ok {
		return n, true
	}
	for n, name := range signals {
		if name != "" && name == s {
			return n, true
		}
	}
	rt := func(base int, rest string, sign int) (int, bool) {
		if rest == "" {
			return base, true
		}
		off, err := strconv.Atoi(rest[1:])
		if err != nil || off < 0 || (rest[0] != '+' && rest[0] != '-') {
			return 0, false
		}
		if (rest[0] == '+') != (sign > 0) {
			return 0, false
		}
		n := base + sign*off
		return n, n >= sigRTBase && n <= sigMax
	}
	switch {
	case strings.HasPrefix(s, "SIGRTMIN"):
		return rt(sigRTMin, s[len("SIGRTMIN"):], +1)
	case strings.HasPrefix(s, "SIGRTMAX"):
		return rt(sigMax, s[len("SIGRTMAX"):], -1)
	case strings.HasPrefix(s, "SIGRT_"):
		off, err := strconv.Atoi(s[len("SIGRT_"):])
		if err == nil && off >= 0 && sigRTBase+off <= sigMax {
			return sigRTBase + off, true
		}
	}
	return 0, false
}

// siCodes are the si_code values any signal may carry: they say who sent it
// rather than why.
var siCodes = map[int]string{
	0x80: "SI_KERNEL",
	0:    "SI_USER",
	-1:   "SI_QUEUE",
	-2:   "SI_TIMER",
	-3:   "SI_MESGQ",
	-4:   "SI_ASYNCIO",
	-5:   "SI_SIGIO",
	-6:   "SI_TKILL",
	-7:   "SI_DETHREAD",
	-60:  "SI_ASYNCNL",
}

// sigCodes are the positive si_code values, which mean something different
// for each signal that the kernel raises for a fault or a child.
var sigCodes = map[int][]string{
	4: {1: "ILL_ILLOPC", "ILL_ILLOPN", "ILL_ILLADR", "ILL_ILLTRP", "ILL_PRVOPC",
		"ILL_PRVREG", "ILL_COPROC", "ILL_BADSTK", "ILL_BADIADDR"},
	5: {1: "TRAP_BRKPT", "TRAP_TRACE", "TRAP_BRANCH", "TRAP_HWBKPT", "TRAP_UNK", "TRAP_PERF"},
	7: {1: "BUS_ADRALN", "BUS_ADRERR", "BUS_OBJERR", "BUS_MCEERR_AR", "BUS_MCEERR_AO"},
	8: {1: "FPE_INTDIV", "FPE_INTOVF", "FPE_FLTDIV", "FPE_FLTOVF", "FPE_FLTUND",
		"FPE_FLTRES", "FPE_FLTINV", "FPE_FLTSUB", 14: "FPE_FLTUNK", 15: "FPE_CONDTRAP"},
	11: {1: "SEGV_MAPERR", "SEGV_ACCERR", "SEGV_BNDERR", "SEGV_PKUERR", "SEGV_ACCADI",
		"SEGV_ADIDERR", "SEGV_ADIPERR", "SEGV_MTEAERR", "SEGV_MTESERR", "SEGV_CPERR"},
	17: {1: "CLD_EXITED", "CLD_KILLED", "CLD_DUMPED", "CLD_TRAPPED", "CLD_STOPPED", "CLD_CONTINUED"},
	29: {1: "POLL_IN", "POLL_OUT", "POLL_MSG", "POLL_ERR", "POLL_PRI", "POLL_HUP"},
	31: {1: "SYS_SECCOMP", "SYS_USER_DISPATCH"},
}

// SigCodeName names the si_code of signal sig: "SEGV_MAPERR" for (11, 1),
// "SI_TKILL" for (sig, -6). Codes it does not know come back in decimal.
func SigCodeName(sig, code int) string {
	if n, ok := siCodes[code]; ok {
		return n
	}
	if c := sigCodes[sig]; code > 0 && code < len(c) && c[code] != "" {
		return c[code]
	}
	return strconv.Itoa(code)
}

// Audit architectures (linux/audit.h) that si_arch names in a seccomp SIGSYS.
const (
	auditArchX86_64  = 0xc000003e
	auditArchAArch64 = 0xc00000b7
	auditArchI386    = 0x40000003
)

// SeccompCall names the call a seccomp SIGSYS refused: "clone3", or, for a
// call of an ABI sysray has no table for (a 32-bit program on a 64-bit
// kernel), "syscall 120 of i386".
func (s *Signal) SeccompCall() string {
	switch s.Arch {
	case auditArchX86_64:
		return SyscallName(ArchAMD64, uint32(s.Syscall))
	case auditArchAArch64:
		return SyscallName(ArchARM64, uint32(s.Syscall))
	case auditArchI386:
		return fmt.Sprintf("syscall %d of i386", s.Syscall)
	}
	return fmt.Sprintf("syscall %d of audit arch %#x", s.Syscall, s.Arch)
}
