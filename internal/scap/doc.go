// Package scap reads the capture files of sysdig and Falco (scap, the
// format their libscap writes: .scap, or .scap.gz) and turns them into
// sysray events, so that a capture taken with those tools can be read,
// counted and diagnosed by sysray.
//
// A scap file is a sequence of pcapng-style blocks: type (u32), total
// length (u32), body padded to 4 bytes, total length again, little-endian.
// This reader takes:
//
//   - the section header (0x0A0D0D0A, byte-order magic 0x1A2B3C4D; any
//     version, recorded in the import's header);
//   - the process list, versions 1 to 9 (0x202, 0x207, 0x209, 0x210 to
//     0x215): tid, pid, parent, comm, executable, argv and cwd of the
//     threads alive when the capture began, and their cgroups;
//   - the event blocks, with and without flags, in both event schemas:
//     v1 (0x204, 0x208: no parameter count in the event header, so it is
//     the count whose lengths add up to the event's length) and v2 (0x216,
//     0x217, and 0x221, 0x222 whose large-payload events have 32-bit
//     parameter lengths);
//   - containers: the container events (JSON, and the older id, type,
//     name, image form) and each thread's cgroups (process list v4 on,
//     clone and execve exits), in the layouts libsinsp finds ids in
//     (containers.go).
//
// Machine info, descriptor, interface and user lists are skipped. Event
// numbers, names and parameter types come from the tracer's event table,
// generated into tables.go by scripts/scap-tables.py; events are enter/exit
// pairs E, E+1, and syscalls without a pair of their own use the generic
// pair, whose parameter is the tracer's own syscall code (PPM_SC_*).
//
// Every length is checked against what remains of its block, and a block
// is read only as far as the file goes (at most maxBlock), so that a cut
// or corrupted file gives an error or a partial import with a count of
// what was skipped, never a panic or an allocation the file does not pay
// for.
package scap
