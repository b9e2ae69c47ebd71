package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var inotifyVariants = []Variant{
	// inotify-watch-limit and inotify-instance-limit: the per-user inotify
	// limits refusing with errnos that name the disk and the descriptor
	// table. Every run uses inotifyfill -N, a user namespace of the
	// watcher's own, so no other user's watches are refused; they vary the
	// limit, the processes sharing it, the retries, and how sysray is
	// pointed at it.
	{Name: "inotify-watch-limit/userns", Differs: "one watcher, a namespace limit of 512 watches, 50 retries every 10 ms",
		Mode: Cmd, Argv: []string{"inotifyfill", "-N", "-r", "50"},
		Expect: inotifyWarns(doctor.InotifyWatchLimit, "inotify_add_watch", "ENOSPC", "512 watches", "user namespace", "not what ran out")},
	{Name: "inotify-watch-limit/3-procs", Differs: "3 watchers of one uid share the limit: the first holds it all, the others are refused holding none",
		Mode: Cmd, Argv: []string{"inotifyfill", "-N", "-P", "3", "-r", "30"},
		Expect: inotifyWarns(doctor.InotifyWatchLimit, "3 processes", "ENOSPC", "512 watches in 3 process(es)")},
	{Name: "inotify-watch-limit/one-refusal", Differs: "a limit of 64 and no retry: one refusal in all, and the watcher exits before the doctor reads its user's holders",
		Mode: Cmd, Argv: []string{"inotifyfill", "-N", "-l", "64", "-r", "0"},
		Expect: inotifyWarns(doctor.InotifyWatchLimit, "1 inotify watch", "ENOSPC", "added 64 watch")},
	{Name: "inotify-watch-limit/pid", Differs: "refused before sysray starts, retrying every 10 ms; -p for 1.5 s",
		Mode: PID, Argv: []string{"inotifyfill", "-N", "-r", "400"},
		Lead: time.Second, For: 1500 * time.Millisecond,
		Expect: inotifyWarns(doctor.InotifyWatchLimit, "inotify_add_watch", "ENOSPC", "512 watches")},
	{Name: "inotify-watch-limit/host", Differs: "2 watchers refused before sysray starts; the whole host for 1.5 s",
		Mode: Host, Argv: []string{"inotifyfill", "-N", "-P", "2", "-r", "400"},
		Lead: time.Second, For: 1500 * time.Millisecond,
		Expect: inotifyWarns(doctor.InotifyWatchLimit, "2 processes", "ENOSPC", "512 watches")},
	{Name: "inotify-instance-limit/init1", Differs: "instances until inotify_init1 fails with EMFILE at the host's max_user_instances, 133 descriptors open",
		Mode: Cmd, Argv: []string{"inotifyfill", "-N", "-m", "instances", "-r", "20"},
		Expect: inotifyWarns(doctor.InotifyInstanceLimit, "inotify_init1", "EMFILE", "instance limit", "fs.inotify.max_user_instances")},
	{Name: "inotify-instance-limit/ns-16-2-procs", Differs: "2 processes share a namespace limit of 16 instances",
		Mode: Cmd, Argv: []string{"inotifyfill", "-N", "-m", "instances", "-l", "16", "-P", "2", "-r", "20"},
		Expect: inotifyWarns(doctor.InotifyInstanceLimit, "2 processes", "EMFILE", "16 instances", "user namespace")},
	{Name: "inotify-instance-limit/pid", Differs: "refused before sysray starts, retrying for 10 s; -p for 1.5 s",
		Mode: PID, Argv: []string{"inotifyfill", "-N", "-m", "instances", "-r", "1000"},
		Lead: time.Second, For: 1500 * time.Millisecond,
		Expect: inotifyWarns(doctor.InotifyInstanceLimit, "inotify_init1", "EMFILE", "instance limit")},
	{Name: "inotify-watch-limit/container", Differs: "refused in a container (containerd, runc; privileged only to make the watcher's user namespace) before sysray starts; -p its pid --children for 1.5 s",
		Mode: PID, Container: &Container{Privileged: true}, Argv: []string{"inotifyfill", "-N", "-r", "3000"},
		Lead: 1500 * time.Millisecond, For: 1500 * time.Millisecond,
		Expect: inotifyWarns(doctor.InotifyWatchLimit, "inotify_add_watch", "ENOSPC", "512 watches", "user namespace")},
	{Name: "inotify-instance-limit/container", Differs: "refused in a container (containerd, runc; privileged only to make the watcher's user namespace) before sysray starts; --container for 1.5 s",
		Mode: InContainer, Container: &Container{Privileged: true}, Argv: []string{"inotifyfill", "-N", "-m", "instances", "-r", "3000"},
		Lead: 1500 * time.Millisecond, For: 1500 * time.Millisecond,
		Expect: inotifyWarns(doctor.InotifyInstanceLimit, "inotify_init1", "EMFILE", "instance limit")},
}

func inotifyWarns(id doctor.ID, words ...string) Expect {
	return Expect{IDs: []doctor.ID{id}, Severity: doctor.Warning, Words: words}
}
