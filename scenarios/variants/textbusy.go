package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var textBusyVariants = []Variant{
	// text-busy: a write to a running program, or an exec of a file open
	// for writing, refused with ETXTBSY. These vary the call refused, the
	// direction, how many processes hold or are refused, and when sysray
	// starts; the answer (who holds the file) is read by inode.
	{Name: "text-busy/write", Differs: "openat(O_WRONLY|O_TRUNC) of a binary a server runs, refused 6 times 100 ms apart, then exit 1",
		Mode: Cmd, Argv: []string{"textbusy", "-b", "100"},
		Expect: tbWarns("openat", "running executable (/proc/PID/exe) of server[", "gave up: exit status 1")},
	{Name: "text-busy/rdwr", Differs: "open(O_RDWR), the open syscall rather than openat",
		Mode: Cmd, Argv: []string{"textbusy", "-m", "rdwr", "-b", "100"},
		Expect: tbWarns("6 open call(s)", "of server[", "gave up")},
	{Name: "text-busy/truncate", Differs: "truncate(path, 0) of the running binary",
		Mode: Cmd, Argv: []string{"textbusy", "-m", "truncate", "-b", "100"},
		Expect: tbWarns("truncate", "of server[", "gave up")},
	{Name: "text-busy/exec", Differs: "the other direction: execve of a script another process keeps open for writing",
		Mode: Cmd, Argv: []string{"textbusy", "-m", "exec", "-b", "100"},
		Expect: tbWarns("execve", "textbusy-edit[", "held it open for writing", "gave up")},
	{Name: "text-busy/procs", Differs: "3 servers run the binary and 4 deployer processes are each refused",
		Mode: Cmd, Argv: []string{"textbusy", "-n", "3", "-p", "4", "-b", "100"},
		Expect: tbWarns("4 processes", "failed 24 time(s)", "of server[", "], server[", "gave up")},
	{Name: "text-busy/pid", Differs: "refused before sysray starts (retrying every 100 ms, up to 30 s); -p --children for 1.5 s",
		Mode: PID, Argv: []string{"textbusy", "-r", "300", "-b", "100"},
		Lead: time.Second, For: 1500 * time.Millisecond,
		Expect: tbWarns("openat", "of server[", "kept retrying")},
	{Name: "text-busy/host", Differs: "the exec direction retrying before sysray starts; the whole host for 1.5 s",
		Mode: Host, Argv: []string{"textbusy", "-m", "exec", "-r", "300", "-b", "100"},
		Lead: time.Second, For: 1500 * time.Millisecond,
		Expect: tbWarns("execve", "textbusy-edit[", "kept retrying")},
	{Name: "text-busy/container", Differs: "a write to the running binary refused in a container (containerd, runc), retrying before sysray starts; --container for 1.5 s",
		Mode: InContainer, Container: &Container{}, Argv: []string{"textbusy", "-r", "300", "-b", "100"},
		Lead: 1500 * time.Millisecond, For: 1500 * time.Millisecond,
		Expect: tbWarns("openat", "of server[", "not the host's", "/root/tmp/textbusy.", "kept retrying")},
	{Name: "text-busy/rename", Differs: "benign: the new version written beside the old and renamed over it (as install does): no ETXTBSY",
		Mode: Cmd, Argv: []string{"textbusy", "-m", "rename"},
		Expect: Expect{IDs: []doctor.ID{doctor.TextBusy}, Silent: true}},
	{Name: "text-busy/probe", Differs: "benign: one refused openat, then the rename, exit 0",
		Mode: Cmd, Argv: []string{"textbusy", "-m", "probe"},
		Expect: Expect{IDs: []doctor.ID{doctor.TextBusy}, Below: doctor.Warning}},
}

func tbWarns(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.TextBusy}, Severity: doctor.Warning, Words: append([]string{"ETXTBSY"}, words...)}
}
