// Package export turns a capture into a timeline that trace viewers read:
// tracks (processes, their threads, counters) and the items on them
// (syscall slices, instants, counter values, flows). It reads the capture
// twice: the first pass learns the names, the containers, the lanes that keep
// every track's slices properly nested, the waker-to-woken flows and the
// syscall rates; the second streams the items to a Sink, so memory grows
// with threads and syscalls' time ranges, not with the events' contents.
// Capture does all of it for a capture file, read with its own process and
// container tables, and writes the trace file. The file formats live in the
// subpackages perfetto and chromejson.
package export
