package session

import (
	"os"
	"strconv"
	"time"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/proc"
	"github.com/sysray/sysray/internal/redact"
	"github.com/sysray/sysray/internal/version"
)

// Header meta keys that say which optional data a capture holds
// (docs/capture-format.md). A capture without "absent" predates them, or
// comes from a writer that does not say: what it holds is unknown.
const (
	MetaAbsent     = "absent"      // what the writer did not collect, comma-separated; "" for nothing
	MetaStacksSlow = "stacks_slow" // ns: calls at least this slow carry where they slept
	// MetaRedacted says what the writer hid: "argv" (credentials in
	// command lines, internal/redact) or "none" (--keep-secrets).
	MetaRedacted = "redacted"
	// MetaVersion is the writer's `sysray --version`.
	MetaVersion = "sysray_version"
)

// Header describes this host for a capture of a live run begun now: the
// processes known (procs), the containers' table (Live.Snapshot), and
// whether calls at least slow ns long carry where they slept (stacks), with
// only the kernel stacks of their sleeps and their wakers' names, and a
// wait by design's short sleeps with none (lean, as the agent's doctor
// follows them: probe.Config.LeanStacks and WaitCalls).
// record and the agent's flight recorder write the same header, so that
// a reader elsewhere names calls, processes and containers as they did.
func Header(arch event.Arch, procs []proc.Info, containers string, stacks, lean bool, slow uint64) *capture.Header {
	node, kernel := host.Uname()
	hdr := &capture.Header{Arch: arch, Hostname: node, Kernel: kernel, BootTime: host.BootTime(),
		Start: time.Now().UnixNano(), Command: redact.Argv(os.Args), Syscalls: event.SyscallNames(arch), Procs: procs, Meta: host.Facts()}
	hdr.Meta[MetaContainers] = containers
	hdr.Meta[MetaVersion] = version.Get().String()
	hdr.Meta[MetaRedacted] = "argv"
	if redact.Kept() {
		hdr.Meta[MetaRedacted] = "none"
	}
	// Without sleeps and stacks the doctor cannot tell a slow call that
	// ran on the CPU from one that slept.
	if !stacks {
		hdr.Meta[MetaAbsent] = "stacks"
	} else {
		hdr.Meta[MetaAbsent] = ""
		if lean {
			hdr.Meta[MetaAbsent] = "waker_stacks,user_stacks,wait_stacks"
		}
		hdr.Meta[MetaStacksSlow] = strconv.FormatUint(slow, 10)
	}
	return hdr
}
