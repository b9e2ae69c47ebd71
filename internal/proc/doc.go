// Package proc reads the process table from /proc and keeps it current from
// fork and exec events, so every event can be named after its process even
// when the process began before the capture or ended before the report.
package proc
