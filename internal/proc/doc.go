// Package proc reads the process table from /proc and keeps it current from
// fork and exec events, so every event can be named after its process even
// when the process began before the capture or ended before the report. It
// also measures a process against the per-process and per-user limits whose
// errnos name another resource (limits.go): its mappings, inotify instances
// and watches, and its network namespace's TCP ports.
package proc
