// Package filter implements sysray's filter expressions, a small language in
// the style of sysdig's:
//
//	evt.type in (openat, open) and evt.res = ENOENT
//	evt.type = accept4 and evt.latency > 100ms
//	not proc.name = sshd and fd.name startswith /etc
//
// Parse checks fields, operators and literals up front and compiles the
// expression into a tree of typed nodes, so that Match, which runs once per
// event in `sysray trace`, does no parsing, no name lookups and, for the
// common fields, no allocation. Hints lets the caller push the cheap parts of
// a filter (which syscalls, how slow) into the kernel, where dropping an
// event costs far less than copying it to user space.
//
// docs/filter.md is the user-facing reference.
package filter
