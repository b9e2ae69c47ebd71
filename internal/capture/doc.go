// Package capture reads and writes sysray capture files: a header describing
// the host the events came from, a stream of independently compressed blocks
// of events, and a trailer that marks a clean end.
//
// The file is written as events arrive, so that a capture cut short by a
// crash, a full disk or a kill -9 still yields every block that reached the
// disk; the trailer exists only to tell such a file from a complete one.
// Blocks are self-contained (their delta state resets at each block), which
// is what makes recovery up to the last whole block possible.
//
// Events are delta-encoded against the previous event of the same thread, and
// syscall arguments against that thread's previous call of the same syscall,
// before zstd sees them: the tight loops a tracer records repeat almost
// everything but their timing, so an event costs a few bytes on disk.
//
// The byte layout is specified in docs/capture-format.md; anything that
// changes it must change that document and, if old readers would misread the
// result, Version.
package capture
