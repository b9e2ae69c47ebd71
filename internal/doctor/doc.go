// Package doctor turns a stream of events into findings: what went wrong
// between a program and the kernel, the evidence, and the fix. Each detector
// keys on a mechanism (a fault address, a stack frame, an errno pattern, a
// regression), never on a program's name, and lives in a file of its own.
//
// Live runs the doctor over a live trace, with its policy for a host too
// sick to read much (live.go); ReadCapture runs it over a capture file.
package doctor
