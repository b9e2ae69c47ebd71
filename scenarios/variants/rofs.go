package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var rofsVariants = []Variant{
	// read-only-fs: changes to a path refused with EROFS. rofs mounts in a
	// mount namespace of its own, so the answer (which mount, read-only
	// how) is only in that namespace's mountinfo; these vary the call, the
	// kind of read-only mount, the processes and when sysray starts.
	{Name: "read-only-fs/create", Differs: "openat(O_CREAT) of a log in a tmpfs remounted read-only, refused 6 times 100 ms apart, then exit 1",
		Mode: Cmd, Argv: []string{"rofs", "-b", "100"},
		Expect: rofsWarns("openat", `"/tmp/rofs/app/data"`, "not the host's", "ro in its superblock options", "gave up: exit status 1")},
	{Name: "read-only-fs/mkdir", Differs: "mkdir into a read-only bind mount of a writable tmpfs",
		Mode: Cmd, Argv: []string{"rofs", "-m", "mkdir", "-k", "bind", "-b", "100"},
		Expect: rofsWarns("mkdir", "Only this mount is read-only", "gave up")},
	{Name: "read-only-fs/unlink", Differs: "unlink of an existing file in the read-only tmpfs",
		Mode: Cmd, Argv: []string{"rofs", "-m", "unlink", "-b", "100"},
		Expect: rofsWarns("unlink", `"/tmp/rofs/app/data/old.log"`, "gave up")},
	{Name: "read-only-fs/rename", Differs: "a log rotation (rename) in an overlay with no upper layer",
		Mode: Cmd, Argv: []string{"rofs", "-m", "rename", "-k", "overlay", "-b", "100"},
		Expect: rofsWarns("rename", "no upper layer", "gave up")},
	{Name: "read-only-fs/procs", Differs: "4 worker processes each refused 6 times on the read-only bind mount",
		Mode: Cmd, Argv: []string{"rofs", "-k", "bind", "-p", "4", "-b", "100"},
		Expect: rofsWarns("4 processes", "24 openat call(s)", "Only this mount is read-only")},
	{Name: "read-only-fs/pid", Differs: "refused before sysray starts (retrying every 100 ms, up to 30 s); -p --children for 1.5 s",
		Mode: PID, Argv: []string{"rofs", "-r", "300", "-b", "100"},
		Lead: time.Second, For: 1500 * time.Millisecond,
		Expect: rofsWarns("openat", `"/tmp/rofs/app/data"`, "not the host's", "kept retrying")},
	{Name: "read-only-fs/host", Differs: "mkdir into the read-only bind mount retrying before sysray starts; the whole host for 1.5 s",
		Mode: Host, Argv: []string{"rofs", "-m", "mkdir", "-k", "bind", "-r", "300", "-b", "100"},
		Lead: time.Second, For: 1500 * time.Millisecond,
		Expect: rofsWarns("mkdir", "Only this mount is read-only", "kept retrying")},
	{Name: "read-only-fs/container", Differs: "a container whose root filesystem is read-only (containerd, runc --read-only): a log created in /root, its own root, refused; the whole host for 1.5 s",
		Mode: Host, Container: &Container{ReadOnly: true}, Argv: []string{"rofs", "-k", "as-is", "-D", "/root", "-r", "300", "-b", "100"},
		Lead: 1500 * time.Millisecond, For: 1500 * time.Millisecond,
		Expect: rofsWarns("openat", `"/root/out.log"`, "the container's read-only root", "readOnlyRootFilesystem", "kept retrying")},
	{Name: "read-only-fs/probe", Differs: "benign: one create refused, the same file written in a writable directory instead, exit 0",
		Mode: Cmd, Argv: []string{"rofs", "-m", "probe"},
		Expect: Expect{IDs: []doctor.ID{doctor.ReadOnlyFS}, Below: doctor.Warning}},
}

func rofsWarns(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.ReadOnlyFS}, Severity: doctor.Warning, Words: append([]string{"EROFS"}, words...)}
}
