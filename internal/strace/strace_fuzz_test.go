package strace

import (
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// Any text, parsed and converted, gives events or errors, never a panic.
func FuzzConvert(f *testing.F) {
	for _, s := range []string{
		`9138  1795457949.266541 openat(AT_FDCWD</tmp>, "/tmp/f\x01"..., O_WRONLY|O_CREAT, 0640) = 3</tmp/f> <0.000080>`,
		`[pid 7] 1.0 clone3({flags=CLONE_VM|CLONE_THREAD, exit_signal=0} => {parent_tid=[8]}, 88) = 8 <0.1>`,
		"7 1.0 read(3, <unfinished ...>\n7 1.1 <... read resumed>\"ab\", 2) = 2 <0.1>",
		`8 1.2 --- SIGSEGV {si_signo=SIGSEGV, si_code=SEGV_MAPERR, si_addr=0x10} ---`,
		"8 1.3 +++ killed by SIGSEGV (core dumped) +++\n7 1.4 exit_group(0) = ?",
		`1 1.0 connect(3, {sa_family=AF_INET6, sin6_port=htons(80), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, 28) = 0`,
		`1 1.0 sendto(5, [{nlmsg_len=60, nlmsg_type=AUDIT_SET, nlmsg_flags=NLM_F_REQUEST}, "\x33\x00\x00\x00\x01"...], 60, 0, NULL, 0) = 60`,
		`1 1.0 mmap(NULL, 4096, PROT_READ, MAP_PRIVATE|MAP_HUGETLB|21<<MAP_HUGE_SHIFT, -1, 0) = -1 (errno 12)`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		c := NewConverter(event.ArchAMD64, func(*event.Event) error { return nil })
		for _, line := range strings.Split(text, "\n") {
			if l, err := Parse(line); err == nil {
				c.Feed(&l, 0)
			}
		}
		c.Close()
	})
}
