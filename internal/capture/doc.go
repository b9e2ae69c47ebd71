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
// before S2 compresses them: the tight loops a tracer records repeat almost
// everything but their timing, so an event costs a few bytes on disk.
//
// BlockBuilder and Writer.WriteBlock split the writer in two for callers
// that keep recent events in memory, such as the agent's flight recorder:
// BlockBuilder encodes events into a Block, one events frame already
// compressed (the very bytes Writer would write for those events), and
// WriteBlock puts such blocks into a capture later, as plain copies. A file
// assembled this way is byte for byte the one a Writer flushed at the same
// events would produce, so readers and truncation recovery treat it alike.
// A Block keeps about 5 bytes per event instead of a decoded event's
// hundreds, and writing one costs no encoding.
//
// The byte layout is specified in docs/capture-format.md; anything that
// changes it must change that document and, if old readers would misread the
// result, Version.
package capture
