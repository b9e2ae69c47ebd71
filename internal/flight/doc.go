// Package flight is the agent's flight recorder: it keeps the last seconds
// of events in memory and, when something goes wrong, writes them out as an
// ordinary capture that `sysray doctor -r`, `read` and `report` open like
// any other.
//
// A Recorder holds events as compressed capture blocks (capture.Block),
// about 5 bytes per event rather than a decoded event's hundreds, so that
// 30 seconds of a busy host fit in tens of megabytes. The event reader adds
// events one by one; every second of event time, or every 256 KiB of
// encoded events, the open block is sealed and blocks that have left the
// window, or that push the total over the memory cap, are dropped, oldest
// first. A snapshot seals the open block and copies the kept blocks into a
// new file: no event is decoded or encoded again, so a snapshot costs a
// file write and does not stall the event reader.
//
// The window is counted in event time (Event.Time, CLOCK_MONOTONIC), not
// wall-clock time: a recorder that has seen no event for an hour still
// holds the 30 seconds before its last one, which is the interesting part
// when a container died and then went quiet. Blocks are kept or dropped
// whole, so a snapshot reaches back at least the window and at most the
// window plus one block's span.
//
// Dir manages the directory snapshots go to: file names that say when and
// why, a cap on total size and count enforced oldest first, private files
// written whole (a temporary name, then a link to the final one), and a
// listing and opener that serve only the captures it wrote. Cooldown helps
// a caller write one capture per finding rather than one per repetition.
package flight
