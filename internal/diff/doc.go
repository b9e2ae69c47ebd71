// Package diff compares two tallies of syscalls (from captures or from
// `sysray stat --json` documents): per row, the change in calls, rate,
// errors by errno and latency percentiles, with rows and errnos that
// appeared or vanished called out, ordered by the time at stake. It reads
// both inputs itself: a capture is counted exactly, as `sysray stat -r`
// counts it (ReadCapture), a stat document taken as it stands (ReadStat).
// It also folds the stacks of captured slow syscalls, on and off CPU, so
// that two captures can be drawn as one differential flame graph.
package diff
