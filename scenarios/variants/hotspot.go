package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var hotspotVariants = []Variant{
	// kernel-contention / kernel-hotspot: one syscall's kernel path takes a
	// large share of the time of the processes that call it. The demo runs
	// 1, 2, 4 writers in 4 cgroups with 4 KiB writes.
	{Name: "kernel-hotspot/one-cgroup", Differs: "4 writers in one cgroup, 200-byte lines (the case a new user first tried)",
		Mode: Cmd, Argv: []string{"fadvise", "-writers", "4", "-cgroups=false", "-write-size", "200", "-d", "2s"},
		Expect: hotspot},
	{Name: "kernel-hotspot/one-writer", Differs: "a single writer: nobody to contend with (info: one process may be doing its job)",
		Mode: Cmd, Argv: []string{"fadvise", "-writers", "1", "-cgroups=false", "-d", "2s"}, Expect: hotspotInfo},
	{Name: "kernel-hotspot/eight-writers", Differs: "8 writers, each in its own cgroup, for 1 s",
		Mode: Cmd, Argv: []string{"fadvise", "-writers", "8", "-d", "1s"}, Expect: hotspot},
	{Name: "kernel-hotspot/half-second", Differs: "3 writers in one cgroup for 0.5 s",
		Mode: Cmd, Argv: []string{"fadvise", "-writers", "3", "-cgroups=false", "-d", "500ms"}, Expect: hotspot},
	{Name: "kernel-hotspot/pid", Differs: "one writer already running; sysray attaches with -p for 2 s (info, as one process)",
		Mode: PID, Argv: []string{"fadvise-writer", "-f", "{tmp}/w.log", "-s", "200", "-d", "5"},
		Lead: time.Second, For: 2 * time.Second, Expect: hotspotInfo},
	{Name: "kernel-hotspot/host", Differs: "3 writers in one cgroup already running (for 9 s); sysray traces the whole host for 2 s",
		Mode: Host, Argv: []string{"fadvise", "-writers", "3", "-cgroups=false", "-d", "9s"},
		Lead: time.Second, For: 2 * time.Second, Expect: hotspot},
}

var hotspotInfo = Expect{IDs: []doctor.ID{doctor.KernelHotspot}, Severity: doctor.Info, Words: []string{"fadvise64"}}

var hotspot = Expect{IDs: []doctor.ID{doctor.KernelContention, doctor.KernelHotspot}, Severity: doctor.Warning, Words: []string{"fadvise64"}}
