package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var blockedIOVariants = []Variant{
	// blocked-in-kernel-io: calls that do not ask for I/O waiting for it.
	// The unit tests hold the rule (cause from the sleep stack, I/O calls
	// excluded, half the call's time, the share for a warning); these run
	// it live on a file system the scenario mounts with `discard`, and
	// under lowered dirty limits. Each discard here takes ~20 ms against
	// ~250 ms of writing the file, so they are info: true, not urgent.
	{Name: "blocked-in-kernel-io/unlink-discard", Differs: "unlink of a 64 MiB file on ext4 (no journal) mounted with discard",
		Mode: Cmd, Argv: []string{"blockedio", "-op", "unlink", "-n", "6"}, Expect: blockedBy("unlink", "discard", "mounted with `discard`")},
	{Name: "blocked-in-kernel-io/otrunc-discard", Differs: "another call frees the blocks: open(O_TRUNC)",
		Mode: Cmd, Argv: []string{"blockedio", "-op", "otrunc", "-n", "6"}, Expect: blockedBy("openat", "discard")},
	{Name: "blocked-in-kernel-io/rename-4-procs", Differs: "rename over a file, 4 processes at once",
		Mode: Cmd, Argv: []string{"blockedio", "-op", "rename", "-procs", "4", "-n", "3", "-mb", "32"}, Expect: blockedBy("rename", "discard")},
	{Name: "blocked-in-kernel-io/dirty-throttle", Differs: "another cause: 8 MiB write() calls throttled in balance_dirty_pages under vm.dirty_bytes=4 MiB",
		Mode: Cmd, Argv: []string{"blockedio", "-mode", "dirty", "-mb", "64", "-n", "8"},
		Expect: blockedBy("write", "dirty-page throttling", "vm.dirty_bytes=4194304")},
	{Name: "blocked-in-kernel-io/truncate-pid", Differs: "ftruncate, already running; -p for 2 s",
		Mode: PID, Argv: []string{"blockedio", "-op", "truncate", "-d", "9s"},
		Lead: 500 * time.Millisecond, For: 2 * time.Second, Expect: blockedBy("ftruncate", "discard")},
	{Name: "blocked-in-kernel-io/dirty-host", Differs: "the throttled writer already running; the whole host for 2 s",
		Mode: Host, Argv: []string{"blockedio", "-mode", "dirty", "-mb", "64", "-d", "9s"},
		Lead: 500 * time.Millisecond, For: 2 * time.Second, Expect: blockedBy("write", "dirty-page throttling")},
}

func blockedBy(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.BlockedIO}, Severity: doctor.Info, Words: words}
}
