// Package checkup runs the doctor: on a live host, where it loads the
// probe with the doctor's settings (Configure), feeds the events to a
// doctor.Doctor, drains the kernel's count table (stat.Drain), samples the
// CPUs and guards against a full audit backlog; or on a capture file.
// The doctor itself (internal/doctor) is a library of detectors that
// knows none of this: events and host facts in, findings out. The agent
// shares the settings, the samples' naming and the audit sleepers.
package checkup
