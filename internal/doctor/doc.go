// Package doctor turns a stream of events into findings: what went wrong
// between a program and the kernel, the evidence, and the fix. Each detector
// keys on a mechanism (a fault address, a stack frame, an errno pattern, a
// regression), never on a program's name.
//
// A detector is one unit: its files are detect_NAME.go (and
// detect_NAME_PART.go), it registers itself from their init (register),
// owns its thresholds, and uses only the doctor's core (every file not
// named detect_*), never another detector; the core uses no detector.
// TestDetectorsIndependent holds both rules.
//
// The doctor is a library: events, the kernel's counts and host facts
// in, findings out. Running it, live or over a capture file, is
// internal/checkup's; TestDoctorIsALibrary holds the line.
package doctor
