// Package perfetto writes an export timeline as a Perfetto trace: a
// protobuf Trace of TracePackets holding TrackDescriptors and TrackEvents,
// the format ui.perfetto.dev and trace_processor load. It encodes by field
// number with protowire, from Perfetto's published perfetto_trace.proto
// (pftest decodes the output with that schema, in the tests), rather than
// carry generated code for a schema of thousands of messages.
//
// All packets share one sequence. Event names, categories, argument names
// and short argument values are interned on it: defined once, in the packet
// that first uses them, and referred to by id after that.
package perfetto
