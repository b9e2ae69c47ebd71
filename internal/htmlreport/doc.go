// Package htmlreport turns a capture into one self-contained HTML page: the
// doctor's findings, per-container, per-process and per-syscall counts and
// percentiles, a latency heatmap, a per-thread timeline, flame graphs of time
// in syscalls, and the capture's drops and metadata. Capture does it all for
// a capture file: it runs the doctor, reads the events into a Builder and
// writes the page in place of any old one only once it is whole.
//
// Events are aggregated here, in Go, so that the page stays small whatever
// the size of the capture: what reaches the page is bounded (bins, the
// slowest calls, pruned stack trees), never one record per event. The page
// carries its data as one JSON document, and its script builds the views
// from it with DOM text nodes and canvas drawing only, so names and paths
// from the traced programs cannot inject markup.
package htmlreport
