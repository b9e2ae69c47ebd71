// Package chromejson writes an export timeline in the Trace Event Format
// (the JSON that chrome://tracing, Perfetto's UI, Speedscope and many other
// tools read): complete events ("X") for syscalls, instants ("i"), counters
// ("C"), metadata ("M") naming processes and threads, and flow events ("s",
// "f") from wakers to the calls they woke and from a signal to its delivery.
// Timestamps are microseconds with three decimals, so nanoseconds survive.
package chromejson
