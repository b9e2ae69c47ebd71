package event

import "testing"

func TestSignalName(t *testing.T) {
	tests := []struct {
		sig  int
		want string
	}{
		{0, ""},
		{1, "SIGHUP"},
		{2, "SIGINT"},
		{6, "SIGABRT"},
		{7, "SIGBUS"},
		{9, "SIGKILL"},
		{10, "SIGUSR1"},
		{11, "SIGSEGV"},
		{15, "SIGTERM"},
		{16, "SIGSTKFLT"},
		{17, "SIGCHLD"},
		{19, "SIGSTOP"},
		{29, "SIGIO"},
		{31, "SIGSYS"},
		{32, "SIGRT_0"},
		{33, "SIGRT_1"},
		{34, "SIGRTMIN"},
		{35, "SIGRTMIN+1"},
		{64, "SIGRTMIN+30"},
		{65, ""},
		{-1, ""},
	}
	for _, tt := range tests {
		if got := SignalName(tt.sig); got != tt.want {
			t.Errorf("SignalName(%d) = %q, want %q", tt.sig, got, tt.want)
		}
	}
}

func TestSignalByName(t *testing.T) {
	for sig := 1; sig <= 64; sig++ {
		if got, ok := SignalByName(SignalName(sig)); !ok || got != sig {
			t.Errorf("SignalByName(%q) = %d, %v; want %d", SignalName(sig), got, ok, sig)
		}
	}
	tests := []struct {
		s    string
		want int
		ok   bool
	}{
		{"SIGSEGV", 11, true},
		{"SEGV", 11, true},
		{"segv", 11, true},
		{"11", 11, true},
		{" SIGTERM ", 15, true},
		{"SIGIOT", 6, true},
		{"SIGPOLL", 29, true},
		{"SIGCLD", 17, true},
		{"SIGRTMIN", 34, true},
		{"RTMIN+2", 36, true},
		{"SIGRTMAX", 64, true},
		{"SIGRTMAX-1", 63, true},
		{"SIGRT_1", 33, true},
		{"SIGRTMIN-1", 0, false},
		{"SIGRTMAX+1", 0, false},
		{"SIGRTMIN+31", 0, false},
		{"SIGRT_40", 0, false},
		{"0", 0, false},
		{"65", 0, false},
		{"SIGFOO", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, ok := SignalByName(tt.s)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("SignalByName(%q) = %d, %v; want %d, %v", tt.s, got, ok, tt.want, tt.ok)
		}
	}
}

func TestSigCodeName(t *testing.T) {
	tests := []struct {
		sig, code int
		want      string
	}{
		{11, 1, "SEGV_MAPERR"},
		{11, 2, "SEGV_ACCERR"},
		{11, 3, "SEGV_BNDERR"},
		{11, 4, "SEGV_PKUERR"},
		{11, 10, "SEGV_CPERR"},
		{11, 11, "11"},
		{7, 1, "BUS_ADRALN"},
		{7, 2, "BUS_ADRERR"},
		{7, 5, "BUS_MCEERR_AO"},
		{4, 1, "ILL_ILLOPC"},
		{4, 9, "ILL_BADIADDR"},
		{8, 1, "FPE_INTDIV"},
		{8, 8, "FPE_FLTSUB"},
		{8, 9, "9"},
		{8, 14, "FPE_FLTUNK"},
		{8, 15, "FPE_CONDTRAP"},
		{5, 1, "TRAP_BRKPT"},
		{5, 2, "TRAP_TRACE"},
		{5, 6, "TRAP_PERF"},
		{17, 1, "CLD_EXITED"},
		{17, 2, "CLD_KILLED"},
		{17, 3, "CLD_DUMPED"},
		{17, 6, "CLD_CONTINUED"},
		{29, 1, "POLL_IN"},
		{29, 6, "POLL_HUP"},
		{31, 1, "SYS_SECCOMP"},
		{11, 0, "SI_USER"},
		{9, 0x80, "SI_KERNEL"},
		{11, 0x80, "SI_KERNEL"},
		{10, -1, "SI_QUEUE"},
		{14, -2, "SI_TIMER"},
		{10, -3, "SI_MESGQ"},
		{10, -4, "SI_ASYNCIO"},
		{29, -5, "SI_SIGIO"},
		{6, -6, "SI_TKILL"},
		{9, -7, "SI_DETHREAD"},
		{15, 1, "1"}, // SIGTERM has no kernel-specific codes
		{15, -99, "-99"},
	}
	for _, tt := range tests {
		if got := SigCodeName(tt.sig, tt.code); got != tt.want {
			t.Errorf("SigCodeName(%d, %d) = %q, want %q", tt.sig, tt.code, got, tt.want)
		}
	}
}
