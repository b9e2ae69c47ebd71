package doctor

import (
	"slices"

	"github.com/sysray/sysray/internal/event"
)

// ID names a kind of finding. It is stable: the agent's metrics, logs and
// users' alerts key on it.
type ID string

// Detector watches events and concludes.
type Detector interface {
	Observe(e *event.Event)
	Findings(env *Env) []Finding
}

// registration is how a detector joins the doctor: each detector's file
// registers itself from its init, so nothing central lists them.
type registration struct {
	// ids are the findings the detector reports.
	ids []ID
	// build makes one for a host.
	build func(h *Host) Detector
	// long: it follows a process's state as it grows, so it also runs in
	// NewLong's doctor, over hours.
	long bool
}

// registry holds the detectors in the order their files' inits ran: the
// order of the files' names, which is the order findings of equal
// severity and score are reported in.
var registry []registration

func register(r registration) { registry = append(registry, r) }

// IDs lists every finding the registered detectors can report.
func IDs() []ID {
	var out []ID
	for _, r := range registry {
		for _, id := range r.ids {
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	return out
}

// SyscallRefused is reported by two detectors, each from its own
// evidence: syscall-refused for calls a seccomp filter answered with an
// errno, fatal-signal's for a process the filter killed (SIGSYS), so the
// one mechanism has one id however the filter acts.
const SyscallRefused ID = "syscall-refused"

// detectors makes the registered detectors for a host: every one, or only
// the long ones.
func detectors(h *Host, long bool) []Detector {
	var out []Detector
	for _, r := range registry {
		if !long || r.long {
			out = append(out, r.build(h))
		}
	}
	return out
}
